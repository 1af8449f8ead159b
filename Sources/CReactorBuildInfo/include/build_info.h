#ifndef REACTOR_BUILD_INFO_H
#define REACTOR_BUILD_INFO_H

/// The version (`git describe --tags --always --dirty`) and the commit this build was made
/// from, as Package.swift read them from REACTOR_SERVER_VERSION and REACTOR_SERVER_COMMIT at
/// build time; "unknown" when they were not set.
const char *reactor_build_version(void);
const char *reactor_build_commit(void);

#endif
