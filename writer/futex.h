/*
 * Thin wrappers over the Linux futex: sleep while a 32-bit word holds a
 * value, wake sleepers on it. The word itself is always read and written
 * with C11 atomics, so the ordering (and ThreadSanitizer) sees them; the
 * futex only parks the thread.
 */
#ifndef LITH_WRITER_FUTEX_H
#define LITH_WRITER_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleep while *word == expected, at most until deadline_ms on
 * lith_clock_ms() (negative: no limit). Spurious returns are possible:
 * callers loop on their own condition. */
void lith__futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t deadline_ms);

/* Wake one (n = 1) or all (n = INT32_MAX) threads sleeping on word. */
void lith__futex_wake(_Atomic uint32_t *word, int n);

/* A hint to the CPU that this thread is spinning. */
static inline void lith__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* How long the writer spins for the next command before it sleeps. With
 * one producer, spinning on both sides turns each hand-off from two futex
 * round trips into two cache-line transfers; with many producers neither
 * side spins (see the callers). A lone producer spins for up to twice the
 * last transaction's time, within these bounds: long enough for a FULL
 * commit on a fast disk, short enough not to matter on a slow one. */
#define LITH__SPIN_NS 50000
#define LITH__SPIN_MAX_NS 2000000

#endif
