/* The monotonic clock: see clock.h. */
#include "clock.h"

#include <time.h>

#include "lith.h"

int64_t lith__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t lith_clock_ms(void) { return lith__now_ns() / 1000000; }
