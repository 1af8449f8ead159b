/* Raw libmicrohttpd server: the ceiling MicroHTTP is measured against.
 * Same mode as MicroHTTP: internal polling thread + poll + thread pool + suspend/resume,
 * replying on the second handler call (keeps keep-alive), fixed body for GET and POST.
 * Usage: c-server PORT [THREADS] */
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char BODY[] = "{\"value\":1}";
static int marker;

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)cls; (void)url; (void)method; (void)version; (void)upload;
  if (*con_cls == NULL) { *con_cls = &marker; return MHD_YES; }
  if (*upload_size != 0) { *upload_size = 0; return MHD_YES; }
  struct MHD_Response *r = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r);
  return ret;
}

int main(int argc, char **argv) {
  unsigned port = argc > 1 ? (unsigned)atoi(argv[1]) : 8081;
  unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME, port, NULL, NULL, handler, NULL,
      MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, 16384u,
      MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_END);
  if (d == NULL) { fprintf(stderr, "cannot start\n"); return 1; }
  sigset_t set; sigemptyset(&set); sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, NULL);
  int sig; sigwait(&set, &sig);
  MHD_stop_daemon(d);
  return 0;
}
