/*
 * textfile — read a whole text file the operator gave lithd (--schema,
 * --commands) into memory: up to a maximum, in a buffer that grows with
 * what is read (the files are small; a buffer of the maximum per load made
 * each load cost its 16 MiB), refusing NUL bytes (the readers work on C
 * strings).
 */
#ifndef LITHD_TEXTFILE_H
#define LITHD_TEXTFILE_H

#include <stddef.h>
#include <stdio.h>

enum { LITHD_TEXT_OK = 0, LITHD_TEXT_TOO_LARGE, LITHD_TEXT_IOERR, LITHD_TEXT_NOMEM, LITHD_TEXT_NUL };

/* Read all of `f` (the caller's; not closed). On LITHD_TEXT_OK *out is a
 * malloc'd buffer (the caller frees it) holding *len bytes and a NUL after
 * them; otherwise *out is NULL and the code says why. */
int lithd_text_read(FILE *f, size_t max, char **out, size_t *len);

#endif
