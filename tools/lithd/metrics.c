/*
 * lithd metrics — see metrics.h.
 *
 * Every histogram is exact: lith keeps fine buckets (lith.h), and a coarse
 * Prometheus bucket only sums the fine ones that lie wholly below its
 * bound, never an estimate.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdlib.h>

/* A first guess at the size of the text, so that it grows once or never. */
#define METRICS_FIRST_CAP 8192

static void mb_head(lithd_buf *b, const char *name, const char *type, const char *help) {
  lithd_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void mb_metric(lithd_buf *b, const char *name, const char *type, const char *help, uint64_t v) {
  mb_head(b, name, type, help);
  lithd_buf_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* A latency histogram in seconds from lith's fine buckets (lith.h), coarsened
 * to the bounds below: a fine bucket counts under `le` when all it holds is
 * shorter than `le` (its exclusive upper bound is <= le), so every bound is
 * exact, never an estimate. */
static void mb_latency(lithd_buf *b, const char *name, const char *help, const uint64_t *lat,
                       uint64_t sum_ns) {
  static const double le_s[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  size_t k;
  int i = 0;
  uint64_t cum = 0, total = 0;

  for (i = 0; i < LITH_LAT_BUCKETS; i++)
    total += lat[i];
  mb_head(b, name, "histogram", help);
  i = 0;
  for (k = 0; k < sizeof le_s / sizeof le_s[0]; k++) {
    uint64_t le_ns = (uint64_t)(le_s[k] * 1e9 + 0.5);
    while (i < LITH_LAT_BUCKETS - 1 && lith_lat_bucket_upper_ns(i) <= le_ns)
      cum += lat[i++];
    lithd_buf_printf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, le_s[k], cum);
  }
  lithd_buf_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, total);
  lithd_buf_printf(b, "%s_sum %.9f\n", name, (double)sum_ns / 1e9);
  lithd_buf_printf(b, "%s_count %" PRIu64 "\n", name, total);
}

void lithd_metrics_write(lithd_buf *b, lith *db, const lith_http_server *http) {
  lith_stats *st = malloc(sizeof *st); /* ~3.5 KiB of histograms: not on the stack */
  lith_http_stats hs;
  uint64_t cum = 0, total = 0;
  int k, code;

  if (st == NULL || lithd_buf_reserve(b, METRICS_FIRST_CAP) != 0) {
    free(st);
    b->failed = 1;
    return;
  }
  lith_stats_get(db, st);
  lith_http_stats_get(http, &hs);

  mb_metric(b, "lith_commands_total", "counter", "Commands answered.", st->commands);
  mb_metric(b, "lith_batches_total", "counter", "Write transactions (batches) run.", st->batches);
  mb_metric(b, "lith_failed_total", "counter", "Commands answered with an error.", st->failed);
  mb_metric(b, "lith_retried_total", "counter", "Command runs repeated after a transaction abort.",
            st->retried);
  mb_metric(b, "lith_busy_total", "counter", "Batches refused at BEGIN by another writer.", st->busy);
  mb_metric(b, "lith_queue_depth", "gauge", "Commands queued now.", st->queue_depth);
  mb_metric(b, "lith_wal_pages", "gauge", "Pages in the WAL after the last commit or checkpoint.",
            st->wal_pages);
  mb_metric(b, "lith_checkpoints_total", "counter", "Checkpoints run.", st->checkpoints);
  mb_metric(b, "lith_checkpoint_errors_total", "counter", "Checkpoints that failed.", st->checkpoint_errors);

  /* Batch sizes: bucket k holds [2^k, 2^(k+1)), so le = 2^(k+1) - 1; the
   * last one (2048 and more) only under +Inf. */
  for (k = 0; k < LITH_HIST_BUCKETS; k++)
    total += st->batch_hist[k];
  mb_head(b, "lith_batch_size", "histogram", "Commands per batch (_sum: commands answered).");
  for (k = 0; k < LITH_HIST_BUCKETS - 1; k++) {
    cum += st->batch_hist[k];
    lithd_buf_printf(b, "lith_batch_size_bucket{le=\"%llu\"} %" PRIu64 "\n", (1ULL << (k + 1)) - 1, cum);
  }
  lithd_buf_printf(b, "lith_batch_size_bucket{le=\"+Inf\"} %" PRIu64 "\n", total);
  lithd_buf_printf(b, "lith_batch_size_sum %" PRIu64 "\n", st->commands);
  lithd_buf_printf(b, "lith_batch_size_count %" PRIu64 "\n", total);

  mb_latency(b, "lith_transaction_seconds", "Write transactions, BEGIN IMMEDIATE to end of COMMIT.",
             st->tx_lat, st->tx_ns_total);
  mb_latency(b, "lith_queue_wait_seconds", "Time commands waited queued before their batch began.",
             st->wait_lat, st->wait_ns_total);

  mb_metric(b, "lithd_http_connections_total", "counter", "HTTP connections accepted.", hs.connections);
  mb_metric(b, "lithd_http_connections_open", "gauge", "HTTP connections open now.", hs.connections_open);
  mb_metric(b, "lithd_http_pending", "gauge", "Requests waiting for their answer now.", hs.pending);
  mb_head(b, "lithd_http_responses_total", "counter",
          "HTTP requests finished, by status (499: the client left first).");
  for (code = LITH_HTTP_STATUS_MIN; code <= LITH_HTTP_STATUS_MAX; code++) {
    uint64_t n = lith_http_status_count(http, code);
    if (n > 0)
      lithd_buf_printf(b, "lithd_http_responses_total{code=\"%d\"} %" PRIu64 "\n", code, n);
  }
  free(st);
}
