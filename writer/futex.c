/* Futex wrappers: see futex.h. */
#include "futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lith.h"

void lith__futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t deadline_ms) {
  struct timespec ts, *tsp = NULL;
  if (deadline_ms >= 0) {
    int64_t left = deadline_ms - lith_clock_ms();
    if (left <= 0)
      return;
    ts.tv_sec = (time_t)(left / 1000);
    ts.tv_nsec = (long)(left % 1000) * 1000000;
    tsp = &ts;
  }
  /* Relative timeout; EINTR, EAGAIN (value changed) and ETIMEDOUT all mean
   * "look again", which every caller does. */
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
}

void lith__futex_wake(_Atomic uint32_t *word, int n) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}
