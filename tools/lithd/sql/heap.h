/*
 * lithd heap — one ceiling on SQLite's memory for the whole process.
 *
 * SQLite has one (sqlite3_hard_heap_limit64), but it works only while
 * SQLite counts its memory (SQLITE_CONFIG_MEMSTATUS), which takes a
 * process-wide mutex on every malloc and free: a query that allocates a
 * row at a time ran 10-60% slower in lithd with it (noisy runs), and
 * about twice as slow under ThreadSanitizer. Instead lithd gives SQLite an allocator
 * (SQLITE_CONFIG_MALLOC) over the C library's that keeps the bytes in use
 * in one atomic counter and refuses an allocation that would pass the
 * ceiling, which SQLite reports as SQLITE_NOMEM ("out of memory") for that
 * statement alone, as with its own limit. The count may pass the ceiling
 * by what threads allocate at the same instant; it is a ceiling, not an
 * accountant.
 */
#ifndef LITHD_HEAP_H
#define LITHD_HEAP_H

#include <stdint.h>

/* Install the allocator with `limit_bytes` as the ceiling (0: none: SQLite's
 * own allocator stays). Before SQLite initialises (before any other SQLite
 * call but sqlite3_config). Returns an SQLite code. */
int lithd_heap_install(int64_t limit_bytes);

#endif
