/*
 * lithd log — see log.h.
 *
 * A line is built whole in a buffer on the stack (text or JSON), then
 * written with one write(2). The JSON writer is bounded by that buffer: a
 * string that would not fit is cut at a whole UTF-8 sequence, and the line
 * is always closed, so every line parses as one object.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "utf8.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char *log_path;                         /* NULL: stderr as inherited */
static _Atomic int log_level = LITHD_LOG_INFO; /* read per request: no lock */
static _Atomic int log_format = LITHD_LOG_TEXT;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int lithd_log_level_parse(const char *name) {
  int i;
  for (i = 0; i <= LITHD_LOG_DEBUG; i++)
    if (strcmp(name, level_names[i]) == 0)
      return i;
  return -1;
}

/* Open path and make it descriptor 2. Called with log_mu held (or before
 * any thread exists). */
static int swap_in(const char *path) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0)
    return -1;
  if (fd != STDERR_FILENO) {
    if (dup2(fd, STDERR_FILENO) < 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    close(fd);
  }
  return 0;
}

int lithd_log_open(const char *path, int level) {
  char *copy = NULL;

  if (path != NULL) {
    if ((copy = strdup(path)) == NULL)
      return -1;
    if (swap_in(path) != 0) {
      int e = errno;
      free(copy);
      errno = e;
      return -1;
    }
  }
  pthread_mutex_lock(&log_mu);
  free(log_path);
  log_path = copy;
  atomic_store(&log_level, level);
  pthread_mutex_unlock(&log_mu);
  return 0;
}

int lithd_log_reopen(void) {
  int rc = 0;
  pthread_mutex_lock(&log_mu);
  if (log_path != NULL)
    rc = swap_in(log_path);
  pthread_mutex_unlock(&log_mu);
  return rc;
}

int lithd_log_enabled(int level) { return level <= atomic_load_explicit(&log_level, memory_order_relaxed); }

int lithd_log_format_parse(const char *name) {
  if (strcmp(name, "text") == 0)
    return LITHD_LOG_TEXT;
  if (strcmp(name, "json") == 0)
    return LITHD_LOG_JSON;
  return -1;
}

void lithd_log_set_format(int format) { atomic_store(&log_format, format); }

/* A line under construction: at most LINE_MAX bytes, room kept for the
 * closing of a JSON object and the newline. */
#define LINE_MAX 4096
#define LINE_TAIL 8

typedef struct line {
  char p[LINE_MAX];
  size_t n;
} line;

static void put(line *l, const char *s, size_t n) {
  if (n > LINE_MAX - LINE_TAIL - l->n)
    n = LINE_MAX - LINE_TAIL - l->n;
  memcpy(l->p + l->n, s, n);
  l->n += n;
}

static void putf(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(line *l, const char *fmt, ...) {
  size_t room = LINE_MAX - LINE_TAIL - l->n;
  va_list ap;
  if (room <= 1)
    return;
  va_start(ap, fmt);
  int k = vsnprintf(l->p + l->n, room, fmt, ap);
  va_end(ap);
  if (k > 0)
    l->n += (size_t)k < room ? (size_t)k : room - 1;
}

/* s as a JSON string: quotes, backslashes and control characters escaped,
 * a byte that starts no well-formed UTF-8 sequence as U+FFFD; cut (at a
 * whole sequence) where the line would overflow, the quote still closed. */
static void put_json_string(line *l, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  size_t room = LINE_MAX - LINE_TAIL - 1; /* the closing quote always fits */
  if (l->n >= room)
    return;
  l->p[l->n++] = '"';
  while (*u) {
    char esc[8];
    const char *out = esc;
    size_t len;
    if (*u == '"' || *u == '\\') {
      len = (size_t)snprintf(esc, sizeof esc, "\\%c", *u);
      u++;
    } else if (*u < 0x20) {
      len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *u);
      u++;
    } else if (*u < 0x80) {
      out = (const char *)u;
      len = 1;
      u++;
    } else if ((len = lithd_utf8_len(u, strnlen((const char *)u, 4))) > 0) {
      out = (const char *)u;
      u += len;
    } else {
      out = "\xef\xbf\xbd"; /* U+FFFD */
      len = 3;
      u++;
    }
    if (l->n + len > room)
      break;
    memcpy(l->p + l->n, out, len);
    l->n += len;
  }
  l->p[l->n++] = '"';
}

/* s as text on one line: a control character or a byte that starts no
 * well-formed UTF-8 sequence as \xNN, so that a client's path, or a
 * dqlite node's text in a message, cannot write a line of its own. */
static void put_text(line *l, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    size_t len = *u < 0x20 || *u == 0x7f ? 0 : lithd_utf8_len(u, strnlen((const char *)u, 4));
    if (len == 0) {
      putf(l, "\\x%02x", *u);
      u++;
    } else {
      put(l, (const char *)u, len);
      u += len;
    }
  }
}

/* The line's beginning: timestamp, pid and level, as text or as the first
 * members of a JSON object. */
static int line_begin(line *l, int level) {
  struct timespec ts;
  struct tm tm;
  char when[40];
  int json = atomic_load_explicit(&log_format, memory_order_relaxed) == LITHD_LOG_JSON;

  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000L);
  l->n = 0;
  if (json)
    putf(l, "{\"ts\":\"%s\",\"level\":\"%s\",\"pid\":%ld,\"msg\":", when, level_names[level], (long)getpid());
  else
    putf(l, "%s lithd[%ld] %s: ", when, (long)getpid(), level_names[level]);
  return json;
}

/* Close the line (the JSON object, if one) and write it. */
static void line_end(line *l, int json) {
  if (json)
    l->p[l->n++] = '}';
  l->p[l->n++] = '\n';
  /* One write on an O_APPEND descriptor: whole lines, whoever else writes. */
  pthread_mutex_lock(&log_mu);
  if (write(STDERR_FILENO, l->p, l->n) < 0) {
    /* nowhere left to report it */
  }
  pthread_mutex_unlock(&log_mu);
}

void lithd_log(int level, const char *fmt, ...) {
  char msg[2048];
  line l;
  va_list ap;

  if (level < LITHD_LOG_ERROR || level > LITHD_LOG_DEBUG || !lithd_log_enabled(level))
    return;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
    msg[0] = '\0';
  va_end(ap);
  int json = line_begin(&l, level);
  if (json)
    put_json_string(&l, msg);
  else
    put_text(&l, msg); /* what others sent (a node's address, a path) stays in its line */
  line_end(&l, json);
}

void lithd_log_request(const char *method, const char *path, int status, uint64_t us, uint64_t bytes,
                       const char *client) {
  line l;
  if (!lithd_log_enabled(LITHD_LOG_DEBUG))
    return;
  int json = line_begin(&l, LITHD_LOG_DEBUG);
  if (json) {
    put_json_string(&l, "request");
    put(&l, ",\"method\":", 10);
    put_json_string(&l, method);
    put(&l, ",\"path\":", 8);
    put_json_string(&l, path);
    putf(&l, ",\"status\":%d,\"us\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"client\":", status, us, bytes);
    put_json_string(&l, client);
  } else {
    put_text(&l, method);
    put(&l, " ", 1);
    put_text(&l, path);
    putf(&l, " %d %" PRIu64 "us %" PRIu64 "B %s", status, us, bytes, client);
  }
  line_end(&l, json);
}

void lithd_log_close(void) {
  pthread_mutex_lock(&log_mu);
  free(log_path);
  log_path = NULL;
  pthread_mutex_unlock(&log_mu);
}
