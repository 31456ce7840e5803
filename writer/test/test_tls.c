/*
 * What lith keeps per thread, and what a thread pays for it.
 *
 * Cost: lith's static thread-local storage is a few pointers, not buffers
 * (glibc gives every thread of the program, lith's or not, a zeroed copy of
 * it): the PT_TLS segment of this executable, which links liblith.a, is
 * under 256 bytes (it was 16,904: the stats ring and the message buffer).
 * 2,000 idle threads cost under 16 KB of RSS each (measured here: 8.4 KB
 * now, 24.4 KB with the old 16.9 KB of TLS); checked in the plain build
 * only, as the sanitizers add their own per-thread memory.
 *
 * Messages stay per thread: a thread that never failed reads "" (also
 * after successful calls, which allocate nothing); a thread that fails
 * reads its own message, not another's; 32 threads failing at once each
 * read their own; a thread's message buffer is freed when it exits (the
 * AddressSanitizer build checks for leaks).
 *
 * lith_read inside a lith_read callback on the same handle is refused with
 * LITH_MISUSE at once, with readers = 1 (where it used to wait forever) and
 * readers = 2; the inner callback does not run, the outer read goes on and
 * later reads on that thread work. A read of another handle inside a read
 * is allowed.
 */
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

#define DB "tls.db"
#define DB2 "tls2.db"

/* ---- What a thread pays ---------------------------------------------------- */

static int find_tls(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS)
      *(size_t *)arg = info->dlpi_phdr[i].p_memsz;
  return 1; /* the first object is the executable: stop there */
}

static void test_static_tls_is_small(void **state) {
  (void)state;
  size_t memsz = 0;
  dl_iterate_phdr(find_tls, &memsz);
  printf("PT_TLS of this executable (liblith.a linked in): %zu bytes\n", memsz);
  assert_true(memsz < 256);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%ld %ld", &size, &res), 2);
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static pthread_barrier_t idle_up, idle_go;

static void *idle_thread(void *arg) {
  (void)arg;
  pthread_barrier_wait(&idle_up);
  pthread_barrier_wait(&idle_go);
  return NULL;
}

static void test_idle_threads_cost_little(void **state) {
  (void)state;
  int n = t_scaled(2000);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  assert_non_null(th);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024); /* no huge pages for the stacks */
  pthread_barrier_init(&idle_up, NULL, (unsigned)n + 1);
  pthread_barrier_init(&idle_go, NULL, (unsigned)n + 1);
  long before = rss_kib();
  for (int i = 0; i < n; i++) {
    int err = pthread_create(&th[i], &attr, idle_thread, NULL);
    if (err)
      fail_msg("pthread_create %d of %d: %s", i, n, strerror(err));
  }
  pthread_barrier_wait(&idle_up);
  long after = rss_kib();
  pthread_barrier_wait(&idle_go);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&idle_up);
  pthread_barrier_destroy(&idle_go);
  pthread_attr_destroy(&attr);
  free(th);
  double per = (double)(after - before) / n;
  printf("%d idle threads: RSS %ld -> %ld KiB, %.1f KiB per thread%s\n", n, before, after, per,
         SANITIZED ? " (sanitizer build: not checked)" : "");
  if (!SANITIZED)
    assert_true(per < 16.0);
}

/* ---- Messages, per thread --------------------------------------------------- */

static int fail_cmd(lith_tx *tx, void *arg) { return lith_tx_error(tx, LITH_USER, "%s", (const char *)arg); }

typedef struct msg_case {
  lith *db;
  pthread_barrier_t step;
  char first[256];    /* lith_errmsg of a fresh thread */
  char after_ok[256]; /* after a successful lith_do */
  char mine[256];     /* after its own failure */
  char later[256];    /* after the other thread failed differently */
  char second[256];   /* the second thread's own failure */
} msg_case;

/* The first thread fails before the second starts; the second must read ""
 * until it fails itself, and the first must keep its own message. */
static void *fails_first(void *arg) {
  msg_case *c = arg;
  int rc = lith_do(c->db, fail_cmd, "first thread's failure");
  snprintf(c->mine, sizeof c->mine, "%s", rc == LITH_USER ? lith_errmsg(NULL) : "wrong code");
  pthread_barrier_wait(&c->step); /* 1: the second thread may start */
  pthread_barrier_wait(&c->step); /* 2: it has failed */
  snprintf(c->later, sizeof c->later, "%s", lith_errmsg(c->db));
  return NULL;
}

static void *fails_second(void *arg) {
  msg_case *c = arg;
  pthread_barrier_wait(&c->step); /* 1 */
  snprintf(c->first, sizeof c->first, "%s", lith_errmsg(NULL));
  int rc = lith_do(c->db, t_put_cmd, "second");
  snprintf(c->after_ok, sizeof c->after_ok, "%s", rc == LITH_OK ? lith_errmsg(NULL) : "wrong code");
  rc = lith_do(c->db, NULL, NULL); /* misuse, refused before anything is queued */
  snprintf(c->second, sizeof c->second, "%s", rc == LITH_MISUSE ? lith_errmsg(NULL) : "wrong code");
  pthread_barrier_wait(&c->step); /* 2 */
  return NULL;
}

static void test_messages_are_per_thread(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  msg_case c = {.db = db};
  pthread_barrier_init(&c.step, NULL, 2);
  pthread_t a, b;
  assert_int_equal(pthread_create(&a, NULL, fails_first, &c), 0);
  assert_int_equal(pthread_create(&b, NULL, fails_second, &c), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_barrier_destroy(&c.step);
  assert_string_equal(c.mine, "first thread's failure");
  assert_string_equal(c.first, "");
  assert_string_equal(c.after_ok, "");
  assert_string_equal(c.later, "first thread's failure");
  assert_string_equal(c.second, "lith_do: no handle or no command");
  /* this thread: its own failure, then cleared by a success */
  assert_int_equal(lith_do(db, fail_cmd, "main thread's failure"), LITH_USER);
  assert_string_equal(lith_errmsg(NULL), "main thread's failure");
  assert_int_equal(lith_do(db, t_put_cmd, "main"), LITH_OK);
  assert_string_equal(lith_errmsg(NULL), "");
  assert_int_equal(lith_close(db), LITH_OK);
}

typedef struct many_arg {
  lith *db;
  int id;
  pthread_barrier_t *start;
  _Atomic int *wrong;
} many_arg;

static void *fail_own(void *arg) {
  many_arg *m = arg;
  char want[64];
  snprintf(want, sizeof want, "thread %d failed", m->id);
  pthread_barrier_wait(m->start);
  for (int i = 0; i < 20; i++) {
    if (strcmp(lith_errmsg(NULL), i ? want : "") != 0)
      atomic_fetch_add(m->wrong, 1);
    if (lith_do(m->db, fail_cmd, want) != LITH_USER || strcmp(lith_errmsg(NULL), want) != 0)
      atomic_fetch_add(m->wrong, 1);
  }
  return NULL; /* its buffer is freed as it exits */
}

static void test_many_threads_each_read_their_own(void **state) {
  (void)state;
  enum { N = 32 };
  lith_options opt;
  t_bank_options(&opt);
  lith *db = t_open_fresh(DB, &opt);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, N);
  _Atomic int wrong = 0;
  pthread_t th[N];
  many_arg m[N];
  for (int i = 0; i < N; i++) {
    m[i] = (many_arg){db, i, &start, &wrong};
    assert_int_equal(pthread_create(&th[i], NULL, fail_own, &m[i]), 0);
  }
  for (int i = 0; i < N; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&start);
  assert_int_equal(atomic_load(&wrong), 0);
  assert_int_equal(lith_close(db), LITH_OK);
}

/* ---- lith_read inside lith_read ---------------------------------------------- */

typedef struct nested {
  lith *db;       /* the handle of the outer read */
  lith *inner_db; /* the handle the callback reads */
  int inner_rc, outer_rc, again_rc;
  int inner_ran;  /* inner_reader calls */
  int ran_inside; /* of them, from inside outer_reader */
  int64_t rows;
  char msg[256];
  _Atomic int finished;
} nested;

static int inner_reader(lith_rx *rx, void *arg) {
  (void)rx;
  ((nested *)arg)->inner_ran++;
  return LITH_OK;
}

static int outer_reader(lith_rx *rx, void *arg) {
  nested *n = arg;
  n->inner_rc = lith_read(n->inner_db, inner_reader, n);
  snprintf(n->msg, sizeof n->msg, "%s", lith_errmsg(NULL));
  n->ran_inside = n->inner_ran;
  /* the outer read is untouched by the refusal */
  return lith_rx_int64(rx, &n->rows, "SELECT count(*) FROM kv", NULL);
}

static void *read_nested(void *arg) {
  nested *n = arg;
  n->outer_rc = lith_read(n->db, outer_reader, n);
  n->again_rc = lith_read(n->db, inner_reader, n); /* the thread is no longer inside a read */
  atomic_store(&n->finished, 1);
  return NULL;
}

/* Run read_nested on a thread of its own; fail rather than hang if it
 * waits for its own reader. */
static void run_nested(nested *n) {
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, read_nested, n), 0);
  for (int i = 0; i < 10000 && !atomic_load(&n->finished); i++)
    usleep(1000);
  if (!atomic_load(&n->finished))
    fail_msg("lith_read inside lith_read did not return within 10 s");
  pthread_join(th, NULL);
}

static void nested_case(int readers) {
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = readers;
  lith *db = t_open_fresh(DB, &opt);
  assert_int_equal(lith_do(db, t_put_cmd, "row"), LITH_OK);
  nested n = {.db = db, .inner_db = db};
  run_nested(&n);
  assert_int_equal(n.inner_rc, LITH_MISUSE);
  assert_non_null(strstr(n.msg, "lith_read called inside a lith_read callback"));
  assert_int_equal(n.outer_rc, LITH_OK);
  assert_int_equal(n.rows, 1);
  assert_int_equal(n.again_rc, LITH_OK);
  assert_int_equal(n.ran_inside, 0);
  assert_int_equal(n.inner_ran, 1); /* the plain read after it */
  assert_int_equal(lith_close(db), LITH_OK);
}

static void test_nested_read_refused_one_reader(void **state) {
  (void)state;
  nested_case(1);
}

static void test_nested_read_refused_two_readers(void **state) {
  (void)state;
  nested_case(2);
}

static void test_read_of_another_handle_inside_a_read(void **state) {
  (void)state;
  lith_options opt;
  t_bank_options(&opt);
  opt.readers = 1;
  lith *db = t_open_fresh(DB, &opt);
  lith *db2 = t_open_fresh(DB2, &opt);
  assert_int_equal(lith_do(db, t_put_cmd, "row"), LITH_OK);
  nested n = {.db = db, .inner_db = db2};
  run_nested(&n);
  assert_int_equal(n.inner_rc, LITH_OK);
  assert_int_equal(n.ran_inside, 1);
  assert_int_equal(n.outer_rc, LITH_OK);
  assert_int_equal(n.rows, 1);
  assert_int_equal(n.again_rc, LITH_OK);
  assert_int_equal(lith_close(db2), LITH_OK);
  assert_int_equal(lith_close(db), LITH_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_static_tls_is_small),
      cmocka_unit_test(test_idle_threads_cost_little), /* before any handle: nothing else runs */
      cmocka_unit_test(test_messages_are_per_thread),
      cmocka_unit_test(test_many_threads_each_read_their_own),
      cmocka_unit_test(test_nested_read_refused_one_reader),
      cmocka_unit_test(test_nested_read_refused_two_readers),
      cmocka_unit_test(test_read_of_another_handle_inside_a_read),
  };
  return cmocka_run_group_tests_name("writer/tls", tests, NULL, NULL);
}
