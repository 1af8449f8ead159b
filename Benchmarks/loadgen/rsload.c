/* rsload: the load generator behind Benchmarks/run for what wrk cannot measure.
 * Loopback only, raw non-blocking sockets, one epoll thread, CLOCK_MONOTONIC timestamps.
 *
 *   rsload create PORT TYPE COUNT CONNS          POST /reactors COUNT times; prints one id a line
 *   rsload latency PORT IDS_FILE RATE SECONDS POSTCONNS
 *       one event stream per id; RATE actions/s ("increase") spread round-robin over the ids;
 *       latency = POST sent -> first event whose "value" shows the new count; p50/p99/max
 *   rsload fanout PORT ROOM_ID SUBSCRIBERS SECONDS INTERVAL_MS [SERVER_PID]
 *       SUBSCRIBERS event streams on one room instance; a `say` ("m<k>") every INTERVAL_MS;
 *       latency = say sent -> a subscriber's first event containing "m<k>"; p50/p99/max, plus
 *       the server's RSS and CPU over the measured window when SERVER_PID is given
 *   rsload todofanout PORT TODO_ID SUBSCRIBERS SECONDS INTERVAL_MS QUERY TASK_IDS_FILE [SERVER_PID]
 *       SUBSCRIBERS event streams on one todo instance, opened with QUERY ("?format=patch", or
 *       "-" for none: whole states); a toggle of the next task of TASK_IDS_FILE (one id a line,
 *       round-robin) every INTERVAL_MS on one keep-alive connection, each sent once the previous
 *       one was answered 202. Every stream is de-chunked and parsed as server-sent events; the
 *       k-th toggle is version v0 + k (v0: the version the streams opened on), and latency =
 *       toggle sent -> a subscriber's whole event whose `id:` is that version or later (a later
 *       one, after conflation, counts for each toggle it covers). Also: events by kind with their
 *       average size (the SSE event's bytes, and its data), versions skipped, the server's CPU
 *       seconds per toggle (utime+stime of SERVER_PID over the window, from the first toggle
 *       until every stream has the last version or 10 s after it) and its peak RSS
 *   rsload spread PORT IDS_FILE CONNS SECONDS [THREADS]
 *       POST "increase" to an id drawn at random from IDS_FILE, on CONNS keep-alive connections,
 *       one request in flight on each, for SECONDS, from THREADS threads (default 1) sharing the
 *       connections; prints the requests answered 2xx and their rate, the answers >= 300 (counted,
 *       not fatal: non2xx, and status_503 among them), and the latency of the 2xx answers (request
 *       written -> whole answer read: p50/p99/max). Each request is formatted into one small
 *       buffer from the id, so drawing from 100,000 ids costs the generator two more cache lines
 *       (the id's pointer and bytes) than one id
 *   rsload idle PORT PATH COUNT SECONDS
 *       opens COUNT keep-alive connections, sends one GET PATH on each and reads its answer, prints
 *       how many were answered 200, then holds them open and silent until SECONDS have passed
 *   rsload coldstart PORT RUNS -- COMMAND ARGS...
 *       starts COMMAND RUNS times; time from fork to the first 200 on GET /healthz; min/median
 *
 * Every result line starts with "result " and holds key=value pairs. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* epoll_wait with a nanosecond timeout (no busy loop: the load generator shares the cores). */
static int wait_events(int ep, struct epoll_event *events, int max, int64_t timeout_ns) {
  if (timeout_ns < 0) timeout_ns = 0;
  struct timespec ts = {.tv_sec = timeout_ns / 1000000000LL, .tv_nsec = timeout_ns % 1000000000LL};
  return epoll_pwait2(ep, events, max, &ts, NULL);
}

static void die(const char *what) { perror(what); exit(2); }

static int connect_to(int port, int nonblocking) {
  int fd = socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) { close(fd); return -1; }
  return fd;
}

static void write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) { usleep(50); continue; }
      die("write");
    }
    buf += n;
    len -= (size_t)n;
  }
}

/* Blocking request/response on a keep-alive connection; returns the status, body in buf. */
static int http_roundtrip(int fd, const char *req, size_t reqlen, char *buf, size_t cap, char **body, size_t *bodylen) {
  write_all(fd, req, reqlen);
  size_t have = 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, cap - 1 - have);
    if (n <= 0) return -1;
    have += (size_t)n;
    buf[have] = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (!end) continue;
    char *cl = strcasestr(buf, "content-length:");
    size_t length = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
    size_t total = (size_t)(end + 4 - buf) + length;
    if (have < total) continue;
    *body = end + 4;
    *bodylen = length;
    return atoi(buf + 9);
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void report_latency(const char *prefix, int64_t *samples, size_t count) {
  if (count == 0) { printf("result %s samples=0\n", prefix); return; }
  qsort(samples, count, sizeof *samples, cmp_i64);
  printf("result %s samples=%zu p50_us=%.1f p99_us=%.1f max_us=%.1f\n", prefix, count,
         samples[count / 2] / 1e3, samples[(size_t)(count * 0.99)] / 1e3, samples[count - 1] / 1e3);
}

/* ---------------------------------------------------------------- create */

static int cmd_create(int port, const char *type, long count, int conns) {
  char req[512];
  char body[128];
  int bl = snprintf(body, sizeof body, "{\"type\":\"%s\"}", type);
  int rl = snprintf(req, sizeof req,
                    "POST /reactors HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\n\r\n%s", bl, body);
  /* Pipelined over CONNS connections, at most 16 requests in flight each. */
  if (conns < 1) conns = 1;
  int *fds = calloc(conns, sizeof *fds);
  long *sent = calloc(conns, sizeof *sent), *done = calloc(conns, sizeof *done);
  char **bufs = calloc(conns, sizeof *bufs);
  size_t *have = calloc(conns, sizeof *have);
  const size_t cap = 1 << 16;
  for (int i = 0; i < conns; i++) {
    fds[i] = connect_to(port, 0);
    if (fds[i] < 0) die("connect");
    bufs[i] = malloc(cap);
  }
  long per = (count + conns - 1) / conns, total = 0;
  int64_t start = now_ns();
  while (total < count) {
    for (int i = 0; i < conns && total < count; i++) {
      long quota = per;
      if ((long)i * per + quota > count) quota = count - (long)i * per;
      if (quota < 0) quota = 0;
      while (sent[i] < quota && sent[i] - done[i] < 16) { write_all(fds[i], req, rl); sent[i]++; }
      while (done[i] < sent[i]) {
        char *end = memmem(bufs[i], have[i], "\r\n\r\n", 4);
        if (end) {
          bufs[i][have[i] < cap ? have[i] : cap - 1] = 0;
          char *cl = strcasestr(bufs[i], "content-length:");
          size_t length = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
          size_t whole = (size_t)(end + 4 - bufs[i]) + length;
          if (have[i] >= whole) {
            if (atoi(bufs[i] + 9) != 201) { fprintf(stderr, "create: status %d\n", atoi(bufs[i] + 9)); exit(1); }
            char *id = memmem(end + 4, length, "\"id\":\"", 6);
            if (!id) { fprintf(stderr, "create: no id\n"); exit(1); }
            id += 6;
            char *q = memchr(id, '"', length);
            fwrite(id, 1, (size_t)(q - id), stdout);
            fputc('\n', stdout);
            memmove(bufs[i], bufs[i] + whole, have[i] - whole);
            have[i] -= whole;
            done[i]++;
            total++;
            continue;
          }
        }
        ssize_t n = read(fds[i], bufs[i] + have[i], cap - 1 - have[i]);
        if (n <= 0) die("read");
        have[i] += (size_t)n;
        if (sent[i] - done[i] < 8 && sent[i] < quota) break; /* refill the pipeline */
      }
    }
  }
  fprintf(stderr, "result create count=%ld seconds=%.2f per_s=%.0f\n", count, (now_ns() - start) / 1e9,
          count / ((now_ns() - start) / 1e9));
  fflush(stdout);
  return 0;
}

/* ---------------------------------------------------------------- event streams */

enum { CARRY = 48 };

struct conn {
  int fd;
  int kind;      /* 0 event stream, 1 action poster */
  int index;     /* counter index (streams) */
  int busy;      /* poster: a request in flight */
  int ready;     /* stream: first event seen */
  size_t have;   /* poster: response bytes buffered */
  long best;     /* stream: highest value / message number seen */
  int64_t sent_at; /* poster (spread): when its request in flight was written */
  char carry[CARRY];
  int carrylen;
  char rbuf[2048]; /* poster: room for a whole answer (a 503's problem body included) */
};

static char *readbuf;
static const size_t READCAP = 1 << 18;

static int open_stream(int port, const char *id) {
  int fd = connect_to(port, 0);
  if (fd < 0) return -1;
  char req[256];
  int n = snprintf(req, sizeof req, "GET /reactors/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n", id);
  write_all(fd, req, (size_t)n);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

/* Calls found(number) for every `needle` followed by digits (and then a non-digit) in
 * data[0, len). `data` starts with the connection's carried tail, so a token cut by a read is
 * found whole the next time; tokens found twice are harmless (callers keep the highest). */
static void scan(struct conn *c, const char *data, size_t len, const char *needle, void (*found)(struct conn *, long)) {
  size_t nl = strlen(needle);
  for (const char *p = data; (p = memmem(p, len - (size_t)(p - data), needle, nl)); p += nl) {
    const char *d = p + nl, *e = d;
    long v = 0;
    while (e < data + len && *e >= '0' && *e <= '9') v = v * 10 + (*e++ - '0');
    if (e > d && e < data + len) found(c, v);
  }
  size_t keep = len < CARRY ? len : CARRY;
  memcpy(c->carry, data + len - keep, keep);
  c->carrylen = (int)keep;
}

/* latency state */
static long n_counters, per_counter_cap;
static int64_t *send_times; /* [counter][k], k = 1.. */
static long *sent_count;
static int64_t *samples;
static size_t n_samples, samples_cap;
static int64_t now_cached;

static void add_sample(int64_t v) {
  if (n_samples == samples_cap) {
    samples_cap = samples_cap ? samples_cap * 2 : 1 << 16;
    samples = realloc(samples, samples_cap * sizeof *samples);
  }
  samples[n_samples++] = v;
}

static void counter_value(struct conn *c, long v) {
  c->ready = 1;
  if (v <= c->best) return;
  long limit = sent_count[c->index];
  for (long k = c->best + 1; k <= v && k <= limit; k++) add_sample(now_cached - send_times[c->index * per_counter_cap + k]);
  c->best = v;
}

static char **read_ids(const char *path, long *count) {
  FILE *f = fopen(path, "r");
  if (!f) die(path);
  char **ids = NULL;
  long n = 0, cap = 0;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!*line) continue;
    if (n == cap) { cap = cap ? cap * 2 : 256; ids = realloc(ids, cap * sizeof *ids); }
    ids[n++] = strdup(line);
  }
  fclose(f);
  *count = n;
  return ids;
}

/* Reads a poster's response; returns its status once the whole response has arrived, 0 before. */
static int poster_status(struct conn *c) {
  for (;;) {
    if (c->have == sizeof c->rbuf - 1) { fprintf(stderr, "poster: answer over %zu bytes\n", sizeof c->rbuf - 1); exit(1); }
    ssize_t n = read(c->fd, c->rbuf + c->have, sizeof c->rbuf - 1 - c->have);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n <= 0) { fprintf(stderr, "poster connection closed\n"); exit(1); }
    c->have += (size_t)n;
    c->rbuf[c->have] = 0;
    char *end = strstr(c->rbuf, "\r\n\r\n");
    if (!end) continue;
    char *cl = strcasestr(c->rbuf, "content-length:");
    size_t length = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
    size_t whole = (size_t)(end + 4 - c->rbuf) + length;
    if (c->have < whole) continue;
    int status = atoi(c->rbuf + 9);
    memmove(c->rbuf, c->rbuf + whole, c->have - whole);
    c->have -= whole;
    c->busy = 0;
    return status > 0 ? status : 999;
  }
}

/* Reads a poster's response(s); returns 1 when a whole response has arrived; exits on a status >= 300. */
static int poster_read(struct conn *c) {
  int status = poster_status(c);
  if (status >= 300) { fprintf(stderr, "action status %d\n", status); exit(1); }
  return status != 0;
}

static void stream_read(struct conn *c, const char *needle, void (*found)(struct conn *, long), long *closed) {
  for (;;) {
    ssize_t n = read(c->fd, readbuf + CARRY, READCAP);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) { (*closed)++; close(c->fd); c->fd = -1; return; }
    now_cached = now_ns();
    char *from = readbuf + CARRY - c->carrylen;
    memcpy(from, c->carry, (size_t)c->carrylen);
    scan(c, from, (size_t)n + (size_t)c->carrylen, needle, found);
    if ((size_t)n < READCAP) return;
  }
}

/* ---------------------------------------------------------------- spread actions */

static void send_spread_action(struct conn *c, char **ids, long count, uint64_t *rng, int port) {
  /* xorshift64: cheap, and uniform enough over the ids for a load pattern */
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  char req[256];
  int n = snprintf(req, sizeof req,
                   "POST /reactors/%s/actions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                   "Content-Length: 10\r\n\r\n\"increase\"",
                   ids[*rng % (uint64_t)count], port);
  write_all(c->fd, req, (size_t)n);
  c->busy = 1;
}

/* One thread of `spread`: its share of the connections, on an epoll of its own. */
struct spread_worker {
  pthread_t thread;
  int port, nconns, ep;
  struct conn *conns;
  char **ids;
  long count;
  int64_t end;
  uint64_t rng;
  long answered, non2xx, status_503;
  int64_t *samples;
  size_t n_samples, cap;
};

static void spread_send(struct spread_worker *w, struct conn *c) {
  c->sent_at = now_ns();
  send_spread_action(c, w->ids, w->count, &w->rng, w->port);
}

static void *spread_run(void *arg) {
  struct spread_worker *w = arg;
  for (int i = 0; i < w->nconns; i++) spread_send(w, &w->conns[i]);
  struct epoll_event events[256];
  int64_t t;
  while ((t = now_ns()) < w->end) {
    int n = wait_events(w->ep, events, 256, w->end - t);
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      int status = poster_status(c);
      if (!status) continue;
      if (status < 300) {
        w->answered++;
        if (w->n_samples == w->cap) {
          w->cap = w->cap ? w->cap * 2 : 1 << 16;
          w->samples = realloc(w->samples, w->cap * sizeof *w->samples);
        }
        w->samples[w->n_samples++] = now_ns() - c->sent_at;
      } else {
        w->non2xx++;
        w->status_503 += status == 503;
      }
      spread_send(w, c);
    }
  }
  return NULL;
}

static int cmd_spread(int port, const char *ids_path, int nconns, int seconds, int nthreads) {
  long count;
  char **ids = read_ids(ids_path, &count);
  if (count == 0) { fprintf(stderr, "no ids in %s\n", ids_path); return 1; }
  if (nthreads < 1) nthreads = 1;
  if (nthreads > nconns) nthreads = nconns;
  struct conn *conns = calloc((size_t)nconns, sizeof *conns);
  struct spread_worker *workers = calloc((size_t)nthreads, sizeof *workers);
  for (int k = 0, first = 0; k < nthreads; k++) {
    struct spread_worker *w = &workers[k];
    w->port = port;
    w->ids = ids;
    w->count = count;
    w->rng = ((uint64_t)now_ns() * 2654435761u + (uint64_t)k) | 1;
    w->nconns = nconns / nthreads + (k < nconns % nthreads);
    w->conns = conns + first;
    first += w->nconns;
    w->ep = epoll_create1(0);
    for (int i = 0; i < w->nconns; i++) {
      struct conn *c = &w->conns[i];
      c->fd = connect_to(port, 0);
      if (c->fd < 0) die("connect");
      fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
      c->kind = 1;
      struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
      if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    }
  }
  int64_t start = now_ns();
  for (int k = 0; k < nthreads; k++) {
    workers[k].end = start + (int64_t)seconds * 1000000000LL;
    if (pthread_create(&workers[k].thread, NULL, spread_run, &workers[k])) die("pthread_create");
  }
  long answered = 0, non2xx = 0, status_503 = 0;
  for (int k = 0; k < nthreads; k++) {
    pthread_join(workers[k].thread, NULL);
    answered += workers[k].answered;
    non2xx += workers[k].non2xx;
    status_503 += workers[k].status_503;
    for (size_t i = 0; i < workers[k].n_samples; i++) add_sample(workers[k].samples[i]);
  }
  double elapsed = (now_ns() - start) / 1e9;
  printf("result spread requests=%ld seconds=%.3f per_s=%.0f non2xx=%ld status_503=%ld\n", answered, elapsed,
         answered / elapsed, non2xx, status_503);
  report_latency("spread_latency", samples, n_samples);
  for (int i = 0; i < nconns; i++) close(conns[i].fd);
  return 0;
}

static int cmd_latency(int port, const char *ids_path, long rate, int seconds, int postconns) {
  long count;
  char **ids = read_ids(ids_path, &count);
  n_counters = count;
  long total = rate * seconds;
  per_counter_cap = total / count + 2;
  send_times = calloc((size_t)(count * per_counter_cap), sizeof *send_times);
  sent_count = calloc((size_t)count, sizeof *sent_count);
  readbuf = malloc(READCAP + CARRY);
  int ep = epoll_create1(0);
  struct conn *streams = calloc((size_t)count, sizeof *streams);
  struct conn *posters = calloc((size_t)postconns, sizeof *posters);
  for (long i = 0; i < count; i++) {
    streams[i].fd = open_stream(port, ids[i]);
    if (streams[i].fd < 0) die("stream connect");
    streams[i].index = (int)i;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &streams[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, streams[i].fd, &ev);
  }
  for (int i = 0; i < postconns; i++) {
    posters[i].fd = connect_to(port, 0);
    if (posters[i].fd < 0) die("poster connect");
    fcntl(posters[i].fd, F_SETFL, fcntl(posters[i].fd, F_GETFL) | O_NONBLOCK);
    posters[i].kind = 1;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &posters[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, posters[i].fd, &ev);
  }
  long closed = 0;
  struct epoll_event events[256];
  /* Wait for every stream's first state. */
  int64_t deadline = now_ns() + 10000000000LL;
  for (long ready = 0; ready < count && now_ns() < deadline;) {
    int n = epoll_wait(ep, events, 256, 10);
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      if (c->kind == 0 && c->fd >= 0) { int was = c->ready; stream_read(c, "\"value\":", counter_value, &closed); ready += !was && c->ready; }
    }
  }
  n_samples = 0;
  char (*reqs)[512] = malloc((size_t)count * 512);
  int *reqlen = malloc((size_t)count * sizeof *reqlen);
  for (long i = 0; i < count; i++)
    reqlen[i] = snprintf(reqs[i], 512, "POST /reactors/%s/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: 10\r\n\r\n\"increase\"", ids[i]);
  int64_t start = now_ns(), interval = 1000000000LL / rate;
  long next = 0, late = 0;
  int rr = 0;
  int64_t end = start + (int64_t)seconds * 1000000000LL;
  while (next < total) {
    int64_t t = now_ns();
    while (next < total && start + next * interval <= t) {
      int p = -1;
      for (int k = 0; k < postconns; k++) { int j = (rr + k) % postconns; if (!posters[j].busy) { p = j; break; } }
      if (p < 0) break;
      rr = (p + 1) % postconns;
      long counter = next % count;
      long k = ++sent_count[counter];
      send_times[counter * per_counter_cap + k] = now_ns();
      posters[p].busy = 1;
      write_all(posters[p].fd, reqs[counter], (size_t)reqlen[counter]);
      if (t - (start + next * interval) > 1000000) late++;
      next++;
    }
    /* Sleep until the next send is due (or, with every poster busy, until a reply). */
    int64_t wait_ns = start + next * interval - now_ns();
    int all_busy = 1;
    for (int k = 0; k < postconns && all_busy; k++) all_busy = posters[k].busy;
    int n = wait_events(ep, events, 256, all_busy ? 1000000 : wait_ns);
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      if (c->kind == 1) poster_read(c);
      else if (c->fd >= 0) stream_read(c, "\"value\":", counter_value, &closed);
    }
    if (now_ns() > end + 5000000000LL) break;
  }
  double elapsed = (now_ns() - start) / 1e9;
  /* Drain: give the last events up to a second. */
  int64_t drain = now_ns() + 1000000000LL;
  while (now_ns() < drain) {
    int n = epoll_wait(ep, events, 256, 10);
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      if (c->kind == 1) poster_read(c);
      else if (c->fd >= 0) stream_read(c, "\"value\":", counter_value, &closed);
    }
  }
  printf("result latency_meta sent=%ld rate_achieved=%.0f late_over_1ms=%ld streams_closed=%ld\n", next, next / elapsed, late, closed);
  report_latency("latency", samples, n_samples);
  return 0;
}

/* ---------------------------------------------------------------- fan-out */

static int64_t *say_times;
static long says_sent;
static long deliveries_missed;

static void room_message(struct conn *c, long k) {
  c->ready = 1;
  if (k <= c->best) return;
  if (k <= says_sent && k >= 1) {
    add_sample(now_cached - say_times[k]);
    if (c->best > 0) deliveries_missed += k - c->best - 1;
  }
  c->best = k;
}

static void proc_usage(int pid, double *cpu_s, long *rss_kib) {
  char path[64], buf[2048];
  *cpu_s = 0;
  *rss_kib = 0;
  if (pid <= 0) return;
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f) {
    if (fgets(buf, sizeof buf, f)) {
      char *p = strrchr(buf, ')');
      unsigned long ut = 0, st = 0;
      /* fields after ')': state(3) ... utime(14) stime(15) */
      if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
        *cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    fclose(f);
  }
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (f) {
    while (fgets(buf, sizeof buf, f))
      if (!strncmp(buf, "VmRSS:", 6)) *rss_kib = atol(buf + 6);
    fclose(f);
  }
}

static int cmd_fanout(int port, const char *id, long subscribers, int seconds, int interval_ms, int pid) {
  readbuf = malloc(READCAP + CARRY);
  int ep = epoll_create1(0);
  struct conn *streams = calloc((size_t)subscribers, sizeof *streams);
  struct epoll_event events[512];
  long closed = 0, ready = 0;
  int64_t t0 = now_ns();
  for (long i = 0; i < subscribers; i++) {
    streams[i].fd = open_stream(port, id);
    if (streams[i].fd < 0) die("stream connect");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &streams[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, streams[i].fd, &ev);
    if (i % 200 == 199) { /* let the server keep up with the accepts */
      int n = epoll_wait(ep, events, 512, 0);
      for (int e = 0; e < n; e++) { struct conn *c = events[e].data.ptr; if (c->fd >= 0) { int was = c->ready; c->ready = 1; ready += !was; stream_read(c, "\"text\":\"m", room_message, &closed); } }
    }
  }
  int64_t deadline = now_ns() + 60000000000LL;
  while (ready < subscribers - closed && now_ns() < deadline) {
    int n = epoll_wait(ep, events, 512, 10);
    for (int e = 0; e < n; e++) { struct conn *c = events[e].data.ptr; if (c->fd >= 0) { int was = c->ready; c->ready = 1; ready += !was; stream_read(c, "\"text\":\"m", room_message, &closed); } }
  }
  double connect_s = (now_ns() - t0) / 1e9;
  int poster = connect_to(port, 0);
  if (poster < 0) die("poster connect");
  long total = (long)seconds * 1000 / interval_ms;
  say_times = calloc((size_t)total + 2, sizeof *say_times);
  char resp[4096], *body;
  size_t bodylen;
  double cpu0, cpu1;
  long rss0, rss1, rss_max = 0;
  proc_usage(pid, &cpu0, &rss0);
  n_samples = 0;
  int64_t start = now_ns();
  for (long k = 1; k <= total; k++) {
    int64_t due = start + (k - 1) * (int64_t)interval_ms * 1000000LL;
    while (now_ns() < due) {
      int64_t left = due - now_ns();
      int n = wait_events(ep, events, 512, left);
      for (int e = 0; e < n; e++) { struct conn *c = events[e].data.ptr; if (c->fd >= 0) stream_read(c, "\"text\":\"m", room_message, &closed); }
    }
    char req[512], text[64];
    int tl = snprintf(text, sizeof text, "{\"say\":{\"text\":\"m%ld\"}}", k);
    int rl = snprintf(req, sizeof req, "POST /reactors/%s/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\n\r\n%s", id, tl, text);
    say_times[k] = now_ns();
    says_sent = k;
    int status = http_roundtrip(poster, req, (size_t)rl, resp, sizeof resp, &body, &bodylen);
    if (status != 202) { fprintf(stderr, "say status %d\n", status); exit(1); }
    if (k % 10 == 0) { double c; long r; proc_usage(pid, &c, &r); if (r > rss_max) rss_max = r; }
  }
  int64_t drain = now_ns() + (int64_t)interval_ms * 1000000LL;
  while (now_ns() < drain) {
    int n = epoll_wait(ep, events, 512, 1);
    for (int e = 0; e < n; e++) { struct conn *c = events[e].data.ptr; if (c->fd >= 0) stream_read(c, "\"text\":\"m", room_message, &closed); }
  }
  double window = (now_ns() - start) / 1e9;
  proc_usage(pid, &cpu1, &rss1);
  if (rss1 > rss_max) rss_max = rss1;
  long got_last = 0;
  for (long i = 0; i < subscribers; i++) got_last += streams[i].fd >= 0 && streams[i].best == total;
  printf("result fanout_meta subscribers=%ld connect_s=%.1f says=%ld streams_closed=%ld skipped=%ld with_last=%ld "
         "server_cpu_pct=%.1f server_rss_mib=%.1f\n",
         subscribers, connect_s, total, closed, deliveries_missed, got_last, pid > 0 ? 100.0 * (cpu1 - cpu0) / window : 0.0,
         rss_max / 1024.0);
  report_latency("fanout", samples, n_samples);
  return 0;
}

/* ---------------------------------------------------------------- todo fan-out (patch streams) */

/* One event stream read as the client would: HTTP head, chunked transfer coding, then SSE
 * lines. Only each line's first bytes are kept (enough for `id:` and `event:`), so a 70 KB
 * `data:` line costs a memchr, not a copy. */
struct tstream {
  int fd;
  int head_done, chunked, chunk_phase; /* chunk_phase: 0 size line, 1 data, 2 CRLF after data, 3 ended */
  int in_digits;                       /* size line: still reading its hex digits */
  size_t chunk_left;
  char head[1024];
  size_t head_len;
  char prefix[40];
  size_t prefix_len, line_len;
  size_t ev_bytes, ev_data;
  long long ev_id;
  char ev_kind;        /* 'p' patch, 's' state, 'e' end, 0 none */
  int ev_snapshot;
  int ready;
  long long first, best;
};

static long long tf_v0 = -1;
static long tf_sent;
static int64_t *tf_send_times;
static long tf_skipped, tf_snapshots, tf_other_events, tf_end_events, tf_first_mismatch;
static long tf_count[2];          /* [0] patch, [1] state: events after the first */
static double tf_bytes[2], tf_data[2];
static int64_t tf_wire_bytes;

static void tf_dispatch(struct tstream *c) {
  if (c->ev_id < 0) { if (c->ev_kind == 'e') tf_end_events++; return; } /* comments, retry, end */
  if (!c->ready) {
    c->ready = 1;
    c->first = c->best = c->ev_id;
    return;
  }
  if (c->ev_kind == 'p' || c->ev_kind == 's') {
    int i = c->ev_kind == 'p' ? 0 : 1;
    tf_count[i]++;
    tf_bytes[i] += (double)c->ev_bytes;
    tf_data[i] += (double)c->ev_data;
  } else tf_other_events++;
  tf_snapshots += c->ev_snapshot;
  long long v = c->ev_id;
  if (v <= c->best) return;
  if (tf_v0 >= 0) {
    for (long long k = c->best - tf_v0 + 1; k <= v - tf_v0; k++)
      if (k >= 1 && k <= tf_sent) add_sample(now_cached - tf_send_times[k]);
    if (v - c->best > 1) tf_skipped += v - c->best - 1;
  }
  c->best = v;
}

static void tf_line(struct tstream *c) {
  c->ev_bytes += c->line_len + 1;
  size_t n = c->prefix_len;
  const char *p = c->prefix;
  if (c->line_len == 0) {
    tf_dispatch(c);
    c->ev_bytes = c->ev_data = 0;
    c->ev_id = -1;
    c->ev_kind = 0;
    c->ev_snapshot = 0;
  } else if (n >= 4 && !memcmp(p, "id: ", 4)) {
    long long v = 0;
    for (size_t i = 4; i < n && p[i] >= '0' && p[i] <= '9'; i++) v = v * 10 + (p[i] - '0');
    c->ev_id = v;
  } else if (n >= 8 && !memcmp(p, "event: ", 7)) {
    c->ev_kind = p[7];
  } else if (n >= 6 && !memcmp(p, "data: ", 6)) {
    c->ev_data += c->line_len - 6;
  } else if (n >= 10 && !memcmp(p, ": snapshot", 10)) {
    c->ev_snapshot = 1;
  }
  c->line_len = c->prefix_len = 0;
}

/* SSE bytes, de-chunked. */
static void tf_sse(struct tstream *c, const char *p, size_t n) {
  while (n > 0) {
    const char *q = memchr(p, '\n', n);
    size_t seg = q ? (size_t)(q - p) : n;
    if (c->prefix_len < sizeof c->prefix) {
      size_t take = sizeof c->prefix - c->prefix_len;
      if (take > seg) take = seg;
      memcpy(c->prefix + c->prefix_len, p, take);
      c->prefix_len += take;
    }
    c->line_len += seg;
    if (!q) return;
    tf_line(c);
    p = q + 1;
    n -= seg + 1;
  }
}

/* Bytes off the socket: the response head, then the chunked body (or a plain one). */
static void tf_bytes_in(struct tstream *c, const char *p, size_t n) {
  if (!c->head_done) {
    size_t take = sizeof c->head - 1 - c->head_len;
    if (take > n) take = n;
    memcpy(c->head + c->head_len, p, take);
    c->head_len += take;
    c->head[c->head_len] = 0;
    char *end = strstr(c->head, "\r\n\r\n");
    if (!end) {
      if (c->head_len == sizeof c->head - 1) { fprintf(stderr, "todofanout: response head too long\n"); exit(1); }
      return;
    }
    if (atoi(c->head + 9) != 200) { fprintf(stderr, "todofanout: stream status %d\n", atoi(c->head + 9)); exit(1); }
    c->chunked = strcasestr(c->head, "transfer-encoding: chunked") != NULL;
    c->head_done = 1;
    c->in_digits = 1;
    size_t used = (size_t)(end + 4 - c->head) - (c->head_len - take);
    p += used;
    n -= used;
  }
  if (!c->chunked) { tf_sse(c, p, n); return; }
  while (n > 0) {
    if (c->chunk_phase == 0) {
      /* size line: hex digits, maybe extensions, CRLF */
      const char *q = memchr(p, '\n', n);
      size_t seg = q ? (size_t)(q - p) : n;
      for (size_t i = 0; i < seg; i++) {
        char ch = p[i];
        if (!c->in_digits) continue; /* past the digits (an extension, or the CR) */
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) c->in_digits = 0; else c->chunk_left = c->chunk_left * 16 + (size_t)d;
      }
      if (!q) return;
      p = q + 1;
      n -= seg + 1;
      if (c->chunk_left == 0) { c->chunk_phase = 3; continue; } /* last chunk: the stream ends */
      c->chunk_phase = 1;
    } else if (c->chunk_phase == 1) {
      size_t take = n < c->chunk_left ? n : c->chunk_left;
      tf_sse(c, p, take);
      p += take;
      n -= take;
      c->chunk_left -= take;
      if (c->chunk_left == 0) c->chunk_phase = 2;
    } else if (c->chunk_phase == 2) {
      const char *q = memchr(p, '\n', n);
      if (!q) return;
      n -= (size_t)(q + 1 - p);
      p = q + 1;
      c->chunk_phase = 0;
      c->in_digits = 1;
    } else return;
  }
}

static void tf_read(struct tstream *c, long *closed) {
  for (;;) {
    ssize_t n = read(c->fd, readbuf, READCAP);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) { (*closed)++; close(c->fd); c->fd = -1; return; }
    now_cached = now_ns();
    tf_wire_bytes += n;
    tf_bytes_in(c, readbuf, (size_t)n);
    if ((size_t)n < READCAP) return;
  }
}

static int cmd_todofanout(int port, const char *id, long subscribers, int seconds, int interval_ms, const char *query,
                          const char *ids_path, int pid) {
  long n_tasks;
  char **tasks = read_ids(ids_path, &n_tasks);
  if (n_tasks == 0) { fprintf(stderr, "no task ids in %s\n", ids_path); return 1; }
  if (!strcmp(query, "-")) query = "";
  readbuf = malloc(READCAP);
  int ep = epoll_create1(0);
  struct tstream *streams = calloc((size_t)(subscribers > 0 ? subscribers : 1), sizeof *streams);
  struct epoll_event events[512];
  long closed = 0, ready = 0;
  int64_t t0 = now_ns();
  char req[512];
  int rl = snprintf(req, sizeof req, "GET /reactors/%s/events%s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n", id, query);
#define TF_POLL(timeout_ms)                                                                        \
  do {                                                                                             \
    int n_ = epoll_wait(ep, events, 512, (timeout_ms));                                            \
    for (int e_ = 0; e_ < n_; e_++) {                                                              \
      struct tstream *c_ = events[e_].data.ptr;                                                    \
      if (c_->fd < 0) continue;                                                                    \
      int was_ = c_->ready;                                                                        \
      tf_read(c_, &closed);                                                                        \
      ready += !was_ && c_->ready;                                                                 \
    }                                                                                              \
  } while (0)
  for (long i = 0; i < subscribers; i++) {
    struct tstream *c = &streams[i];
    c->fd = connect_to(port, 0);
    if (c->fd < 0) die("stream connect");
    write_all(c->fd, req, (size_t)rl);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    c->ev_id = -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    if (i % 100 == 99) TF_POLL(0); /* let the server keep up with the accepts */
  }
  int64_t deadline = now_ns() + 60000000000LL;
  while (ready < subscribers - closed && now_ns() < deadline) TF_POLL(10);
  double connect_s = (now_ns() - t0) / 1e9;
  for (long i = 0; i < subscribers; i++) if (streams[i].ready && streams[i].first > tf_v0) tf_v0 = streams[i].first;
  for (long i = 0; i < subscribers; i++) if (streams[i].ready && streams[i].first != tf_v0) tf_first_mismatch++;
  if (tf_v0 < 0) tf_v0 = 0; /* no streams: versions are not followed */
  memset(tf_count, 0, sizeof tf_count);
  memset(tf_bytes, 0, sizeof tf_bytes);
  memset(tf_data, 0, sizeof tf_data);
  tf_wire_bytes = 0;
  tf_snapshots = 0;

  /* The poster: one keep-alive connection, non-blocking, so streams are read while it waits. */
  struct conn poster = {.kind = 1};
  poster.fd = connect_to(port, 0);
  if (poster.fd < 0) die("poster connect");
  fcntl(poster.fd, F_SETFL, fcntl(poster.fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event pev = {.events = EPOLLIN, .data.ptr = &poster};
  epoll_ctl(ep, EPOLL_CTL_ADD, poster.fd, &pev);
  long total = (long)seconds * 1000 / interval_ms, answered = 0, late = 0;
  tf_send_times = calloc((size_t)total + 2, sizeof *tf_send_times);
  double cpu0, cpu1;
  long rss0, rss1, rss_max = 0;
  struct timespec cpu_self0, cpu_self1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_self0);
  proc_usage(pid, &cpu0, &rss0);
  n_samples = 0;
  int64_t start = now_ns();
  int64_t last_sent = 0;
  for (;;) {
    int64_t t = now_ns();
    if (tf_sent < total && !poster.busy && t >= start + tf_sent * (int64_t)interval_ms * 1000000LL) {
      long k = tf_sent + 1;
      const char *task = tasks[(k - 1) % n_tasks];
      char body[256], post[768];
      int bl = snprintf(body, sizeof body, "{\"toggle\":{\"id\":\"%s\"}}", task);
      int pl = snprintf(post, sizeof post, "POST /reactors/%s/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        "Content-Length: %d\r\n\r\n%s", id, bl, body);
      if (t - (start + tf_sent * (int64_t)interval_ms * 1000000LL) > 1000000) late++;
      tf_send_times[k] = last_sent = now_ns();
      tf_sent = k;
      poster.busy = 1;
      write_all(poster.fd, post, (size_t)pl);
      if (k % 10 == 0) { double c; long r; proc_usage(pid, &c, &r); if (r > rss_max) rss_max = r; }
      continue;
    }
    if (tf_sent == total && !poster.busy) {
      /* Done once every open stream has the last version, or 10 s after the last toggle. */
      long behind = 0;
      for (long i = 0; i < subscribers; i++) behind += streams[i].fd >= 0 && streams[i].best < tf_v0 + total;
      if (behind == 0 || t - last_sent > 10000000000LL) break;
    }
    int64_t wait_ns = 1000000; /* at most 1 ms between checks once the toggles are sent */
    if (tf_sent < total && !poster.busy) wait_ns = start + tf_sent * (int64_t)interval_ms * 1000000LL - t;
    int n = wait_events(ep, events, 512, wait_ns);
    for (int e = 0; e < n; e++) {
      void *ptr = events[e].data.ptr;
      if (ptr == &poster) { if (poster_read(&poster)) answered++; continue; }
      struct tstream *c = ptr;
      if (c->fd >= 0) tf_read(c, &closed);
    }
  }
  double window = (now_ns() - start) / 1e9;
  proc_usage(pid, &cpu1, &rss1);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_self1);
  if (rss1 > rss_max) rss_max = rss1;
  long with_last = 0;
  long long last_version = -1;
  for (long i = 0; i < subscribers; i++) {
    with_last += streams[i].fd >= 0 && streams[i].best == tf_v0 + total;
    if (streams[i].best > last_version) last_version = streams[i].best;
  }
  double self_cpu = (cpu_self1.tv_sec - cpu_self0.tv_sec) + (cpu_self1.tv_nsec - cpu_self0.tv_nsec) / 1e9;
  long events_all = tf_count[0] + tf_count[1];
  printf("result todofanout_meta subscribers=%ld connect_s=%.1f toggles=%ld answered=%ld late_over_1ms=%ld v0=%lld "
         "last_version=%lld first_mismatch=%ld streams_closed=%ld skipped=%ld snapshots=%ld with_last=%ld window_s=%.2f "
         "server_cpu_s=%.3f server_cpu_us_per_action=%.1f server_cpu_pct=%.1f server_rss_mib=%.1f client_cpu_pct=%.1f\n",
         subscribers, connect_s, total, answered, late, tf_v0, last_version, tf_first_mismatch, closed, tf_skipped,
         tf_snapshots, with_last, window, cpu1 - cpu0, total > 0 ? 1e6 * (cpu1 - cpu0) / (double)total : 0.0,
         pid > 0 ? 100.0 * (cpu1 - cpu0) / window : 0.0, rss_max / 1024.0, 100.0 * self_cpu / window);
  printf("result todofanout_events patch=%ld patch_bytes=%.1f patch_data_bytes=%.1f state=%ld state_bytes=%.1f "
         "state_data_bytes=%.1f other=%ld end=%ld wire_bytes_per_event=%.1f\n",
         tf_count[0], tf_count[0] ? tf_bytes[0] / tf_count[0] : 0.0, tf_count[0] ? tf_data[0] / tf_count[0] : 0.0,
         tf_count[1], tf_count[1] ? tf_bytes[1] / tf_count[1] : 0.0, tf_count[1] ? tf_data[1] / tf_count[1] : 0.0,
         tf_other_events, tf_end_events, events_all ? (double)tf_wire_bytes / events_all : 0.0);
  report_latency("todofanout", samples, n_samples);
  for (long i = 0; i < subscribers; i++) if (streams[i].fd >= 0) close(streams[i].fd);
  close(poster.fd);
  return 0;
#undef TF_POLL
}

/* ---------------------------------------------------------------- cold start */

static int cmd_coldstart(int port, int runs, char **argv) {
  int64_t *times = calloc((size_t)runs, sizeof *times);
  const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (int r = 0; r < runs; r++) {
    int64_t start = now_ns();
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execvp(argv[0], argv);
      _exit(127);
    }
    int64_t took = -1;
    while (now_ns() - start < 10000000000LL) {
      int fd = connect_to(port, 0);
      if (fd >= 0) {
        char buf[1024], *body;
        size_t bl;
        struct timeval tv = {.tv_sec = 1};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        int status = http_roundtrip(fd, req, sizeof req - 1, buf, sizeof buf, &body, &bl);
        close(fd);
        if (status == 200) { took = now_ns() - start; break; }
      }
      usleep(200);
    }
    /* Let it settle, then SIGTERM; SIGKILL if it has not exited within 2 s (a SIGTERM that
     * arrives before the server has installed its handlers can be lost). */
    usleep(200000);
    kill(pid, SIGTERM);
    int st, exited = 0;
    for (int i = 0; i < 200 && !exited; i++) {
      if (waitpid(pid, &st, WNOHANG) == pid) exited = 1;
      else usleep(10000);
    }
    if (!exited) {
      fprintf(stderr, "coldstart: %s ignored SIGTERM after its first 200; killed\n", argv[0]);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
    }
    if (took < 0) { fprintf(stderr, "coldstart: no 200 within 10 s\n"); return 1; }
    times[r] = took;
    usleep(100000);
  }
  qsort(times, (size_t)runs, sizeof *times, cmp_i64);
  printf("result coldstart runs=%d min_ms=%.2f median_ms=%.2f max_ms=%.2f\n", runs, times[0] / 1e6, times[runs / 2] / 1e6,
         times[runs - 1] / 1e6);
  return 0;
}

static int cmd_idle(int port, const char *path, long count, int seconds) {
  int64_t deadline = now_ns() + (int64_t)seconds * 1000000000LL;
  int *fds = calloc((size_t)count, sizeof *fds);
  char request[512], buf[4096], *body;
  size_t bodylen;
  int reqlen = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
  long answered = 0;
  for (long i = 0; i < count; i++) {
    fds[i] = connect_to(port, 0);
    if (fds[i] >= 0 && http_roundtrip(fds[i], request, (size_t)reqlen, buf, sizeof buf, &body, &bodylen) == 200) answered++;
  }
  printf("result idle opened=%ld answered=%ld\n", count, answered);
  for (int64_t left; (left = deadline - now_ns()) > 0;) usleep(left > 100000000 ? 100000 : (useconds_t)(left / 1000));
  for (long i = 0; i < count; i++) if (fds[i] >= 0) close(fds[i]);
  free(fds);
  return answered == count ? 0 : 1;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 6 && !strcmp(argv[1], "create")) return cmd_create(atoi(argv[2]), argv[3], atol(argv[4]), atoi(argv[5]));
  if (argc >= 6 && !strcmp(argv[1], "spread"))
    return cmd_spread(atoi(argv[2]), argv[3], atoi(argv[4]), atoi(argv[5]), argc > 6 ? atoi(argv[6]) : 1);
  if (argc >= 7 && !strcmp(argv[1], "latency"))
    return cmd_latency(atoi(argv[2]), argv[3], atol(argv[4]), atoi(argv[5]), atoi(argv[6]));
  if (argc >= 7 && !strcmp(argv[1], "fanout"))
    return cmd_fanout(atoi(argv[2]), argv[3], atol(argv[4]), atoi(argv[5]), atoi(argv[6]), argc > 7 ? atoi(argv[7]) : 0);
  if (argc >= 9 && !strcmp(argv[1], "todofanout"))
    return cmd_todofanout(atoi(argv[2]), argv[3], atol(argv[4]), atoi(argv[5]), atoi(argv[6]), argv[7], argv[8],
                          argc > 9 ? atoi(argv[9]) : 0);
  if (argc >= 6 && !strcmp(argv[1], "idle")) return cmd_idle(atoi(argv[2]), argv[3], atol(argv[4]), atoi(argv[5]));
  if (argc >= 6 && !strcmp(argv[1], "coldstart") && !strcmp(argv[4], "--"))
    return cmd_coldstart(atoi(argv[2]), atoi(argv[3]), argv + 5);
  fprintf(stderr, "usage: see the comment at the top of rsload.c\n");
  return 2;
}
