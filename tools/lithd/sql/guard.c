/* lithd guard: limits, bounded functions and the watchdog (see guard.h). */
#include "guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lith.h"

/* The watchdog's period: how late past its deadline an interrupt can come. */
#define WATCH_PERIOD_MS 10
/* Units of work (byte comparisons, roughly) between two deadline checks in
 * a bounded function: a clock read costs ~20 ns, this ~50 us. */
#define CHECK_EVERY 65536
/* SQLite's largest SQLITE_MAX_FUNCTION_ARG. */
#define PRINTF_MAX_ARGS 127

struct lithd_guard_slot {
  sqlite3 *conn;
  _Atomic int64_t deadline; /* INT64_MAX while no run is on conn */
  _Atomic int is_read;
  int refs; /* the functions registered with it, + connect's */
  struct lithd_guard_slot *prev, *next;
  /* printf's stand-in (see printf_fn), opened at its first use; only the
   * thread using conn touches them. */
  sqlite3 *aux;
  sqlite3_stmt *aux_printf[PRINTF_MAX_ARGS + 1]; /* by argument count */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static lithd_guard_slot *g_slots; /* every guarded connection, under g_mu */
static atomic_int g_stop_reads;
static pthread_t g_thread;
static int g_running, g_quit; /* under g_mu */

void lithd_guard_limits_default(lithd_guard_limits *lim) {
  lim->max_value_bytes = 1 << 20;
  lim->max_like_pattern = 50;
  lim->max_program_ops = 250000;
}

/* ---- Runs ----------------------------------------------------------------- */

int lithd_guard_cut(const lithd_guard_slot *s) {
  if (s == NULL)
    return LITHD_GUARD_NONE;
  int64_t deadline = atomic_load_explicit(&s->deadline, memory_order_relaxed);
  if (deadline == INT64_MAX)
    return LITHD_GUARD_NONE; /* no run: not ours to bound */
  if (atomic_load_explicit(&s->is_read, memory_order_relaxed) && atomic_load(&g_stop_reads))
    return LITHD_GUARD_STOPPING;
  return lith_clock_ms() > deadline ? LITHD_GUARD_DEADLINE : LITHD_GUARD_NONE;
}

lithd_guard_slot *lithd_guard_begin(const sqlite3 *conn, int64_t deadline, int is_read) {
  lithd_guard_slot *s;
  pthread_mutex_lock(&g_mu);
  for (s = g_slots; s != NULL && s->conn != conn; s = s->next) {
  }
  if (s != NULL) {
    atomic_store(&s->is_read, is_read);
    atomic_store(&s->deadline, deadline == INT64_MAX ? INT64_MAX - 1 : deadline);
  }
  pthread_mutex_unlock(&g_mu);
  return s;
}

void lithd_guard_end(lithd_guard_slot *s) {
  if (s == NULL)
    return;
  /* Under the lock: the watchdog interrupts only while it holds it and sees
   * the run, so no interrupt meant for this run lands on the next one. */
  pthread_mutex_lock(&g_mu);
  atomic_store(&s->deadline, INT64_MAX);
  pthread_mutex_unlock(&g_mu);
}

void lithd_guard_stop_reads(void) {
  atomic_store(&g_stop_reads, 1);
  pthread_mutex_lock(&g_mu);
  pthread_cond_signal(&g_cv); /* the watchdog acts now, not at its next tick */
  pthread_mutex_unlock(&g_mu);
}

/* ---- Watchdog ----------------------------------------------------------- */

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  while (!g_quit) {
    for (lithd_guard_slot *s = g_slots; s != NULL; s = s->next)
      if (lithd_guard_cut(s) != LITHD_GUARD_NONE)
        sqlite3_interrupt(s->conn); /* open: a run is on it, and it cannot close meanwhile */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += WATCH_PERIOD_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g_cv, &g_mu, &ts);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

int lithd_guard_start(void) {
  int rc = 0;
  pthread_condattr_t ca;
  pthread_mutex_lock(&g_mu);
  if (g_running)
    goto out;
  /* The cv's clock must be the one the timed wait computes from. */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_destroy(&g_cv);
  pthread_cond_init(&g_cv, &ca);
  pthread_condattr_destroy(&ca);
  g_quit = 0;
  if ((rc = pthread_create(&g_thread, NULL, watchdog, NULL)) == 0)
    g_running = 1;
out:
  pthread_mutex_unlock(&g_mu);
  if (rc == 0)
    pthread_setname_np(g_thread, "lithd-watchdog");
  return rc;
}

void lithd_guard_stop(void) {
  pthread_mutex_lock(&g_mu);
  if (!g_running) {
    pthread_mutex_unlock(&g_mu);
    return;
  }
  g_quit = 1;
  pthread_cond_signal(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(g_thread, NULL);
  pthread_mutex_lock(&g_mu);
  g_running = 0;
  pthread_mutex_unlock(&g_mu);
}

/* ---- Per-connection state -------------------------------------------------- */

static void slot_release(void *p) {
  lithd_guard_slot *s = p;
  pthread_mutex_lock(&g_mu);
  if (--s->refs > 0) {
    pthread_mutex_unlock(&g_mu);
    return;
  }
  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    g_slots = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  pthread_mutex_unlock(&g_mu);
  for (int i = 0; i <= PRINTF_MAX_ARGS; i++)
    sqlite3_finalize(s->aux_printf[i]);
  sqlite3_close(s->aux);
  free(s);
}

/* Past the deadline (or stopping): end the function with SQLite's
 * "interrupted", as an interrupt between steps would. */
static int cut_now(sqlite3_context *ctx) {
  if (lithd_guard_cut(sqlite3_user_data(ctx)) == LITHD_GUARD_NONE)
    return 0;
  sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
  return 1;
}

/* ---- instr(X, Y) ----------------------------------------------------------- */

/* SQLite's instr(): the 1-based position of the first Y in X, in characters
 * for text and bytes for blobs (both blobs: bytes; one blob: both as text),
 * 0 if none, 1 for an empty Y, NULL if either is NULL. For text the
 * built-in tries only the first byte and each byte that is not a UTF-8
 * continuation byte; memmem finds the first match anywhere, which is one of
 * those whenever Y does not start with a continuation byte (and if it
 * does, only a match at the first byte counts). */
static void instr_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  sqlite3_value *c1 = NULL, *c2 = NULL;
  const unsigned char *hay, *needle;
  int nhay, nneedle, is_text;
  int th = sqlite3_value_type(argv[0]), tn = sqlite3_value_type(argv[1]);
  int64_t n = 1;
  (void)argc;
  if (th == SQLITE_NULL || tn == SQLITE_NULL)
    return;
  nhay = sqlite3_value_bytes(argv[0]);
  nneedle = sqlite3_value_bytes(argv[1]);
  if (nneedle > 0) {
    if (th == SQLITE_BLOB && tn == SQLITE_BLOB) {
      hay = sqlite3_value_blob(argv[0]);
      needle = sqlite3_value_blob(argv[1]);
      is_text = 0;
    } else if (th != SQLITE_BLOB && tn != SQLITE_BLOB) {
      hay = sqlite3_value_text(argv[0]);
      needle = sqlite3_value_text(argv[1]);
      is_text = 1;
    } else {
      /* One blob: both as text, on copies (the arguments keep their type). */
      if ((c1 = sqlite3_value_dup(argv[0])) == NULL || (hay = sqlite3_value_text(c1)) == NULL)
        goto nomem;
      nhay = sqlite3_value_bytes(c1);
      if ((c2 = sqlite3_value_dup(argv[1])) == NULL || (needle = sqlite3_value_text(c2)) == NULL)
        goto nomem;
      nneedle = sqlite3_value_bytes(c2);
      is_text = 1;
    }
    if (needle == NULL || (nhay > 0 && hay == NULL))
      goto nomem;
    if (nneedle > nhay) {
      n = 0;
    } else if (is_text && (needle[0] & 0xc0) == 0x80) {
      n = memcmp(hay, needle, (size_t)nneedle) == 0 ? 1 : 0;
    } else {
      const unsigned char *at = memmem(hay, (size_t)nhay, needle, (size_t)nneedle);
      if (at == NULL) {
        n = 0;
      } else if (!is_text) {
        n = at - hay + 1;
      } else {
        /* Characters before the match: the first byte, then every byte
         * that starts a character. */
        for (const unsigned char *p = hay + 1; p <= at; p++)
          n += (*p & 0xc0) != 0x80;
      }
    }
  }
  sqlite3_result_int64(ctx, n);
  goto out;
nomem:
  sqlite3_result_error_nomem(ctx);
out:
  sqlite3_value_free(c1);
  sqlite3_value_free(c2);
}

/* ---- replace(X, Y, Z) ---------------------------------------------------- */

/* SQLite's replace(): every Y in X (bytes, left to right, not overlapping)
 * replaced by Z; NULL if any is NULL; X itself (its own type) if Y is empty
 * or starts with a NUL byte; "string or blob too big" past
 * SQLITE_LIMIT_LENGTH. memmem makes it linear where the built-in compares Y
 * at every byte of X. */
static void replace_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const unsigned char *str, *pat, *rep, *p, *end, *at;
  int64_t nstr, npat, nrep, nout, matches = 0;
  unsigned char *out, *o;
  (void)argc;
  if ((str = sqlite3_value_text(argv[0])) == NULL)
    return;
  nstr = sqlite3_value_bytes(argv[0]);
  if ((pat = sqlite3_value_text(argv[1])) == NULL)
    return;
  if (pat[0] == 0) {
    sqlite3_result_value(ctx, argv[0]);
    return;
  }
  npat = sqlite3_value_bytes(argv[1]);
  if ((rep = sqlite3_value_text(argv[2])) == NULL)
    return;
  nrep = sqlite3_value_bytes(argv[2]);
  int64_t limit = sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1);
  if (nstr + 1 > limit)
    goto toobig;

  end = str + nstr;
  for (p = str; end - p >= npat && (at = memmem(p, (size_t)(end - p), pat, (size_t)npat)) != NULL;
       p = at + npat)
    matches++;
  nout = nstr + matches * (nrep - npat);
  if (nrep > npat && nout > limit)
    goto toobig;
  if ((out = sqlite3_malloc64((sqlite3_uint64)nout + 1)) == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  o = out;
  for (p = str; end - p >= npat && (at = memmem(p, (size_t)(end - p), pat, (size_t)npat)) != NULL;
       p = at + npat) {
    memcpy(o, p, (size_t)(at - p));
    o += at - p;
    memcpy(o, rep, (size_t)nrep);
    o += nrep;
  }
  memcpy(o, p, (size_t)(end - p));
  o += end - p;
  *o = 0;
  sqlite3_result_text64(ctx, (const char *)out, (sqlite3_uint64)(o - out), sqlite3_free, SQLITE_UTF8);
  return;
toobig:
  sqlite3_result_error_toobig(ctx);
}

/* ---- trim(X, Y), ltrim(X, Y), rtrim(X, Y) ------------------------------------ */

/* SQLite's two-argument trims: Y (up to its first NUL) is cut into
 * characters (a byte from 0xc0 up takes the continuation bytes after it;
 * any other byte is one character); while X starts (ltrim) or ends (rtrim)
 * with one of them, tried in Y's order, it is removed. The same walk as
 * the built-in, which costs |X| x (characters of Y) at worst, with the
 * deadline checked as it goes. user_data's flags: 1 left, 2 right. */
static void trim_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv, int flags) {
  const unsigned char *in, *set, *z;
  const unsigned char **chars = NULL;
  unsigned *lens;
  int64_t nin, nchars = 0;
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL)
    return;
  if ((in = sqlite3_value_text(argv[0])) == NULL)
    return;
  nin = sqlite3_value_bytes(argv[0]);
  if ((set = sqlite3_value_text(argv[1])) == NULL)
    return;
  for (z = set; *z; nchars++)
    if (*z++ >= 0xc0)
      while ((*z & 0xc0) == 0x80)
        z++;
  if (nchars > 0) {
    chars = sqlite3_malloc64((sqlite3_uint64)nchars * (sizeof *chars + sizeof *lens));
    if (chars == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    lens = (unsigned *)(chars + nchars);
    int64_t i = 0, work = 0;
    for (z = set; *z; i++) {
      chars[i] = z;
      if (*z++ >= 0xc0)
        while ((*z & 0xc0) == 0x80)
          z++;
      lens[i] = (unsigned)(z - chars[i]);
    }
    for (int side = 1; side <= 2; side++) {
      if (!(flags & side))
        continue;
      while (nin > 0) {
        int64_t k;
        unsigned len = 0;
        for (k = 0; k < nchars; k++) {
          len = lens[k];
          if (len <= nin && memcmp(side == 1 ? in : in + nin - len, chars[k], len) == 0)
            break;
        }
        if ((work += k + 1) >= CHECK_EVERY) {
          work = 0;
          if (cut_now(ctx)) {
            sqlite3_free(chars);
            return;
          }
        }
        if (k >= nchars)
          break;
        if (side == 1)
          in += len;
        nin -= len;
      }
    }
    sqlite3_free(chars);
  }
  sqlite3_result_text64(ctx, (const char *)in, (sqlite3_uint64)nin, SQLITE_TRANSIENT, SQLITE_UTF8);
}

static void ltrim_fn(sqlite3_context *c, int n, sqlite3_value **v) { trim_fn(c, n, v, 1); }
static void rtrim_fn(sqlite3_context *c, int n, sqlite3_value **v) { trim_fn(c, n, v, 2); }
static void btrim_fn(sqlite3_context *c, int n, sqlite3_value **v) { trim_fn(c, n, v, 3); }

/* ---- printf(FORMAT, ...), format(FORMAT, ...) ------------------------------- */

/* SQLite 3.40's printf() writes a %c conversion's repeat count (its
 * precision) one copy at a time, and goes on after its output passed
 * SQLITE_LIMIT_LENGTH: printf('%.*c', 999999999, 'x') is 16 s inside one
 * call. Its answer is then NULL (too big). So: the repeat counts of every
 * %c are added up first, reading the format exactly as SQLite does (flags,
 * widths and precisions in any order, '*' taking the next argument as a
 * 32-bit int); when they pass the limit the answer is NULL at once, and
 * otherwise the built-in printf, bounded now, runs on an auxiliary
 * in-memory connection with the same limit, which gives its exact answer. */
static int64_t printf_repeats(const unsigned char *fmt, int nargs, sqlite3_value **args) {
  int used = 0;
  int64_t total = 0;
#define NEXT_INT() (used < nargs ? (int)(uint32_t)(uint64_t)sqlite3_value_int64(args[used++]) : 0)
  for (const unsigned char *f = fmt; *f; f++) {
    if (*f != '%')
      continue;
    unsigned c = *++f;
    if (c == 0)
      break;
    int precision = -1, done = 0;
    do {
      switch (c) {
      case '-':
      case '+':
      case ' ':
      case '#':
      case '!':
      case '0':
      case ',': break;
      case 'l':
        c = *++f;
        if (c == 'l')
          c = *++f;
        done = 1;
        break;
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7':
      case '8':
      case '9':
        while ((c = *++f) >= '0' && c <= '9') {
        }
        if (c != '.' && c != 'l')
          done = 1;
        else
          f--;
        break;
      case '*':
        (void)NEXT_INT(); /* the width: padding, written at once (bounded) */
        if ((c = f[1]) != '.' && c != 'l') {
          c = *++f;
          done = 1;
        }
        break;
      case '.':
        c = *++f;
        if (c == '*') {
          precision = NEXT_INT();
          if (precision < 0)
            precision = precision >= -2147483647 ? -precision : -1;
          c = *++f;
        } else {
          unsigned px = 0;
          while (c >= '0' && c <= '9') {
            px = px * 10 + c - '0';
            c = *++f;
          }
          precision = (int)(px & 0x7fffffff);
        }
        if (c == 'l')
          --f;
        else
          done = 1;
        break;
      default: done = 1; break;
      }
    } while (!done && (c = *++f) != 0);
    switch (c) {
    case 'c':
      used += used < nargs;
      if (precision > 1)
        total += precision;
      break;
    case 'd':
    case 's':
    case 'g':
    case 'z':
    case 'q':
    case 'Q':
    case 'w':
    case 'o':
    case 'u':
    case 'x':
    case 'X':
    case 'f':
    case 'e':
    case 'E':
    case 'G':
    case 'i':
    case 'p':
    case 'r': used += used < nargs; break;
    case '%':
    case 'n': break;
    default: return total; /* the built-in stops here too (an unknown or internal conversion) */
    }
  }
#undef NEXT_INT
  return total;
}

static void printf_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  lithd_guard_slot *s = sqlite3_user_data(ctx);
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  const unsigned char *fmt;
  sqlite3_stmt *st;
  int rc;
  if (argc < 1 || argc > PRINTF_MAX_ARGS || (fmt = sqlite3_value_text(argv[0])) == NULL)
    return;
  if (printf_repeats(fmt, argc - 1, argv + 1) > sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1))
    return; /* NULL, as the built-in answers, but now */
  if (s->aux == NULL) {
    if (sqlite3_open_v2(":memory:", &s->aux, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
      sqlite3_close(s->aux);
      s->aux = NULL;
      sqlite3_result_error_nomem(ctx);
      return;
    }
    sqlite3_limit(s->aux, SQLITE_LIMIT_LENGTH, sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1));
  }
  if ((st = s->aux_printf[argc]) == NULL) {
    char sql[16 + 5 * PRINTF_MAX_ARGS];
    int n = snprintf(sql, sizeof sql, "SELECT printf(?1");
    for (int i = 2; i <= argc; i++)
      n += snprintf(sql + n, sizeof sql - (size_t)n, ",?%d", i);
    snprintf(sql + n, sizeof sql - (size_t)n, ")");
    if ((rc = sqlite3_prepare_v2(s->aux, sql, -1, &st, NULL)) != SQLITE_OK) {
      sqlite3_result_error_code(ctx, rc);
      return;
    }
    s->aux_printf[argc] = st;
  }
  for (int i = 0; i < argc; i++)
    sqlite3_bind_value(st, i + 1, argv[i]);
  if ((rc = sqlite3_step(st)) == SQLITE_ROW)
    sqlite3_result_value(ctx, sqlite3_column_value(st, 0));
  else
    sqlite3_result_error_code(ctx, sqlite3_errcode(s->aux));
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

/* ---- Connect ---------------------------------------------------------------- */

int lithd_guard_connect(void *ctx, sqlite3 *conn) {
  static const struct {
    const char *name;
    int nargs;
    void (*fn)(sqlite3_context *, int, sqlite3_value **);
  } fns[] = {{"instr", 2, instr_fn},   {"replace", 3, replace_fn}, {"trim", 2, btrim_fn},
             {"ltrim", 2, ltrim_fn},   {"rtrim", 2, rtrim_fn},     {"printf", -1, printf_fn},
             {"format", -1, printf_fn}};
  lithd_guard_limits lim;
  const lithd_guard_limits *given = ctx;
  lithd_guard_slot *s;
  int rc = SQLITE_OK;

  lithd_guard_limits_default(&lim);
  if (given != NULL) {
    if (given->max_value_bytes > 0)
      lim.max_value_bytes = given->max_value_bytes;
    if (given->max_like_pattern > 0)
      lim.max_like_pattern = given->max_like_pattern;
    if (given->max_program_ops > 0)
      lim.max_program_ops = given->max_program_ops;
  }
  sqlite3_limit(conn, SQLITE_LIMIT_LENGTH, lim.max_value_bytes);
  sqlite3_limit(conn, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, lim.max_like_pattern);
  sqlite3_limit(conn, SQLITE_LIMIT_VDBE_OP, lim.max_program_ops);
  sqlite3_limit(conn, SQLITE_LIMIT_ATTACHED, 0);

  if ((s = calloc(1, sizeof *s)) == NULL)
    return SQLITE_NOMEM;
  s->conn = conn;
  atomic_init(&s->deadline, INT64_MAX);
  atomic_init(&s->is_read, 0);
  s->refs = 1; /* ours, until the functions hold it */
  pthread_mutex_lock(&g_mu);
  s->next = g_slots;
  if (g_slots != NULL)
    g_slots->prev = s;
  g_slots = s;
  pthread_mutex_unlock(&g_mu);

  for (size_t i = 0; i < sizeof fns / sizeof fns[0] && rc == SQLITE_OK; i++) {
    pthread_mutex_lock(&g_mu);
    s->refs++; /* released by xDestroy: at close, or here if the call fails */
    pthread_mutex_unlock(&g_mu);
    /* Deterministic and innocuous as the built-ins they replace: indexes,
     * CHECK constraints and views (trusted_schema is off) may use them. */
    rc = sqlite3_create_function_v2(conn, fns[i].name, fns[i].nargs,
                                    SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, s, fns[i].fn, NULL,
                                    NULL, slot_release);
  }
  slot_release(s);
  return rc;
}
