/*
 * lithd metrics — see metrics.h.
 *
 * Every histogram is exact: lith keeps fine buckets (lith.h), and a coarse
 * Prometheus bucket only sums the fine ones that lie wholly below its
 * bound, never an estimate; lithd's own histograms count straight into the
 * coarse bounds.
 */
#include "metrics.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sqlite3.h>

/* A first guess at the size of the text, so that it grows once or never. */
#define METRICS_FIRST_CAP 16384

/* The latency bounds of every seconds histogram. */
static const double le_s[LITHD_METRICS_LE] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

/* ---- Counting (loop thread) -------------------------------------------- */

static int cmp_label(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int lithd_metrics_init(lithd_metrics *m, const char *const *paths, size_t n) {
  size_t k = 0;
  /* the caller's settings stay; what is counted starts at zero */
  m->n_routes = 0;
  m->route = NULL;
  m->responses = NULL;
  m->other = 0;
  if ((m->route = malloc((n + 1) * sizeof *m->route)) == NULL)
    return -1;
  m->route[k++] = "other";
  for (size_t i = 0; i < n; i++)
    m->route[k++] = paths[i];
  qsort(m->route, k, sizeof *m->route, cmp_label);
  for (size_t i = 0; i < k; i++)
    if (m->n_routes == 0 || strcmp(m->route[m->n_routes - 1], m->route[i]) != 0)
      m->route[m->n_routes++] = m->route[i]; /* one path, two methods: one label */
  for (size_t i = 0; i < m->n_routes; i++)
    if (strcmp(m->route[i], "other") == 0)
      m->other = i;
  m->responses = calloc(m->n_routes * LITHD_METRICS_CODES, sizeof *m->responses);
  return m->responses != NULL ? 0 : -1;
}

void lithd_metrics_response(lithd_metrics *m, const char *route, int status) {
  size_t k = m->other;
  int code = status >= LITH_HTTP_STATUS_MIN && status <= LITH_HTTP_STATUS_MAX
                 ? status - LITH_HTTP_STATUS_MIN + 1
                 : 0;
  if (m->responses == NULL)
    return;
  if (route != NULL) {
    const char **hit = bsearch(&route, m->route, m->n_routes, sizeof *m->route, cmp_label);
    if (hit != NULL)
      k = (size_t)(hit - m->route);
  }
  m->responses[k * LITHD_METRICS_CODES + (size_t)code]++;
}

static void hist_add(lithd_hist *h, int64_t ns) {
  int k = 0;
  if (ns < 0)
    ns = 0;
  while (k < LITHD_METRICS_LE && (double)ns > le_s[k] * 1e9)
    k++;
  h->count[k]++;
  h->sum_ns += (uint64_t)ns;
}

void lithd_metrics_read(lithd_metrics_db *d, int64_t wait_ns, int64_t run_ns, int failed) {
  hist_add(&d->read_wait, wait_ns);
  hist_add(&d->read_run, run_ns);
  if (failed)
    d->reads_failed++;
}

void lithd_metrics_free(lithd_metrics *m) {
  free(m->responses);
  m->responses = NULL;
  free(m->route);
  m->route = NULL;
  m->n_routes = 0;
}

/* ---- Writing ------------------------------------------------------------ */

static void mb_head(lithd_buf *b, const char *name, const char *type, const char *help) {
  lithd_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void mb_metric(lithd_buf *b, const char *name, const char *type, const char *help, uint64_t v) {
  mb_head(b, name, type, help);
  lithd_buf_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* A metric whose value is a real (seconds, bytes computed). */
static void mb_real(lithd_buf *b, const char *name, const char *type, const char *help, double v) {
  mb_head(b, name, type, help);
  lithd_buf_printf(b, "%s %.9g\n", name, v);
}

/* A latency histogram in seconds from lith's fine buckets (lith.h), coarsened
 * to le_s, as the series of database `db`: a fine bucket counts under `le`
 * when all it holds is shorter than `le` (its exclusive upper bound is <=
 * le), so every bound is exact, never an estimate. */
static void mb_latency(lithd_buf *b, const char *name, const char *db, const uint64_t *lat, uint64_t sum_ns) {
  size_t k;
  int i = 0;
  uint64_t cum = 0, total = 0;

  for (i = 0; i < LITH_LAT_BUCKETS; i++)
    total += lat[i];
  i = 0;
  for (k = 0; k < LITHD_METRICS_LE; k++) {
    uint64_t le_ns = (uint64_t)(le_s[k] * 1e9 + 0.5);
    while (i < LITH_LAT_BUCKETS - 1 && lith_lat_bucket_upper_ns(i) <= le_ns)
      cum += lat[i++];
    lithd_buf_printf(b, "%s_bucket{db=\"%s\",le=\"%g\"} %" PRIu64 "\n", name, db, le_s[k], cum);
  }
  lithd_buf_printf(b, "%s_bucket{db=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, db, total);
  lithd_buf_printf(b, "%s_sum{db=\"%s\"} %.9f\n", name, db, (double)sum_ns / 1e9);
  lithd_buf_printf(b, "%s_count{db=\"%s\"} %" PRIu64 "\n", name, db, total);
}

/* One of lithd's own histograms (lithd_hist), as the series of `db`. */
static void mb_hist(lithd_buf *b, const char *name, const char *db, const lithd_hist *h) {
  uint64_t cum = 0;
  for (int k = 0; k < LITHD_METRICS_LE; k++) {
    cum += h->count[k];
    lithd_buf_printf(b, "%s_bucket{db=\"%s\",le=\"%g\"} %" PRIu64 "\n", name, db, le_s[k], cum);
  }
  cum += h->count[LITHD_METRICS_LE];
  lithd_buf_printf(b, "%s_bucket{db=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, db, cum);
  lithd_buf_printf(b, "%s_sum{db=\"%s\"} %.9f\n", name, db, (double)h->sum_ns / 1e9);
  lithd_buf_printf(b, "%s_count{db=\"%s\"} %" PRIu64 "\n", name, db, cum);
}

/* Batch sizes of `db`: bucket k holds [2^k, 2^(k+1)), so le = 2^(k+1) - 1;
 * the last one (2048 and more) only under +Inf. */
static void mb_batch_size(lithd_buf *b, const char *db, const lith_stats *st) {
  uint64_t cum = 0, total = 0;
  int k;
  for (k = 0; k < LITH_HIST_BUCKETS; k++)
    total += st->batch_hist[k];
  for (k = 0; k < LITH_HIST_BUCKETS - 1; k++) {
    cum += st->batch_hist[k];
    lithd_buf_printf(b, "lith_batch_size_bucket{db=\"%s\",le=\"%llu\"} %" PRIu64 "\n", db,
                     (1ULL << (k + 1)) - 1, cum);
  }
  lithd_buf_printf(b, "lith_batch_size_bucket{db=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", db, total);
  lithd_buf_printf(b, "lith_batch_size_sum{db=\"%s\"} %" PRIu64 "\n", db, st->commands);
  lithd_buf_printf(b, "lith_batch_size_count{db=\"%s\"} %" PRIu64 "\n", db, total);
}

/* The per-database metrics: a counter or gauge each, in this order. */
enum {
  M_COMMANDS,
  M_FAILED,
  M_RETRIED,
  M_BATCHES,
  M_BUSY,
  M_QUEUE_DEPTH,
  M_QUEUE_CAPACITY,
  M_READERS,
  M_WAL_PAGES,
  M_WAL_BYTES,
  M_CHECKPOINTS,
  M_CHECKPOINT_ERRORS,
  M_CHECKPOINT_SECONDS,
  M_CHECKPOINT_WRITER_SECONDS,
  M_COMMIT_SECONDS,
  M_WAL_FILE_BYTES,
  M_WAL_HOLDS,
  M_WAL_HOLDS_GAVE_UP,
  M_WAL_HOLD_SECONDS,
  M_READS_HELD,
  M_READS_HELD_SECONDS,
  M_WAL_RESTART_BLOCKED,
  M_READS_TOO_OLD,
  M_COUNT
};

static const struct db_metric {
  const char *name, *type, *help;
} db_metrics[M_COUNT] = {
    [M_COMMANDS] = {"lith_commands_total", "counter", "Commands answered (committed or failed)."},
    [M_FAILED] = {"lith_commands_failed_total", "counter",
                  "Commands answered with an error (each undone alone; its batch went on)."},
    [M_RETRIED] =
        {"lith_command_retries_total", "counter",
         "Command runs repeated because their transaction was rolled back for a reason outside them."},
    [M_BATCHES] = {"lith_batches_total", "counter", "Write transactions (batches) run."},
    [M_BUSY] = {"lith_write_lock_busy_total", "counter",
                "Batches whose BEGIN IMMEDIATE found the write lock held by another connection past "
                "busy_timeout."},
    [M_QUEUE_DEPTH] = {"lith_queue_depth", "gauge", "Commands queued for the writer now."},
    [M_QUEUE_CAPACITY] = {"lith_queue_capacity", "gauge",
                          "Most commands the writer's queue holds (--max-queue)."},
    [M_READERS] = {"lith_readers", "gauge", "Read connections in the read pool (--readers)."},
    [M_WAL_PAGES] = {"lith_wal_pages", "gauge", "Pages in the WAL after the last commit or checkpoint."},
    [M_WAL_BYTES] =
        {"lith_wal_bytes", "gauge",
         "Size of the WAL's frames after the last commit or checkpoint, bytes (pages x page size)."},
    [M_CHECKPOINTS] = {"lith_checkpoints_total", "counter", "Checkpoints run."},
    [M_CHECKPOINT_ERRORS] = {"lith_checkpoint_errors_total", "counter",
                             "Checkpoints that failed (retried later)."},
    [M_CHECKPOINT_SECONDS] = {"lith_checkpoint_seconds_total", "counter",
                              "Time spent in checkpoints, on any thread."},
    [M_CHECKPOINT_WRITER_SECONDS] =
        {"lith_checkpoint_writer_seconds_total", "counter",
         "Of the time in checkpoints, the part on the writer thread (inside COMMIT "
         "in AUTO mode)."},
    [M_COMMIT_SECONDS] = {"lith_commit_seconds_total", "counter",
                          "Time in the COMMIT statements of all batches."},
    [M_WAL_FILE_BYTES] = {"lith_wal_file_bytes", "gauge",
                          "Size of the -wal file now, bytes (lith_wal_bytes counts only the frames not "
                          "yet checkpointed)."},
    [M_WAL_HOLDS] = {"lith_wal_holds_total", "counter",
                     "Times new reads were held so that the WAL could start over (--wal-hold-ms)."},
    [M_WAL_HOLDS_GAVE_UP] = {"lith_wal_holds_gave_up_total", "counter",
                             "Holds that reached --wal-hold-ms with reads still running: the WAL could "
                             "not start over that time."},
    [M_WAL_HOLD_SECONDS] = {"lith_wal_hold_seconds_total", "counter", "Time holds lasted."},
    [M_READS_HELD] = {"lith_reads_held_total", "counter", "Reads that waited behind a hold."},
    [M_READS_HELD_SECONDS] = {"lith_reads_held_seconds_total", "counter", "Time reads waited behind holds."},
    [M_WAL_RESTART_BLOCKED] = {"lith_wal_restart_blocked_total", "counter",
                               "Times the WAL was wholly checkpointed with lithd's reads held and still "
                               "did not start over: a connection outside lithd reads it."},
    [M_READS_TOO_OLD] = {"lith_reads_too_old_total", "counter",
                         "Reads a hold asked to end because their snapshot kept the WAL from starting "
                         "over (read transactions end SNAPSHOT_TOO_OLD)."},
};

/* The sample of metric k for database d (its statistics st). */
static void db_sample(lithd_buf *b, int k, const lithd_metrics_db *d, const lith_stats *st) {
  const char *name = db_metrics[k].name;
  uint64_t v = 0;
  double seconds = -1;
  switch (k) {
  case M_COMMANDS: v = st->commands; break;
  case M_FAILED: v = st->failed; break;
  case M_RETRIED: v = st->retried; break;
  case M_BATCHES: v = st->batches; break;
  case M_BUSY: v = st->busy; break;
  case M_QUEUE_DEPTH: v = st->queue_depth; break;
  case M_QUEUE_CAPACITY: v = (uint64_t)d->queue_capacity; break;
  case M_READERS: v = (uint64_t)d->readers; break;
  case M_WAL_PAGES: v = st->wal_pages; break;
  case M_WAL_BYTES: v = st->wal_pages * (uint64_t)(d->page_size > 0 ? d->page_size : 0); break;
  case M_CHECKPOINTS: v = st->checkpoints; break;
  case M_CHECKPOINT_ERRORS: v = st->checkpoint_errors; break;
  case M_CHECKPOINT_SECONDS: seconds = (double)st->checkpoint_ns_total / 1e9; break;
  case M_CHECKPOINT_WRITER_SECONDS: seconds = (double)st->checkpoint_ns_writer / 1e9; break;
  case M_WAL_FILE_BYTES: v = st->wal_file_bytes; break;
  case M_WAL_HOLDS: v = st->wal_holds; break;
  case M_WAL_HOLDS_GAVE_UP: v = st->wal_holds_gave_up; break;
  case M_WAL_HOLD_SECONDS: seconds = (double)st->wal_hold_ns_total / 1e9; break;
  case M_READS_HELD: v = st->reads_held; break;
  case M_READS_HELD_SECONDS: seconds = (double)st->reads_held_ns_total / 1e9; break;
  case M_WAL_RESTART_BLOCKED: v = st->wal_restart_blocked; break;
  case M_READS_TOO_OLD: v = st->reads_too_old; break;
  default: seconds = (double)st->commit_ns_total / 1e9; break;
  }
  if (seconds >= 0)
    lithd_buf_printf(b, "%s{db=\"%s\"} %.9g\n", name, d->name, seconds);
  else
    lithd_buf_printf(b, "%s{db=\"%s\"} %" PRIu64 "\n", name, d->name, v);
}

/* Every database's lith_stats (st[i] is m->dbs[i]'s) and reads: each
 * metric's HELP and TYPE once, then one series per database. */
static void mb_dbs(lithd_buf *b, const lithd_metrics *m, const lith_stats *st) {
  size_t i;
  for (int k = 0; k < M_COUNT; k++) {
    mb_head(b, db_metrics[k].name, db_metrics[k].type, db_metrics[k].help);
    for (i = 0; i < m->n_dbs; i++)
      db_sample(b, k, m->dbs[i], &st[i]);
  }
  mb_head(b, "lith_batch_size", "histogram", "Commands per batch (_sum: commands answered).");
  for (i = 0; i < m->n_dbs; i++)
    mb_batch_size(b, m->dbs[i]->name, &st[i]);
  mb_head(b, "lith_transaction_seconds", "histogram",
          "Write transactions, BEGIN IMMEDIATE to end of COMMIT.");
  for (i = 0; i < m->n_dbs; i++)
    mb_latency(b, "lith_transaction_seconds", m->dbs[i]->name, st[i].tx_lat, st[i].tx_ns_total);
  mb_head(b, "lith_queue_wait_seconds", "histogram", "Time commands waited queued before their batch began.");
  for (i = 0; i < m->n_dbs; i++)
    mb_latency(b, "lith_queue_wait_seconds", m->dbs[i]->name, st[i].wait_lat, st[i].wait_ns_total);
  mb_head(b, "lith_checkpoint_duration_seconds", "histogram", "Checkpoints, by time taken (on any thread).");
  for (i = 0; i < m->n_dbs; i++)
    mb_latency(b, "lith_checkpoint_duration_seconds", m->dbs[i]->name, st[i].checkpoint_lat,
               st[i].checkpoint_ns_total);
  mb_head(
      b, "lithd_read_wait_seconds", "histogram",
      "/v1/query: time from the request to a reader starting it (libuv's thread pool, lith's read pool).");
  for (i = 0; i < m->n_dbs; i++)
    mb_hist(b, "lithd_read_wait_seconds", m->dbs[i]->name, &m->dbs[i]->read_wait);
  mb_head(b, "lithd_read_seconds", "histogram", "/v1/query: time each read ran (_count: reads run).");
  for (i = 0; i < m->n_dbs; i++)
    mb_hist(b, "lithd_read_seconds", m->dbs[i]->name, &m->dbs[i]->read_run);
  mb_head(b, "lithd_reads_failed_total", "counter", "/v1/query: reads answered with an error.");
  for (i = 0; i < m->n_dbs; i++)
    lithd_buf_printf(b, "lithd_reads_failed_total{db=\"%s\"} %" PRIu64 "\n", m->dbs[i]->name,
                     m->dbs[i]->reads_failed);
}

/* A label value, escaped as the text format wants (\\, \", \n). */
static void mb_label(lithd_buf *b, const char *v) {
  for (; *v != '\0'; v++) {
    if (*v == '\\' || *v == '"')
      lithd_buf_printf(b, "\\%c", *v);
    else if (*v == '\n')
      lithd_buf_puts(b, "\\n");
    else
      lithd_buf_put(b, v, 1);
  }
}

/* Who leads each database on a dqlite cluster (metrics.h): a metric's
 * HELP and TYPE only when some database has the series. */
static void mb_cluster(lithd_buf *b, const lithd_metrics *m) {
  size_t i, n = 0;
  for (i = 0; i < m->n_dbs; i++)
    n += m->dbs[i]->cluster.on != 0;
  if (n == 0)
    return;
  mb_head(b, "lith_dqlite_leader_known", "gauge",
          "1 while lithd holds a connection to the dqlite cluster's leader, 0 while it looks for one.");
  for (i = 0; i < m->n_dbs; i++)
    if (m->dbs[i]->cluster.on)
      lithd_buf_printf(b, "lith_dqlite_leader_known{db=\"%s\"} %d\n", m->dbs[i]->name,
                       m->dbs[i]->cluster.leader[0] != '\0');
  mb_head(b, "lith_dqlite_leader_info", "gauge",
          "Always 1, while a leader is known; the labels name it (its address and node id).");
  for (i = 0; i < m->n_dbs; i++) {
    const lithd_metrics_cluster *c = &m->dbs[i]->cluster;
    if (!c->on || c->leader[0] == '\0')
      continue;
    lithd_buf_printf(b, "lith_dqlite_leader_info{db=\"%s\",address=\"", m->dbs[i]->name);
    mb_label(b, c->leader);
    lithd_buf_printf(b, "\",id=\"%" PRIu64 "\"} 1\n", c->leader_id);
  }
  mb_head(b, "lith_dqlite_failovers_total", "counter",
          "Leaders lost and found again by the writer (each counts once, however long the search).");
  for (i = 0; i < m->n_dbs; i++)
    if (m->dbs[i]->cluster.on)
      lithd_buf_printf(b, "lith_dqlite_failovers_total{db=\"%s\"} %" PRIu64 "\n", m->dbs[i]->name,
                       m->dbs[i]->cluster.failovers);
  mb_head(b, "lith_dqlite_reruns_total", "counter",
          "Batches run again (after a lost leader, or without a command that ended the transaction).");
  for (i = 0; i < m->n_dbs; i++)
    if (m->dbs[i]->cluster.on)
      lithd_buf_printf(b, "lith_dqlite_reruns_total{db=\"%s\"} %" PRIu64 "\n", m->dbs[i]->name,
                       m->dbs[i]->cluster.reruns);
  mb_head(b, "lith_dqlite_last_failover_wait_seconds", "gauge",
          "The last failover: from the leader found lost to the first batch answered on the new one (with "
          "no write waiting, to the new leader's connection); 0 before any.");
  for (i = 0; i < m->n_dbs; i++)
    if (m->dbs[i]->cluster.on)
      lithd_buf_printf(b, "lith_dqlite_last_failover_wait_seconds{db=\"%s\"} %.3f\n", m->dbs[i]->name,
                       (double)m->dbs[i]->cluster.failover_wait_ms / 1e3);
}

static void mb_lithd(lithd_buf *b, const lithd_metrics *m) {
  lith_http_stats hs;
  memset(&hs, 0, sizeof hs);
  if (m->http != NULL)
    lith_http_stats_get(m->http, &hs);

  mb_head(b, "lithd_build_info", "gauge", "Always 1; the labels name lithd's version and SQLite's.");
  lithd_buf_printf(b, "lithd_build_info{version=\"%s\",sqlite=\"%s\"} 1\n", LITH_VERSION,
                   sqlite3_libversion());
  mb_metric(b, "lithd_http_connections_total", "counter", "HTTP connections accepted.", hs.connections);
  mb_metric(b, "lithd_http_connections_open", "gauge", "HTTP connections open now.", hs.connections_open);
  mb_metric(b, "lithd_http_requests_pending", "gauge",
            "Requests waiting for their answer now (a command queued or running, a read).", hs.pending);
  mb_head(b, "lithd_http_responses_total", "counter",
          "HTTP requests finished, by route (\"other\": no route took it) and status code (499: the "
          "client left first).");
  for (size_t k = 0; m->responses != NULL && k < m->n_routes; k++)
    for (int c = 0; c < LITHD_METRICS_CODES; c++) {
      uint64_t n = m->responses[k * LITHD_METRICS_CODES + (size_t)c];
      if (n > 0)
        lithd_buf_printf(b, "lithd_http_responses_total{route=\"%s\",code=\"%d\"} %" PRIu64 "\n", m->route[k],
                         c == 0 ? 0 : c - 1 + LITH_HTTP_STATUS_MIN, n);
    }
}

/* The process, from /proc/self and getrusage; a figure that cannot be read
 * is 0 (the start time: lithd's own note of it). */
static void mb_process(lithd_buf *b, const lithd_metrics *m) {
  long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
  unsigned long long vm_pages = 0, rss_pages = 0, start_ticks = 0, btime = 0;
  uint64_t fds = 0;
  double start = m->start_time;
  struct rusage ru;
  struct rlimit rl;
  char line[1024];
  FILE *f;

  if ((f = fopen("/proc/self/statm", "re")) != NULL) {
    if (fscanf(f, "%llu %llu", &vm_pages, &rss_pages) != 2)
      vm_pages = rss_pages = 0;
    fclose(f);
  }
  /* Field 22 of /proc/self/stat, counted after the command's ")" (the
   * command itself may hold spaces and parentheses). */
  if ((f = fopen("/proc/self/stat", "re")) != NULL) {
    size_t n = fread(line, 1, sizeof line - 1, f);
    const char *p;
    line[n] = '\0';
    fclose(f);
    p = strrchr(line, ')');
    for (int field = 2; p != NULL && field < 22; field++)
      p = strchr(p + 1, ' ');
    if (p != NULL)
      start_ticks = strtoull(p + 1, NULL, 10);
  }
  if ((f = fopen("/proc/stat", "re")) != NULL) {
    while (fgets(line, sizeof line, f) != NULL)
      if (sscanf(line, "btime %llu", &btime) == 1)
        break;
    fclose(f);
  }
  if (btime > 0 && start_ticks > 0 && ticks > 0)
    start = (double)btime + (double)start_ticks / (double)ticks;
  DIR *d = opendir("/proc/self/fd");
  if (d != NULL) {
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.')
        fds++;
    closedir(d);
    if (fds > 0)
      fds--; /* the directory's own descriptor */
  }
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    memset(&ru, 0, sizeof ru);
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    rl.rlim_cur = 0;

  mb_metric(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
            (uint64_t)rss_pages * (uint64_t)(page > 0 ? page : 0));
  mb_metric(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
            (uint64_t)vm_pages * (uint64_t)(page > 0 ? page : 0));
  mb_metric(b, "process_open_fds", "gauge", "Open file descriptors.", fds);
  mb_metric(b, "process_max_fds", "gauge", "Most file descriptors the process may open (RLIMIT_NOFILE).",
            rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur);
  mb_real(b, "process_cpu_seconds_total", "counter", "User and system CPU time spent, seconds.",
          (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
              (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
  mb_head(b, "process_start_time_seconds", "gauge",
          "Start time of the process since the Unix epoch, seconds.");
  lithd_buf_printf(b, "process_start_time_seconds %.2f\n", start);
}

void lithd_metrics_write(lithd_buf *b, const lithd_metrics *m) {
  /* ~3.5 KiB of histograms each: not on the stack */
  lith_stats *st = calloc(m->n_dbs > 0 ? m->n_dbs : 1, sizeof *st);

  if (st == NULL || lithd_buf_reserve(b, METRICS_FIRST_CAP * (m->n_dbs > 0 ? m->n_dbs : 1)) != 0) {
    free(st);
    b->failed = 1;
    return;
  }
  for (size_t i = 0; i < m->n_dbs; i++)
    if (m->dbs[i]->db != NULL) /* NULL: lithd --dqlite, no local writer (zeros) */
      lith_stats_get(m->dbs[i]->db, &st[i]);
  mb_dbs(b, m, st);
  mb_cluster(b, m);
  mb_lithd(b, m);
  mb_process(b, m);
  free(st);
}
