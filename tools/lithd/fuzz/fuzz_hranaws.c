/*
 * libFuzzer harness: a Hrana over WebSocket message from a client (hello or
 * request, routes/hrana_ws.c) through lithd_hrana_ws_parse, then what
 * hrana_ws.c does with it that needs no store: a request's batch built as
 * a pipeline of one would build it (lithd_hrana_batch, small limits so the
 * limit checks are reached), stored SQL stored and closed and sql_ids
 * resolved (lithd_hrana_ws_resolve, a small bound), and the answer
 * message written around an error entry. Refusals are fine; crashes,
 * overreads and leaks are not (ASan + UBSan). `make fuzz` runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hrana.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lithd_limits lim;
  lithd_limits_default(&lim);
  lim.max_statements = 8;
  lim.max_sql_bytes = 256;
  lithd_hrana_wsmsg m;
  lithd_hrana_error e;
  lithd_hrana_sqls *sqls = NULL;
  if (lithd_hrana_ws_parse((const char *)data, size, &m, &e) != 0) {
    if (m.p != NULL || e.code == NULL)
      abort();
    return 0;
  }
  if (m.p == NULL)
    abort();
  if (m.type == LITHD_HRWS_HELLO) {
    if (m.jwt != NULL && strlen(m.jwt) > size)
      abort();
  } else if (m.type == LITHD_HRWS_REQUEST) {
    if (m.p->n != 1 || m.p->requests[0] == NULL || m.p->requests[0]->type != LJ_OBJECT)
      abort();
    const lj_value *rq = m.p->requests[0];
    int kind = m.kind == LITHD_HRWS_OPEN_CURSOR ? LITHD_HR_BATCH : m.kind;
    if (m.kind == LITHD_HRWS_OPEN_CURSOR && (!m.p->cursor || lithd_hrana_kind(rq) != LITHD_HR_BATCH))
      abort();
    if (m.kind == LITHD_HRWS_FETCH_CURSOR && m.max_count < 0)
      abort();
    if (kind == LITHD_HR_STORE_SQL) {
      if (lithd_hrana_sqls_store(&sqls, rq, &lim, &e) != 0 && e.code == NULL)
        abort();
      lithd_hrana_sqls_close(sqls, rq, &e);
    }
    {
      /* sql_ids resolved at receipt: 1..3 stored, a small bound */
      static const char *const texts[] = {"SELECT 1", "SELECT ?", "INSERT INTO t VALUES (1)"};
      lithd_hrana_sqls *stored = NULL;
      for (int i = 0; i < 3; i++) {
        char js[96];
        lithd_hrana_pipeline *sp = NULL;
        snprintf(js, sizeof js,
                 "{\"baton\":null,\"requests\":[{\"type\":\"store_sql\",\"sql_id\":%d,\"sql\":\"%s\"}]}",
                 i + 1, texts[i]);
        if (lithd_hrana_pipeline_parse(js, strlen(js), 8, &sp, &e) != 0 ||
            lithd_hrana_sqls_store(&stored, sp->requests[0], &lim, &e) != 0)
          abort();
        lithd_hrana_pipeline_free(sp);
      }
      long added = lithd_hrana_ws_resolve(m.p, stored, 64, &e);
      if (added < -1 || added > 64 || (added < 0 && e.code == NULL))
        abort();
      lithd_hrana_sqls_free(stored);
    }
    if (kind == LITHD_HR_EXECUTE || kind == LITHD_HR_BATCH || kind == LITHD_HR_SEQUENCE ||
        kind == LITHD_HR_DESCRIBE) {
      lithd_batch *b = NULL;
      lithd_hrana_plan plan;
      if (lithd_hrana_batch(rq, kind, sqls, &lim, &b, &plan, &e) == 0) {
        if (b == NULL)
          abort();
      } else if (b != NULL || e.code == NULL) {
        abort();
      }
      lithd_batch_free(b);
    }
    /* an answer around an entry, as on_answer writes it */
    lithd_buf entry = {0}, out = {0};
    lithd_hrana_fail(&e, "PROTO_ERROR", "%.*s", (int)(size < 64 ? size : 64), (const char *)data);
    lithd_hrana_put_error(&entry, &e);
    lithd_hrana_ws_response(&out, m.request_id, entry.p, entry.len);
    if (!out.failed && (out.len < entry.len || memcmp(out.p, "{\"type\":\"response_error\"", 24) != 0))
      abort();
    free(entry.p);
    free(out.p);
  } else {
    abort();
  }
  lithd_hrana_sqls_free(sqls);
  lithd_hrana_pipeline_free(m.p);
  return 0;
}
