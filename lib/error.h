/*
 * Error messages, the floor every layer stands on. Every lith call that
 * fails leaves a message in a per-thread buffer (lith_errmsg), because one
 * handle is shared by many threads and a per-handle "last error" would be
 * another thread's. The buffer is allocated at the thread's first error and
 * freed when it exits; a thread that never fails has none (lith_errmsg
 * gives ""), and if there is no memory for it lith_errmsg says so instead
 * of the message.
 *
 * Here: libc and include/ only. Mapping SQLite's codes is sqlite/errcode.h.
 */
#ifndef LITH_LIB_ERROR_H
#define LITH_LIB_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "lith.h"

/* Set this thread's message (printf-style) and return rc. */
int lith__fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* lith__fail with a va_list. */
int lith__failv(int rc, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Clear this thread's message (allocates nothing). */
void lith__clear_error(void);

/* Set this thread's message to a copy of `msg` (the caller's; read only
 * during the call), cut to the buffer's 511 bytes; "" or NULL clears it
 * as lith__clear_error does. */
void lith__set_errmsg(const char *msg);

/* Copy at most n-1 bytes of src (NULL: "") into dst and terminate it;
 * n 0 writes nothing. */
void lith__strlcpy(char *dst, const char *src, size_t n);

#endif
