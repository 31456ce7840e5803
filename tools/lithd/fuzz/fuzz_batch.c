/*
 * libFuzzer harness: a /v1/do body ({"statements": [...]}) through
 * lithd_batch_parse, with small limits so that the limit checks are reached
 * too. Refusals are fine; crashes, overreads and leaks are not.
 */
#include <stdint.h>
#include <stdlib.h>

#include "sqljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lithd_limits lim;
  lithd_limits_default(&lim);
  lim.max_statements = 8;
  lim.max_sql_bytes = 256;
  lithd_batch *b = NULL;
  lithd_error err;
  int rc = lithd_batch_parse((const char *)data, size, &lim, &b, &err);
  if (rc == LITH_OK) {
    int n = lithd_batch_count(b);
    if (n < 0 || n > lim.max_statements) /* an empty list is allowed: an empty answer */
      abort();
  } else if (b != NULL) {
    abort();
  }
  lithd_batch_free(b);
  return 0;
}
