/* Raw libmicrohttpd server: the ceiling MicroHTTP is measured against.
 * Same mode as MicroHTTP: one daemon per thread in external epoll mode with suspend/resume
 * (MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME), each run by its own thread over epoll_wait and
 * MHD_run, all accepting from one listen socket; replying on the second handler call (keeps
 * keep-alive), fixed body for GET and POST.
 * With `deferred`, each request is answered as reactor-server answers one whose reply waits
 * (a `sync` action waiting for its commit): the handler suspends the connection, and the loop
 * resumes every suspended one after each MHD_run and runs MHD again, which calls the handler
 * once more to queue the reply. On the loop's own thread, with no allocation: what it adds over
 * answering at once is libmicrohttpd's suspend and resume alone.
 * With `held`, the reply waits as reactor-server holds one (a deferred reply within
 * `deferredReplyHold`): the handler's final call queues nothing, the connection stays among the
 * daemon's ready ones, and the loop runs MHD again, which calls the handler once more to queue
 * the reply: what it adds is that second call and run alone.
 * Usage: c-server PORT [THREADS] [deferred|held]; PORT 0 takes a free one. Once listening it prints
 * "listening on http://127.0.0.1:PORT", as reactor-server does. */
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static const char BODY[] = "{\"value\":1}";
/* A request's con_cls: started (headers read), then, when deferred, suspended (or held). */
static int started, suspended, held;
static int deferred, holding;

/* One event loop: its daemon, and (deferred) the connections suspended since it last ran it. */
struct loop {
  struct MHD_Daemon *daemon; int epoll_fd; int wake_fd; pthread_t thread;
  struct MHD_Connection **suspended; unsigned suspended_count; unsigned held_count;
};

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)url; (void)method; (void)version; (void)upload;
  if (*con_cls == NULL) { *con_cls = &started; return MHD_YES; }
  if (*upload_size != 0) { *upload_size = 0; return MHD_YES; }
  if (deferred && *con_cls == &started) {
    struct loop *loop = cls;
    *con_cls = &suspended;
    loop->suspended[loop->suspended_count++] = c;
    MHD_suspend_connection(c);
    return MHD_YES;
  }
  if (holding && *con_cls == &started) {
    struct loop *loop = cls;
    *con_cls = &held;
    loop->held_count++;
    return MHD_YES;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r);
  return ret;
}

static volatile sig_atomic_t stopping;

static void *run(void *arg) {
  struct loop *loop = arg;
  struct epoll_event event;
  while (!stopping) {
    MHD_UNSIGNED_LONG_LONG timeout;
    int wait = MHD_get_timeout(loop->daemon, &timeout) == MHD_YES ? (int)(timeout > 1000 ? 1000 : timeout) : -1;
    epoll_wait(loop->epoll_fd, &event, 1, wait);
    MHD_run(loop->daemon);
    if (loop->suspended_count > 0) {
      for (unsigned i = 0; i < loop->suspended_count; i++) MHD_resume_connection(loop->suspended[i]);
      loop->suspended_count = 0;
      MHD_run(loop->daemon);
    }
    if (loop->held_count > 0) {
      loop->held_count = 0;
      MHD_run(loop->daemon);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  unsigned port = argc > 1 ? (unsigned)atoi(argv[1]) : 8081;
  unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
  deferred = argc > 3 && strcmp(argv[3], "deferred") == 0;
  holding = argc > 3 && strcmp(argv[3], "held") == 0;
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int on = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listen_fd, SOMAXCONN) != 0) {
    fprintf(stderr, "cannot listen\n");
    return 1;
  }
  socklen_t length = sizeof addr;
  getsockname(listen_fd, (struct sockaddr *)&addr, &length);
  printf("listening on http://127.0.0.1:%u\n", ntohs(addr.sin_port));
  fflush(stdout);
  struct loop loops[64];
  unsigned limit = (16384u + threads - 1) / threads;
  for (unsigned i = 0; i < threads; i++) {
    loops[i].suspended = calloc(limit, sizeof *loops[i].suspended);
    loops[i].suspended_count = 0;
    loops[i].held_count = 0;
    loops[i].daemon = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, port, NULL, NULL, handler, &loops[i],
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_END);
    if (loops[i].daemon == NULL) { fprintf(stderr, "cannot start\n"); return 1; }
    /* The loop waits on the daemon's epoll descriptor and on an eventfd that ends it. */
    loops[i].epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    loops[i].wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int fds[2] = { MHD_get_daemon_info(loops[i].daemon, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd, loops[i].wake_fd };
    for (int k = 0; k < 2; k++) {
      struct epoll_event event = { .events = EPOLLIN, .data.fd = fds[k] };
      epoll_ctl(loops[i].epoll_fd, EPOLL_CTL_ADD, fds[k], &event);
    }
  }
  sigset_t set; sigemptyset(&set); sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, NULL);
  for (unsigned i = 0; i < threads; i++) pthread_create(&loops[i].thread, NULL, run, &loops[i]);
  int sig; sigwait(&set, &sig);
  stopping = 1;
  for (unsigned i = 0; i < threads; i++) {
    uint64_t one = 1;
    if (write(loops[i].wake_fd, &one, sizeof one) != sizeof one) return 1;
    pthread_join(loops[i].thread, NULL);
    MHD_quiesce_daemon(loops[i].daemon); /* leaves the shared listen socket open */
    MHD_stop_daemon(loops[i].daemon);
  }
  close(listen_fd);
  return 0;
}
