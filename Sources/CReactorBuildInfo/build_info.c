#include "build_info.h"

// Defined by Package.swift from the environment of the build (see there); never committed.
#ifndef REACTOR_BUILD_VERSION
#define REACTOR_BUILD_VERSION "unknown"
#endif
#ifndef REACTOR_BUILD_COMMIT
#define REACTOR_BUILD_COMMIT "unknown"
#endif

const char *reactor_build_version(void) { return REACTOR_BUILD_VERSION; }
const char *reactor_build_commit(void) { return REACTOR_BUILD_COMMIT; }
