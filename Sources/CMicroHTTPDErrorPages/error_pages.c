// libmicrohttpd 0.9.75 answers some faulty requests itself, before any handler sees them: a
// header section larger than the connection's memory pool (431, or 414 for a request line), a
// malformed request or chunk (400), an unsupported HTTP version (505), a missing Host (400).
// Its body is a fixed HTML page and there is no option to change it. It builds that page with
// `MHD_create_response_from_buffer` and sends it with `MHD_queue_response`, both called through
// the library's PLT, so the definitions below take their place in this process: they forward
// every call to libmicrohttpd, except that a response made from one of its HTML pages is swapped,
// when it is queued, for the response the installed builder makes (problem+json in the
// service). Nothing else changes: libmicrohttpd still closes the connection after the error.
//
// One error it cannot send whole: a Content-Length that is not a number of bytes it can hold
// ("abc", "-5", "5, 5", 21 digits). It finds it while parsing the header section, where its
// error path builds the response head and then the parsing goes on to build it once more, so
// the client gets the head twice (a 400 or 413 whose body is the second head). Its parser looks
// the value up through `MHD_lookup_connection_value_n`, called through the PLT too, so the
// definition below answers "no such header" for such a value: the request then reaches the
// server's first call with its header lines, which still hold the value, and the server refuses
// it there (MicroHTTP's framing checks), before any byte of a body is read.
#define _GNU_SOURCE
#include "error_pages.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct MHD_Response *(*create_from_buffer_fn)(size_t, void *, enum MHD_ResponseMemoryMode);
typedef enum MHD_Result (*queue_response_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
typedef enum MHD_Result (*lookup_value_n_fn)(struct MHD_Connection *, enum MHD_ValueKind, const char *, size_t,
                                             const char **, size_t *);

static _Atomic(cmhd_error_page_builder) installed_builder;

/// The page libmicrohttpd built last on this thread; it queues it right after building it.
static _Thread_local struct MHD_Response *page_response;
static _Thread_local const char *page_text;
static _Thread_local size_t page_length;

static const char page_prefix[] = "<html><head><title>";

void cmhd_set_error_page_builder(cmhd_error_page_builder builder) {
    atomic_store(&installed_builder, builder);
}

/// libmicrohttpd's own definition of `name` (the next one after this file's), looked up once.
static void *next_definition(_Atomic(void *) *cache, const char *name) {
    void *function = atomic_load_explicit(cache, memory_order_acquire);
    if (function == NULL) {
        function = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(cache, function, memory_order_release);
    }
    return function;
}

static _Atomic(void *) create_from_buffer_definition;
static _Atomic(void *) queue_response_definition;

static _Atomic(void *) lookup_value_n_definition;

static create_from_buffer_fn real_create_from_buffer(void) {
    return (create_from_buffer_fn)next_definition(&create_from_buffer_definition, "MHD_create_response_from_buffer");
}

static queue_response_fn real_queue_response(void) {
    return (queue_response_fn)next_definition(&queue_response_definition, "MHD_queue_response");
}

static lookup_value_n_fn real_lookup_value_n(void) {
    return (lookup_value_n_fn)next_definition(&lookup_value_n_definition, "MHD_lookup_connection_value_n");
}

/// Whether `value` is a Content-Length libmicrohttpd 0.9.75 reads without an error of its own:
/// one or more decimal digits whose number fits in 64 bits.
static int readable_length(const char *value, size_t size) {
    if (value == NULL || size == 0) return 0;
    uint64_t number = 0;
    for (size_t i = 0; i < size; i++) {
        if (value[i] < '0' || value[i] > '9') return 0;
        uint64_t digit = (uint64_t)(value[i] - '0');
        if (number > (UINT64_MAX - digit) / 10) return 0;
        number = number * 10 + digit;
    }
    return 1;
}

enum MHD_Result MHD_lookup_connection_value_n(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                              const char *key, size_t key_size, const char **value_ptr,
                                              size_t *value_size_ptr) {
    const char *value = NULL;
    size_t size = 0;
    enum MHD_Result found = real_lookup_value_n()(connection, kind, key, key_size, &value, &size);
    if (found != MHD_YES) return found;
    if ((kind & MHD_HEADER_KIND) != 0 && key != NULL && key_size == 14 && strncasecmp(key, "Content-Length", 14) == 0
        && !readable_length(value, size)) {
        return MHD_NO;
    }
    if (value_ptr != NULL) *value_ptr = value;
    if (value_size_ptr != NULL) *value_size_ptr = size;
    return found;
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode) {
    struct MHD_Response *response = real_create_from_buffer()(size, buffer, mode);
    size_t prefix = sizeof(page_prefix) - 1;
    if (response != NULL && buffer != NULL && mode == MHD_RESPMEM_PERSISTENT && size > prefix
        && memcmp(buffer, page_prefix, prefix) == 0) {
        page_response = response;
        page_text = buffer;
        page_length = size;
    }
    return response;
}

/// The page's body text without tags, with `&quot;` as `"`; `out` holds `capacity` bytes.
static void page_detail(const char *page, size_t length, char *out, size_t capacity) {
    const char *start = page, *end = page + length;
    const char *body = memmem(page, length, "<body>", 6);
    if (body != NULL) start = body + 6;
    size_t used = 0;
    int in_tag = 0;
    for (const char *p = start; p < end && used + 1 < capacity; p++) {
        if (*p == '<') { in_tag = 1; continue; }
        if (*p == '>') { in_tag = 0; continue; }
        if (in_tag) continue;
        if (*p == '&' && (size_t)(end - p) >= 6 && memcmp(p, "&quot;", 6) == 0) {
            out[used++] = '"';
            p += 5;
            continue;
        }
        out[used++] = *p;
    }
    out[used] = '\0';
}

/// The port `connection` was accepted on, or 0.
static uint16_t local_port(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL) return 0;
    struct sockaddr_storage address;
    socklen_t length = sizeof(address);
    if (getsockname(info->connect_fd, (struct sockaddr *)&address, &length) != 0) return 0;
    if (address.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&address)->sin_port);
    if (address.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    return 0;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response) {
    cmhd_error_page_builder builder = atomic_load(&installed_builder);
    if (response == NULL || response != page_response || builder == NULL) {
        return real_queue_response()(connection, status, response);
    }
    page_response = NULL;
    char detail[512];
    page_detail(page_text, page_length, detail, sizeof(detail));
    struct MHD_Response *replacement = builder(local_port(connection), status, detail);
    if (replacement == NULL) return real_queue_response()(connection, status, response);
    enum MHD_Result result = real_queue_response()(connection, status, replacement);
    MHD_destroy_response(replacement);
    return result;
}
