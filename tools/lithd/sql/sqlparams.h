/*
 * The parameters of an SQL text as SQLite numbers them, found without
 * SQLite: lithd --dqlite binds by position over dqlite's protocol
 * (sqljson_dq.c), so it must know which number each ?NNN, ? and :name /
 * @name / $name of a client's statement has before the node sees it. A
 * wrong number would bind a value to another parameter, so
 * test_sqlparams checks it against sqlite3_bind_parameter_count/_name.
 */
#ifndef LITHD_SQLPARAMS_H
#define LITHD_SQLPARAMS_H

#include <stddef.h>

/* dqlite's limit (LITH_DQ_MAX_PARAMS): the most a statement may have. */
#define LITHD_SQL_MAX_PARAMS 255

/* If s starts a string, a quoted name or a comment: the text after it
 * (what is inside holds no parameter and no keyword); else NULL. */
const char *lithd_sql_skip_literal(const char *s);

/* The parameters of sql: ?NNN is number NNN, a name its first appearance's
 * number, a bare ? or a new name the largest so far + 1. names[k] (k <
 * *count; arrays of LITHD_SQL_MAX_PARAMS from the caller) points into sql
 * at the name of number k + 1 (with its prefix), lens[k] its length; NULL
 * for a number without a name. Returns 0, or -2 when a number passes
 * LITHD_SQL_MAX_PARAMS. */
int lithd_sql_params(const char *sql, const char **names, size_t *lens, int *count);

#endif
