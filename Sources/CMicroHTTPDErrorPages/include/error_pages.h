#ifndef CMICROHTTPD_ERROR_PAGES_H
#define CMICROHTTPD_ERROR_PAGES_H

#include <microhttpd.h>
#include <stdint.h>

/// Builds the response that replaces one of libmicrohttpd's own error pages: `local_port` is the
/// port the connection came in on (0 if unknown; with a thread pool, the connection's daemon is
/// an internal worker, so the port is what tells servers apart), `status` the status
/// libmicrohttpd answers with, `detail` the page's text without markup. Returns a new response
/// (the caller destroys it after queueing), or NULL to send libmicrohttpd's page as it is.
typedef struct MHD_Response *_Nullable (*cmhd_error_page_builder)(
    uint16_t local_port, unsigned int status, const char *_Nonnull detail);

/// Installs the builder for every daemon in the process (NULL removes it).
void cmhd_set_error_page_builder(cmhd_error_page_builder _Nullable builder);

#endif
