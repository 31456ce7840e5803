/* Latency histograms: see latency.h. */
#include "latency.h"

int lith__lat_bucket(uint64_t ns) {
  if (ns < 1024)
    return 0;
  int e = 63 - __builtin_clzll(ns); /* 2^e <= ns < 2^(e+1), e >= 10 */
  int b = 1 + (e - 10) * 8 + (int)((ns >> (e - 3)) & 7);
  return b < LITH_LAT_BUCKETS ? b : LITH_LAT_BUCKETS - 1;
}

uint64_t lith_lat_bucket_upper_ns(int i) {
  if (i <= 0)
    return 1024;
  if (i >= LITH_LAT_BUCKETS - 1)
    return UINT64_MAX;
  int e = 10 + (i - 1) / 8, sub = (i - 1) % 8;
  return (uint64_t)(8 + sub + 1) << (e - 3);
}

uint64_t lith_lat_quantile_ns(const uint64_t *later, const uint64_t *earlier, double q) {
  uint64_t total = 0;
  for (int i = 0; i < LITH_LAT_BUCKETS; i++)
    total += later[i] - (earlier ? earlier[i] : 0);
  if (total == 0)
    return 0;
  if (q > 1)
    q = 1;
  uint64_t rank = (uint64_t)(q * (double)total + 0.999999);
  if (rank < 1)
    rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < LITH_LAT_BUCKETS; i++) {
    seen += later[i] - (earlier ? earlier[i] : 0);
    if (seen >= rank)
      return lith_lat_bucket_upper_ns(i);
  }
  return lith_lat_bucket_upper_ns(LITH_LAT_BUCKETS - 1);
}
