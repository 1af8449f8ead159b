#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <malloc.h>

/*
 * Wrappers for what Swift cannot call directly: the variadic functions of
 * libmicrohttpd (MHD_start_daemon, MHD_get_daemon_info, MHD_get_connection_info)
 * and an unescape callback that leaves URIs untouched so that the Swift side
 * sees the raw path and decodes it itself.
 */

/** Options for cmhd_start_daemon; zero means "libmicrohttpd's default" unless noted. */
struct cmhd_options {
  unsigned int connection_limit;
  size_t connection_memory_limit;
  unsigned int connection_timeout_seconds;
  MHD_RequestCompletedCallback notify_completed;
  void *notify_completed_cls;
  /** A bound, listening socket the daemon accepts from (several daemons may share one). Required. */
  int listen_fd;
  /** Receives libmicrohttpd's own messages (MHD_USE_ERROR_LOG); NULL: it logs nothing. */
  MHD_LogCallback logger;
  void *logger_cls;
};

/** Leaves the string as it is: the URI stays percent-encoded for the Swift side. */
static inline size_t cmhd_unescape_keep(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls; (void)c;
  return strlen(s);
}

/** The logger of a daemon started without MHD_USE_ERROR_LOG, which never calls it. */
static inline void cmhd_log_nothing(void *cls, const char *format, va_list arguments) {
  (void)cls; (void)format; (void)arguments;
}

static inline struct MHD_Daemon *cmhd_start_daemon(unsigned int flags, uint16_t port,
                                                   MHD_AccessHandlerCallback handler,
                                                   void *handler_cls,
                                                   const struct cmhd_options *o) {
  struct MHD_OptionItem items[10];
  int n = 0;
  if (o->connection_limit > 0) {
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)o->connection_limit, NULL };
  }
  if (o->connection_memory_limit > 0) {
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)o->connection_memory_limit, NULL };
  }
  items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)o->connection_timeout_seconds, NULL };
  items[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, (intptr_t)o->listen_fd, NULL };
  items[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
  /* The logger comes first: libmicrohttpd prints to stderr what it logs before that option is
   * read. Without MHD_USE_ERROR_LOG it logs nothing, and the logger given is never called. */
  return MHD_start_daemon(o->logger != NULL ? flags | MHD_USE_ERROR_LOG : flags, port, NULL, NULL, handler, handler_cls,
                          MHD_OPTION_EXTERNAL_LOGGER, o->logger != NULL ? o->logger : cmhd_log_nothing, o->logger_cls,
                          MHD_OPTION_NOTIFY_COMPLETED, o->notify_completed, o->notify_completed_cls,
                          MHD_OPTION_UNESCAPE_CALLBACK, cmhd_unescape_keep, NULL,
                          MHD_OPTION_ARRAY, items,
                          MHD_OPTION_END);
}

/** The epoll descriptor of a daemon started with MHD_USE_EPOLL and no internal thread, or -1. */
static inline int cmhd_epoll_fd(struct MHD_Daemon *d) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
  return info == NULL ? -1 : info->epoll_fd;
}

/** The daemon's open connections (tidying up closed ones first); only from the thread running it. */
static inline unsigned int cmhd_current_connections(struct MHD_Daemon *d) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info == NULL ? 0 : info->num_connections;
}

/** Length of the request's header section, or 0 when unknown. */
static inline size_t cmhd_request_header_size(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  return info == NULL ? 0 : info->header_size;
}

/**
 * What makes a request's framing ambiguous or unsupported (RFC 9112 sections 3.2 and 6), found
 * from its header lines before its body is read. libmicrohttpd 0.9.75 reads the first
 * Content-Length line of several, frames a body by Transfer-Encoding while keeping the connection
 * open for the next request when Content-Length comes with it, reads a body whose transfer coding
 * is not exactly "chunked" until the client closes, serves HTTP/1.1 without a Host, keeps
 * whitespace before a header's colon in its name, and adds a folded line's text to its name.
 */
enum cmhd_framing {
  CMHD_FRAMING_OK = 0,
  /** Content-Length lines with different values. */
  CMHD_FRAMING_CONFLICTING_LENGTHS = 1,
  /** Transfer-Encoding and Content-Length together. */
  CMHD_FRAMING_LENGTH_WITH_CODING = 2,
  /** Transfer-Encoding whose last coding is not chunked, or chunked more than once. */
  CMHD_FRAMING_CHUNKED_NOT_LAST = 3,
  /** A transfer coding other than chunked (before it). */
  CMHD_FRAMING_UNSUPPORTED_CODING = 4,
  /** HTTP/1.1 without a Host line, or more than one. */
  CMHD_FRAMING_HOST = 5,
  /** Whitespace between a header name and its colon, which libmicrohttpd keeps in the name. */
  CMHD_FRAMING_SPACE_IN_NAME = 6,
  /** Obsolete line folding: a header line that starts with a space or a tab. */
  CMHD_FRAMING_FOLDED_LINE = 7,
};

struct cmhd_framing_scan {
  unsigned int hosts, lengths, coding_lines, chunked;
  int conflicting_lengths, chunked_last, exactly_chunked, space_in_name, folded;
  const char *length;
  size_t length_size;
};

static inline int cmhd_is_name(const char *key, size_t key_size, const char *name, size_t name_size) {
  return key_size == name_size && strncasecmp(key, name, name_size) == 0;
}

/**
 * Whether a header line was folded onto the next (obsolete line folding, RFC 9112 section 5.2),
 * which libmicrohttpd 0.9.75 neither refuses nor reads as a space: it appends the next line's text
 * to the header's name, so `X-A: 1` folded onto ` b` arrives as `X-Ab: 1`. It parses each header
 * line in place (the name, the NUL it writes over the colon, the blanks it skips, the value), and
 * only a fold moves the name, into a block of its own; so a name that does not end just before
 * its value was folded. Other versions parse differently: the check is for this one alone.
 */
static inline int cmhd_header_was_folded(const char *key, size_t key_size, const char *value) {
#if MHD_VERSION == 0x00097500
  if (value == NULL) return 0;
  const char *end = key + key_size;
  if (value <= end || *end != '\0') return 1;
  for (const char *p = end + 1; p < value; p++) {
    if (*p != ' ' && *p != '\t') return 1;
  }
#else
  (void)key;
  (void)key_size;
  (void)value;
#endif
  return 0;
}

/** Notes one header line's part in the framing (an MHD_KeyValueIteratorN). */
static inline enum MHD_Result cmhd_scan_framing_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                                     size_t key_size, const char *value, size_t value_size) {
  (void)kind;
  struct cmhd_framing_scan *scan = cls;
  if (key == NULL) return MHD_YES;
  if (value == NULL) value_size = 0;
  if (memchr(key, ' ', key_size) != NULL || memchr(key, '\t', key_size) != NULL) scan->space_in_name = 1;
  if (cmhd_header_was_folded(key, key_size, value)) scan->folded = 1;
  if (cmhd_is_name(key, key_size, "Host", 4)) {
    scan->hosts++;
  } else if (cmhd_is_name(key, key_size, "Content-Length", 14)) {
    if (scan->lengths++ > 0
        && (value_size != scan->length_size || (value_size > 0 && memcmp(value, scan->length, value_size) != 0))) {
      scan->conflicting_lengths = 1;
    }
    scan->length = value;
    scan->length_size = value_size;
  } else if (cmhd_is_name(key, key_size, "Transfer-Encoding", 17)) {
    /* libmicrohttpd reads a chunked body only when the value is "chunked" and nothing else. */
    scan->exactly_chunked = scan->coding_lines++ == 0 && cmhd_is_name(value, value_size, "chunked", 7);
    /* Else, which answer: a comma-separated list of codings, chunked last or not. */
    size_t start = 0;
    while (start <= value_size) {
      size_t end = start;
      while (end < value_size && value[end] != ',') end++;
      size_t first = start, last = end;
      while (first < last && (value[first] == ' ' || value[first] == '\t')) first++;
      while (last > first && (value[last - 1] == ' ' || value[last - 1] == '\t')) last--;
      if (last > first) {
        scan->chunked_last = cmhd_is_name(value + first, last - first, "chunked", 7);
        if (scan->chunked_last) scan->chunked++;
      }
      start = end + 1;
    }
  }
  return MHD_YES;
}

/**
 * Whether the request on `c` (whose version is `version`) is framed so that it can be read; in one
 * look at its header lines, which also gives its Content-Length value in `length` and
 * `length_size` (NULL and 0 without one).
 */
static inline enum cmhd_framing cmhd_request_framing(struct MHD_Connection *c, const char *version,
                                                     const char **length, size_t *length_size) {
  struct cmhd_framing_scan scan = { 0 };
  MHD_get_connection_values_n(c, MHD_HEADER_KIND, cmhd_scan_framing_line, &scan);
  *length = scan.length;
  *length_size = scan.length_size;
  /* "Transfer-Encoding : chunked" is not Transfer-Encoding to libmicrohttpd, but may be to a proxy. */
  if (scan.folded) return CMHD_FRAMING_FOLDED_LINE;
  if (scan.space_in_name) return CMHD_FRAMING_SPACE_IN_NAME;
  if (scan.conflicting_lengths) return CMHD_FRAMING_CONFLICTING_LENGTHS;
  if (scan.coding_lines > 0) {
    if (scan.lengths > 0) return CMHD_FRAMING_LENGTH_WITH_CODING;
    if (!(scan.coding_lines == 1 && scan.exactly_chunked)) {
      return scan.chunked_last && scan.chunked == 1 ? CMHD_FRAMING_UNSUPPORTED_CODING : CMHD_FRAMING_CHUNKED_NOT_LAST;
    }
  }
  int http10 = version == NULL || strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
  if (scan.hosts > 1 || (scan.hosts == 0 && !http10)) return CMHD_FRAMING_HOST;
  return CMHD_FRAMING_OK;
}

/** MHD_CONTENT_READER_END_OF_STREAM and MHD_SIZE_UNKNOWN are macros Swift cannot import. */
/** The socket of a connection, or -1 when unknown. */
static inline int cmhd_connection_fd(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info == NULL ? -1 : info->connect_fd;
}

/** Copies the client's address of a connection (IPv4 or IPv6) into *out: 1, or 0 when unknown. */
static inline int cmhd_client_address(struct MHD_Connection *c, struct sockaddr_in6 *out) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == NULL || info->client_addr == NULL) return 0;
  const struct sockaddr *address = info->client_addr;
  memset(out, 0, sizeof(*out));
  if (address->sa_family == AF_INET) { memcpy(out, address, sizeof(struct sockaddr_in)); return 1; }
  if (address->sa_family == AF_INET6) { memcpy(out, address, sizeof(struct sockaddr_in6)); return 1; }
  return 0;
}

/** Writes the address of *address (without its port) as text into out: its length, or 0. */
static inline size_t cmhd_format_address(const struct sockaddr_in6 *address, char *out, socklen_t size) {
  const void *bytes = address->sin6_family == AF_INET
      ? (const void *)&((const struct sockaddr_in *)(const void *)address)->sin_addr
      : (const void *)&address->sin6_addr;
  if (inet_ntop(address->sin6_family, bytes, out, size) == NULL) return 0;
  return strlen(out);
}

static inline ssize_t cmhd_end_of_stream(void) { return (ssize_t)MHD_CONTENT_READER_END_OF_STREAM; }
static inline ssize_t cmhd_end_with_error(void) { return (ssize_t)MHD_CONTENT_READER_END_WITH_ERROR; }
static inline uint64_t cmhd_size_unknown(void) { return MHD_SIZE_UNKNOWN; }

/** Free bytes glibc's heap arenas hold (`mallinfo2().fordblks`). */
static inline size_t cmhd_heap_free_bytes(void) { return mallinfo2().fordblks; }
/** Returns free heap pages to the system; 1 when some were. */
static inline int cmhd_heap_trim(void) { return malloc_trim(0); }

#endif
