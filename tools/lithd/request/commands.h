/*
 * lithd named commands — the writes an application allows, declared in a
 * file, run by name: POST /v1/commands/NAME {"params": {"from": 1, ...}}.
 *
 * The file (--commands FILE) is SQL with a marker line before each command:
 *
 *   -- name: transfer
 *   -- Move :amount from account :from to account :to.
 *   UPDATE accounts SET balance = balance - :amount WHERE id = :from;
 *   UPDATE accounts SET balance = balance + :amount WHERE id = :to;
 *
 *   -- name: add_card
 *   INSERT INTO cards(list_id, title) VALUES (:list, :title) RETURNING id;
 *
 * A command is every statement up to the next marker; it runs as one lith
 * command (one savepoint: all of it or nothing). Comment lines right after
 * the marker are its description. Names are 1-64 of [A-Za-z0-9_.-].
 * Parameters must be named (:x, @x or $x); a request gives them without the
 * sigil, and must give every parameter of the command and nothing else.
 * The limits on statements per request, SQL length and parameters do not
 * apply to named commands (the operator wrote them); the body size, rows,
 * result bytes and run time limits do.
 *
 * Why prepare at startup (lithd_commands_check): a misspelt table or a
 * syntax error must stop lithd with a message naming the command and the
 * statement, not surface as a 400 on the first request in production. So
 * the schema must exist when lithd starts (--schema does that).
 *
 * Ownership: a lithd_commands is created by lithd_commands_load and freed
 * by lithd_commands_free; it is read-only after lithd_commands_check, so any
 * thread may use it then.
 */
#ifndef LITHD_COMMANDS_H
#define LITHD_COMMANDS_H

#include <stddef.h>

#include <sqlite3.h>

#include "sqljson.h"

typedef struct lithd_commands lithd_commands;

/* Read the file at `path` (textfile.h: at most 4 MiB, no NUL byte; the path
 * is read during the call) and split it. On 0, *out is the set; on -1,
 * *out is NULL and err (errsz bytes) says where and why. */
int lithd_commands_load(const char *path, lithd_commands **out, char *err, size_t errsz);

/* Prepare every statement on `db` (a connection to the database that will
 * run them; nothing is stepped) to check it and learn its parameters.
 * Returns 0, or -1 with err naming the command and statement. */
int lithd_commands_check(lithd_commands *c, sqlite3 *db, char *err, size_t errsz);

/* The number of commands. */
int lithd_commands_count(const lithd_commands *c);

/* The batch that runs command `name` with the request body (body[0..len):
 * {"params": {...}}, {} or empty when the command takes none). On LITH_OK
 * *out is a batch the caller frees with lithd_batch_free; else *out is NULL
 * and *e says why: LITHD_NOT_FOUND (no such command), LITHD_BAD_REQUEST (bad
 * JSON, a missing or unknown parameter, a bad value), LITHD_TOO_LARGE,
 * LITH_NOMEM. */
int lithd_commands_batch(const lithd_commands *c, const char *name, const char *body, size_t len,
                         const lithd_limits *lim, lithd_batch **out, lithd_error *e);

/* {"commands": [{"name": ..., "description": ..., "statements": n,
 * "params": [...]}, ...]} (malloc'd; NULL when out of memory). Bytes of
 * the file that are not UTF-8 come out as U+FFFD (sqljson.h). */
char *lithd_commands_json(const lithd_commands *c);

/* Free (NULL is fine). */
void lithd_commands_free(lithd_commands *c);

#endif /* LITHD_COMMANDS_H */
