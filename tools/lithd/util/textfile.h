/*
 * textfile — read a whole text file the operator gave lithd (--schema,
 * --commands, --config, --token-file; the lith client's token file too)
 * into memory: up to a maximum, in a buffer that grows with what is read
 * (the files are small; a buffer of the maximum per load made each load
 * cost its 16 MiB), refusing NUL bytes (the readers work on C strings).
 *
 * One reader, so every file lithd reads is bounded and checked the same
 * way; each caller gives its own bound and the name the messages start
 * with.
 */
#ifndef LITHD_TEXTFILE_H
#define LITHD_TEXTFILE_H

#include <stddef.h>
#include <stdio.h>

enum { LITHD_TEXT_OK = 0, LITHD_TEXT_TOO_LARGE, LITHD_TEXT_IOERR, LITHD_TEXT_NOMEM, LITHD_TEXT_NUL };

/* Read all of `f` (the caller's; not closed). On LITHD_TEXT_OK *out is a
 * malloc'd buffer (the caller frees it) holding *len bytes and a NUL after
 * them; otherwise *out is NULL and the code says why (errno too, for
 * LITHD_TEXT_IOERR). */
int lithd_text_read(FILE *f, size_t max, char **out, size_t *len);

/* Room for lithd_text_load's message with a path of PATH_MAX. */
#define LITHD_TEXT_ERRMSG_MAX (4096 + 128)

/* Open `path`, read it as lithd_text_read (at most `max` bytes), close it.
 * Returns 0 with *out and *len as lithd_text_read; or -1 with *out NULL
 * and err (errsz bytes) saying why, as "WHAT PATH: why" ("PATH: why" when
 * `what` is NULL or empty): the open's or read's strerror, "larger than
 * MAX bytes", "holds a NUL byte" or "out of memory". */
int lithd_text_load(const char *path, size_t max, const char *what, char **out, size_t *len, char *err,
                    size_t errsz);

#endif /* LITHD_TEXTFILE_H */
