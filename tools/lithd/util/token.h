/*
 * lithd token — reading a bearer token from a file, for lithd (which
 * requires it) and the lith client (which sends it), so both accept exactly
 * the same files.
 */
#ifndef LITHD_TOKEN_H
#define LITHD_TOKEN_H

#include <stddef.h>

#define LITHD_TOKEN_MAX 4096

/* The token in `path` (read with textfile.h): the file's bytes, trailing
 * CR/LF stripped; refused when it cannot be read, is larger than
 * LITHD_TOKEN_MAX, is empty, or holds a NUL byte or a line break (a header
 * could not carry it). Returns a string the caller frees with free(), or
 * NULL with err (errsz bytes; the message begins with the path) saying
 * why. */
char *lithd_token_read(const char *path, char *err, size_t errsz);

#endif /* LITHD_TOKEN_H */
