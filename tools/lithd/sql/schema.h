/*
 * lithd schema — the --schema file as lith migrations.
 *
 * The file is SQL split into steps at lines that begin with "-- step" (the
 * rest of that line is a free comment: "-- step 2: cards.archived"); SQL
 * before the first such line is step 1. lith runs step i once, when the
 * database's PRAGMA user_version is below i, all pending steps in one
 * transaction, and sets user_version to the number of steps. So a schema
 * grows by appending steps; an applied step is never run again and must not
 * be edited. A database whose user_version is above the file's step count
 * was written by a newer schema: lithd refuses to start rather than run an
 * old schema against it. A step may hold no BEGIN, COMMIT or ROLLBACK of
 * its own (refused at load, for both stores: schema.c says why).
 */
#ifndef LITHD_SCHEMA_H
#define LITHD_SCHEMA_H

#include <stddef.h>

typedef struct lithd_schema {
  char **steps; /* n NUL-terminated SQL texts */
  int n;
} lithd_schema;

/* Read `path` (textfile.h: at most 16 MiB, no NUL byte) and split it.
 * Returns 0, or -1 with err (errsz bytes) saying why ("--schema PATH: ..."
 * when the file cannot be read). */
int lithd_schema_load(const char *path, lithd_schema *out, char *err, size_t errsz);

void lithd_schema_free(lithd_schema *s);

#endif /* LITHD_SCHEMA_H */
