/*
 * lithd log — see log.h.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char *log_path;                         /* NULL: stderr as inherited */
static _Atomic int log_level = LITHD_LOG_INFO; /* read per request: no lock */

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

void lithd_log(int level, const char *fmt, ...) {
  char line[2048];
  struct timespec ts;
  struct tm tm;
  size_t n;
  int k;
  va_list ap;

  if (level < LITHD_LOG_ERROR || level > LITHD_LOG_DEBUG || !lithd_log_enabled(level))
    return;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
  k = snprintf(line + n, sizeof line - n, ".%03ldZ lithd[%ld] %s: ", ts.tv_nsec / 1000000L, (long)getpid(),
               level_names[level]);
  if (k > 0)
    n += (size_t)k;
  va_start(ap, fmt);
  k = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
  va_end(ap);
  if (k > 0)
    n += (size_t)k < sizeof line - n - 1 ? (size_t)k : sizeof line - n - 2;
  line[n++] = '\n';
  /* One write on an O_APPEND descriptor: whole lines, whoever else writes. */
  pthread_mutex_lock(&log_mu);
  if (write(STDERR_FILENO, line, n) < 0) {
    /* nowhere left to report it */
  }
  pthread_mutex_unlock(&log_mu);
}

void lithd_log_close(void) {
  pthread_mutex_lock(&log_mu);
  free(log_path);
  log_path = NULL;
  pthread_mutex_unlock(&log_mu);
}
