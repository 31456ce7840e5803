/*
 * lith's own threads block the signals a program is told things by
 * (lib/thread.h):
 *   - a thread of lith__thread_start blocks SIGTERM and the rest from its
 *     first instruction, not a fault's signal nor SIGPIPE; its creator's
 *     mask is as it was;
 *   - the threads of an open lith (lith-writer, lith-waker,
 *     lith-checkpoint) block SIGTERM, read from /proc/self/task; the
 *     test's own thread does not.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../test/common.h"
#include "../thread.h"
#include "lith.h"

static void *report_mask(void *arg) {
  sigset_t *out = arg;
  pthread_sigmask(SIG_BLOCK, NULL, out);
  return NULL;
}

static void test_start_blocks(void **state) {
  (void)state;
  sigset_t before, after, inner;
  pthread_t t;
  pthread_sigmask(SIG_BLOCK, NULL, &before);
  assert_int_equal(lith__thread_start(&t, report_mask, &inner), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_sigmask(SIG_BLOCK, NULL, &after);
  int told[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH};
  for (unsigned i = 0; i < sizeof told / sizeof told[0]; i++) {
    assert_true(sigismember(&inner, told[i]));
    assert_int_equal(sigismember(&after, told[i]), sigismember(&before, told[i]));
  }
  int kept[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGPIPE};
  for (unsigned i = 0; i < sizeof kept / sizeof kept[0]; i++)
    assert_false(sigismember(&inner, kept[i]));
}

/* SigBlk of /proc/self/task/TID/status as a mask of signals 1..64. */
static unsigned long long blocked(const char *tid) {
  char path[300], line[256];
  unsigned long long m = 0;
  snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0; /* gone meanwhile */
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "SigBlk:", 7) == 0)
      m = strtoull(line + 7, NULL, 16);
  fclose(f);
  return m;
}

/* /proc/self/task/TID/comm into name ("" if gone). */
static void comm(const char *tid, char *name, size_t cap) {
  char path[300];
  snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
  name[0] = '\0';
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return;
  if (fgets(name, (int)cap, f) != NULL)
    name[strcspn(name, "\n")] = '\0';
  fclose(f);
}

static void test_lith_threads_block(void **state) {
  (void)state;
  const char *path = "thread.db";
  lith *db = t_open_fresh(path, NULL);
  assert_non_null(db);
  char me[32];
  snprintf(me, sizeof me, "%ld", (long)syscall(SYS_gettid));
  unsigned long long term = 1ull << (SIGTERM - 1);
  int others = 0;
  /* Each thread names itself once it runs, which on a busy machine can be
   * a moment after lith_open: so the scan runs until two have (at most 5 s). */
  for (int tries = 0; tries < 500 && others < 2; tries++) {
    if (tries > 0)
      usleep(10 * 1000);
    others = 0;
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.')
        continue;
      if (strcmp(e->d_name, me) == 0) {
        assert_false(blocked(e->d_name) & term);
        continue;
      }
      char name[64];
      comm(e->d_name, name, sizeof name);
      if (strncmp(name, "lith-", 5) != 0)
        continue; /* a sanitizer's */
      others++;
      if (!(blocked(e->d_name) & term))
        fail_msg("thread %s (%s) of the open lith does not block SIGTERM", e->d_name, name);
    }
    closedir(d);
  }
  assert_true(others >= 2); /* the writer, the waker (and the checkpointer when on) */
  assert_int_equal(lith_close(db), LITH_OK);
  t_remove_db(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start_blocks),
      cmocka_unit_test(test_lith_threads_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
