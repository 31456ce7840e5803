/*
 * lithd metrics — GET /metrics: lith's statistics and the HTTP layer's
 * counters in the Prometheus text format 0.0.4.
 *
 * What comes out: counters and gauges of lith_stats (commands, batches,
 * failures, retries, BUSY, queue depth, WAL pages, checkpoints); three
 * histograms (batch size; transaction time and queue wait, in seconds);
 * and the HTTP layer's connections, pending requests and responses by
 * status code.
 */
#ifndef LITHD_METRICS_H
#define LITHD_METRICS_H

#include "buf.h"
#include "http.h"
#include "lith.h"

#define LITHD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Append the metrics of db (the caller's lith handle) and http (its HTTP
 * server; both read only) to b. A failure (out of memory) sticks in
 * b->failed, as every write to a lithd_buf. */
void lithd_metrics_write(lithd_buf *b, lith *db, const lith_http_server *http);

#endif /* LITHD_METRICS_H */
