/*
 * The monotonic clock: the clock of every deadline (lith_clock_ms, public)
 * and of every duration lith measures (lith__now_ns). libc only.
 */
#ifndef LITH_LIB_CLOCK_H
#define LITH_LIB_CLOCK_H

#include <stdint.h>

/* Nanoseconds on the monotonic clock. */
int64_t lith__now_ns(void);

#endif
