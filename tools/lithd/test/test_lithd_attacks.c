/*
 * test_lithd_attacks — every attack of docs/security.md that a
 * request can carry, from ONE table, tried on both stores: a lithd on a
 * local file and a lithd --dqlite in front of a one-node cluster (a
 * lith-node process). Each row names the route, the body, the status and a
 * piece of the answer every store must give; both must give the same, so
 * a rule that one store lacks (the dqlite store once let a leading comment
 * take PRAGMA and ATTACH past a keyword check) fails here. After the table,
 * what the attacks tried to change is checked to be unchanged on both: the
 * CHECK constraint still holds, nothing was stored by a refused statement,
 * writable_schema is off.
 *
 * Every row whose statements mean the same in any format is sent again as
 * Hrana, on both stores: each statement one execute request of a pipeline,
 * then all of them as the steps of one batch (the steps' own path): the
 * same rules must refuse it, with Hrana's code. And once more over
 * WebSocket (a connection whose hello carries the row's token, a stream,
 * the same requests): the fourth way in, the same answers. Not sent: the
 * rows about /v1's own format, the writes /v1/query refuses (Hrana's execute
 * writes: they would run), a row whose statements would answer differently
 * one by one (a table made, then the key added to it refused), BEGIN (Hrana's opens the stream's transaction:
 * interactive on the local store, refused on --dqlite; test_lithd_hrana),
 * and PRAGMA foreign_keys (Hrana's turns them off for the rest of its
 * request, as migrate() needs, and what it wrote must then pass
 * foreign_key_check; on --dqlite refused: test_lithd_hrana). COMMIT,
 * ROLLBACK and END outside a transaction fail as SQLite fails them, on
 * both stores (the steps' rules, sql/steps.c).
 *
 * lith's own tables (_lith_*) are refused alike: the cluster has the
 * dqlite writer's _lith_batches and the store's _lith_schema; the local
 * file gets copies of them before its lithd starts (lith_tables: as a file
 * copied from a cluster would have them), so that every row names tables
 * that exist and is refused by lith's rule on both. So is a foreign key
 * whose parent is named _lith_ (made, added, or renamed onto: the
 * authorizer never sees REFERENCES, lith reads the schema the statement
 * left). After the table, a plain write must still answer 200 at once on
 * --dqlite (one ALTER of _lith_batches once made every later write wait out
 * the failover and answer 503, across restarts); a trigger of the client's
 * cannot write _lith_batches on either store; and the outage a key onto
 * _lith_batches caused (the writer's clean-up refused) is replayed whole on
 * --dqlite, restart included.
 *
 * What the stores still answer differently is not in the table but listed
 * in docs/design.md ("What differs with --dqlite"): a string holding
 * U+0000 (dqlite's protocol carries text NUL-terminated).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "child.h"
#include "jwtmint.h"
#include "nodes.h"
#include "wsclient.h"

/* The cluster's own tables as the dqlite writer and store make them; the
 * local file gets them too, before lithd starts. The schema itself makes
 * nothing named _lith_. */
static const char *lith_tables =
    "CREATE TABLE _lith_batches(id INTEGER PRIMARY KEY, time INTEGER NOT NULL, lost INTEGER NOT NULL "
    "DEFAULT 0);"
    "CREATE INDEX _lith_batches_time ON _lith_batches(time);"
    "CREATE TABLE _lith_schema(version INTEGER NOT NULL)";

static const char *schema_sql = "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL CHECK (v >= 0));\n"
                                "CREATE TABLE pt(a, b);\n"
                                "CREATE TABLE u(x TEXT UNIQUE);\n"
                                "CREATE TABLE fkp(id INTEGER PRIMARY KEY);\n"
                                "CREATE TABLE fkc(p REFERENCES fkp(id));\n";

/* One attack: what is sent, and what every store must answer. */
struct attack {
  const char *what;
  const char *path;
  const char *body;
  int status;
  const char *has;   /* a piece of the answer's body */
  const char *hrana; /* the same statements as Hrana's execute requests: the
                        error code of each ("ok": they run), or NULL: the row
                        is about /v1's format or /v1/query (Hrana's execute
                        may write) */
  const char *auth;  /* the credentials it carries: a name of tokens[] (sqld's
                        JWTs, made by group_setup); NULL: a full token */
};

#define DO "/v1/do"
#define Q "/v1/query"
#define LITH_OWN "names beginning _lith_ are lith's" /* the authorizer's reason */
#define ONE(sql) "{\"statements\":[{\"sql\":\"" sql "\"}]}"
#define PT_B(p) \
  "{\"statements\":[{\"sql\":\"INSERT INTO pt(a, b) VALUES (" p ", :b)\",\"params\":{\":b\":\"x\"}}]}"

/* A row without credentials leaves auth out (a full token): */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct attack attacks[] = {
    /* SQL that would change what every later client relies on. */
    {"PRAGMA assignment", DO, ONE("PRAGMA ignore_check_constraints = 1"), 403, "forbidden", "SQLITE_AUTH"},
    {"PRAGMA after a block comment", DO, ONE("/**/PRAGMA ignore_check_constraints=1"), 403, "forbidden",
     "SQLITE_AUTH"},
    {"PRAGMA after a line comment", DO, ONE("-- x\\nPRAGMA writable_schema=ON"), 403, "forbidden",
     "SQLITE_AUTH"},
    {"PRAGMA after comments and blanks", DO, ONE(" /* a */ -- b\\n /**/ PRAGMA synchronous = OFF"), 403,
     "forbidden", "SQLITE_AUTH"},
    {"PRAGMA journal_mode", DO, ONE("PRAGMA journal_mode = DELETE"), 403, "forbidden", "SQLITE_AUTH"},
    {"PRAGMA foreign_keys", DO, ONE("PRAGMA foreign_keys = OFF"), 403, "forbidden", NULL},
    {"PRAGMA wal_checkpoint", DO, ONE("PRAGMA wal_checkpoint(TRUNCATE)"), 403, "forbidden", "SQLITE_AUTH"},
    {"PRAGMA in a batch", "/v1/batch",
     "{\"commands\":[{\"statements\":[{\"sql\":\"/**/PRAGMA writable_schema=1\"}]}]}", 200, "forbidden",
     "SQLITE_AUTH"},
    /* What migrations send may run (test_lithd_migrate); around it, what
     * still may not. */
    {"PRAGMA writable_schema of main", DO, ONE("PRAGMA main.writable_schema = 1"), 403, "forbidden",
     "SQLITE_AUTH"},
    {"PRAGMA temp.user_version (outlives the command)", DO, ONE("PRAGMA temp.user_version = 5"), 403,
     "TEMP schema outlives", "SQLITE_AUTH"},
    {"PRAGMA user_version of a schema not attached", DO, ONE("PRAGMA other.user_version = 5"), 400,
     "unknown database other", "SQLITE_ERROR"},
    {"PRAGMA defer_foreign_keys smuggling writable_schema", DO,
     "{\"statements\":[{\"sql\":\"PRAGMA defer_foreign_keys = ON\"},{\"sql\":\"PRAGMA writable_schema = "
     "ON\"}]}",
     403, "forbidden", NULL},
    {"PRAGMA recursive_triggers smuggling journal_mode", DO,
     "{\"statements\":[{\"sql\":\"PRAGMA recursive_triggers = ON\"},{\"sql\":\"PRAGMA journal_mode = "
     "DELETE\"}]}",
     403, "forbidden", NULL},
    {"read-only token: PRAGMA foreign_keys (a migration holds the writer)", DO,
     ONE("PRAGMA foreign_keys = OFF"), 403, "forbidden", "SQLITE_AUTH", "ro"},
    {"EXPLAIN PRAGMA journal_mode on /v1/query", Q, ONE("EXPLAIN PRAGMA journal_mode = DELETE"), 403,
     "forbidden", "SQLITE_AUTH"},
    {"VACUUM INTO a file", DO, ONE("VACUUM INTO 'vacuumed.db'"), 403, "VACUUM INTO", "SQLITE_AUTH"},
    {"VACUUM main INTO a parameter, after a comment", DO,
     "{\"statements\":[{\"sql\":\"/* c */ vacuum main into ?\",\"params\":[\"vacuumed.db\"]}]}", 403,
     "VACUUM INTO", "SQLITE_AUTH"},
    {"VACUUM temp INTO a file (SQLite makes no Vacuum instruction of temp)", DO,
     ONE("VACUUM temp INTO 'vacuumed.db'"), 403, "VACUUM INTO", "SQLITE_AUTH"},
    {"VACUUM \"TEMP\" INTO a file", DO, ONE("VACUUM \\\"TEMP\\\" INTO 'vacuumed.db'"), 403, "VACUUM INTO",
     "SQLITE_AUTH"},
    {"VACUUM with another statement (in its transaction)", DO,
     "{\"statements\":[{\"sql\":\"SELECT 1\"},{\"sql\":\"VACUUM\"}]}", 400,
     "cannot VACUUM from within a transaction", NULL},
    {"VACUUM with another statement in a batch", "/v1/batch",
     "{\"commands\":[{\"statements\":[{\"sql\":\"SELECT 1\"},{\"sql\":\"VACUUM\"}]}]}", 200,
     "cannot VACUUM from within a transaction", NULL},
    {"VACUUM on /v1/query", Q, ONE("VACUUM"), 403, "write statement", NULL},
    {"ATTACH", DO, ONE("ATTACH DATABASE 'other.db' AS o"), 403, "forbidden", "SQLITE_AUTH"},
    {"ATTACH after a comment", DO, ONE("/**/ATTACH DATABASE 'other.db' AS o"), 403, "forbidden",
     "SQLITE_AUTH"},
    {"ATTACH memory", DO, ONE("ATTACH ':memory:' AS m"), 403, "forbidden", "SQLITE_AUTH"},
    {"DETACH", DO, ONE("DETACH DATABASE main"), 403, "forbidden", "SQLITE_AUTH"},
    {"load_extension", DO, ONE("SELECT load_extension('/tmp/x.so')"), 403, "forbidden", "SQLITE_AUTH"},
    {"fts3_tokenizer", DO, ONE("SELECT fts3_tokenizer('simple')"), 403, "forbidden", "SQLITE_AUTH"},
    /* Transaction control is the writer's. */
    {"BEGIN", DO, ONE("BEGIN"), 403, "the writer owns", NULL},
    {"COMMIT", DO, ONE("COMMIT"), 403, "the writer owns", "SQLITE_ERROR"},
    {"COMMIT after a comment", DO, ONE("/* c */ COMMIT"), 403, "the writer owns", "SQLITE_ERROR"},
    {"ROLLBACK", DO, ONE("ROLLBACK"), 403, "the writer owns", "SQLITE_ERROR"},
    {"END", DO, ONE("END"), 403, "the writer owns", "SQLITE_ERROR"},
    {"the writer's savepoint", DO, ONE("SAVEPOINT lith_x"), 403, "forbidden", "SQLITE_AUTH"},
    {"releasing the writer's savepoint", DO, ONE("RELEASE lith_0"), 403, "forbidden", "SQLITE_AUTH"},
    /* lith's own tables: a client may read them, never make or change
     * anything named _lith_ (one ALTER once stopped every write on
     * --dqlite, #32). Each names tables both stores have (lith_tables), so
     * the refusal is the authorizer's, never "no such table". */
    {"CREATE TABLE _lith_*", DO, ONE("CREATE TABLE _lith_x(a)"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"CREATE TABLE _LITH_* in another case", DO, ONE("CREATE TABLE \\\"_LiTh_X\\\"(a)"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"CREATE TEMP TABLE shadowing _lith_batches", DO, ONE("CREATE TEMP TABLE _lith_batches(id, time, lost)"),
     403, LITH_OWN, "SQLITE_AUTH"},
    {"CREATE VIEW _lith_*", DO, ONE("CREATE VIEW _lith_x AS SELECT 1 AS id"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"CREATE VIEW _lith_batches", DO,
     ONE("CREATE VIEW _lith_batches AS SELECT 1 AS id, 2 AS time, 0 AS lost"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"CREATE INDEX _lith_*", DO, ONE("CREATE INDEX _lith_x ON t(v)"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"CREATE INDEX on _lith_batches", DO, ONE("CREATE UNIQUE INDEX ix ON _lith_batches(lost)"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"CREATE TRIGGER _lith_*", DO, ONE("CREATE TRIGGER _lith_x AFTER INSERT ON t BEGIN SELECT 1; END"), 403,
     LITH_OWN, "SQLITE_AUTH"},
    {"CREATE TRIGGER on _lith_batches", DO,
     ONE("CREATE TRIGGER tr BEFORE INSERT ON _lith_batches BEGIN SELECT RAISE(ABORT, 'no'); END"), 403,
     LITH_OWN, "SQLITE_AUTH"},
    {"CREATE TEMP TRIGGER on _lith_batches", DO,
     ONE("CREATE TEMP TRIGGER tr BEFORE INSERT ON main._lith_batches BEGIN SELECT RAISE(ABORT, 'no'); END"),
     403, LITH_OWN, "SQLITE_AUTH"},
    {"CREATE VIRTUAL TABLE _lith_*", DO, ONE("CREATE VIRTUAL TABLE _lith_x USING fts5(a)"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"ALTER TABLE _lith_batches RENAME COLUMN", DO, ONE("ALTER TABLE _lith_batches RENAME COLUMN lost TO z"),
     403, LITH_OWN, "SQLITE_AUTH"},
    {"ALTER TABLE _lith_batches RENAME TO", DO, ONE("ALTER TABLE main._lith_batches RENAME TO y"), 403,
     LITH_OWN, "SQLITE_AUTH"},
    {"ALTER TABLE _lith_batches ADD COLUMN", DO, ONE("ALTER TABLE _lith_batches ADD COLUMN z"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"ALTER TABLE _lith_batches DROP COLUMN", DO, ONE("ALTER TABLE _lith_batches DROP COLUMN lost"), 403,
     LITH_OWN, "SQLITE_AUTH"},
    {"a rename onto _lith_batches", DO, ONE("ALTER TABLE pt RENAME TO _lith_batches"), 400,
     "there is already another table", "SQLITE_ERROR"},
    {"a rename onto _lith_schema", DO, ONE("ALTER TABLE pt RENAME TO _LITH_schema"), 400,
     "there is already another table", "SQLITE_ERROR"},
    {"DROP TABLE _lith_batches", DO, ONE("DROP TABLE _lith_batches"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"DROP TABLE _lith_schema", DO, ONE("DROP TABLE IF EXISTS _LITH_SCHEMA"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"DROP VIEW _lith_batches", DO, ONE("DROP VIEW _lith_batches"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"DROP INDEX _lith_batches_time", DO, ONE("DROP INDEX _lith_batches_time"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"INSERT INTO _lith_batches", DO, ONE("INSERT INTO _lith_batches(id, time, lost) VALUES (1, 0, 1)"), 403,
     LITH_OWN, "SQLITE_AUTH"},
    {"REPLACE INTO _lith_schema", DO, ONE("REPLACE INTO _lith_schema(version) VALUES (99)"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"UPDATE _lith_batches", DO, ONE("UPDATE _lith_batches SET lost = 1"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"DELETE FROM _lith_batches", DO, ONE("DELETE FROM _lith_batches"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"DELETE FROM _lith_schema", DO, ONE("DELETE FROM _lith_schema"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"a write to _lith_* in a batch", "/v1/batch",
     "{\"commands\":[{\"statements\":[{\"sql\":\"DELETE FROM _lith_batches\"}]}]}", 200, LITH_OWN,
     "SQLITE_AUTH"},
    {"a write to _lith_* on /v1/query", Q, ONE("DELETE FROM _lith_batches"), 403, "write statement", NULL},
    /* ... nor name one as a foreign key's parent: the authorizer never sees
     * REFERENCES, so lith reads the schema each CREATE or ALTER TABLE left
     * (lith_command_check) and the statement fails. On --dqlite such a key
     * made the writer's clean-up of _lith_batches fail, and every write
     * with it (#32; test_fk_onto_lith_cannot_stop_writes); one onto a column
     * not unique fails every batch at once. The first row prepares its SQL
     * and runs nothing (a wrong parameter count): the next, the same text
     * from the statement cache, is checked all the same. */
    {"a foreign key onto _lith_*, prepared and not run", DO,
     "{\"statements\":[{\"sql\":\"CREATE TABLE fk(x REFERENCES _lith_batches(id))\",\"params\":[1]}]}", 400,
     "0 parameters, 1 given", "ARGS_INVALID"},
    {"a foreign key onto _lith_batches", DO, ONE("CREATE TABLE fk(x REFERENCES _lith_batches(id))"), 403,
     LITH_OWN, "SQLITE_AUTH"},
    {"a foreign key onto _lith_batches' primary key", DO, ONE("CREATE TABLE fk(x REFERENCES _lith_batches)"),
     403, LITH_OWN, "SQLITE_AUTH"},
    {"a FOREIGN KEY clause onto \"_LITH_BATCHES\"", DO,
     ONE("CREATE TABLE fk(x, FOREIGN KEY(x) REFERENCES \\\"_LITH_BATCHES\\\")"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"a deferred foreign key onto a column not unique", DO,
     ONE("CREATE TABLE fk(x REFERENCES _lith_batches(time) DEFERRABLE INITIALLY DEFERRED)"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"ON DELETE CASCADE from _lith_schema", DO,
     ONE("CREATE TABLE fk(x REFERENCES [_LiTh_Schema](version) ON DELETE CASCADE)"), 403, LITH_OWN,
     "SQLITE_AUTH"},
    {"a foreign key onto a _lith_ table not made yet", DO, ONE("CREATE TABLE fk(x REFERENCES _lith_later)"),
     403, LITH_OWN, "SQLITE_AUTH"},
    {"ALTER TABLE ADD COLUMN onto _lith_schema", DO,
     ONE("ALTER TABLE pt ADD COLUMN y REFERENCES _lith_schema"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"a rename that another table's foreign key follows onto _lith_", DO,
     ONE("ALTER TABLE fkp RENAME TO _lith_fkp"), 403, LITH_OWN, "SQLITE_AUTH"},
    {"a foreign key onto _lith_* made in two statements", DO,
     "{\"statements\":[{\"sql\":\"CREATE TABLE fk(x)\"},"
     "{\"sql\":\"ALTER TABLE fk ADD COLUMN y REFERENCES _lith_batches(id)\"}]}",
     403, LITH_OWN, NULL},
    {"a foreign key onto _lith_* in a batch", "/v1/batch",
     "{\"commands\":[{\"statements\":[{\"sql\":\"CREATE TABLE fk(x REFERENCES _lith_batches)\"}]}]}", 200,
     LITH_OWN, "SQLITE_AUTH"},
    /* One statement per "sql": nothing rides behind a harmless one. */
    {"a second statement", DO, ONE("SELECT 1; DELETE FROM t"), 400, "more than one statement",
     "SQL_MANY_STATEMENTS"},
    {"a second statement after a comment", DO, ONE("SELECT 1 /* x */; PRAGMA writable_schema=1"), 400,
     "more than one statement", "SQL_MANY_STATEMENTS"},
    /* /v1/query only reads. */
    {"a write on /v1/query", Q, ONE("DELETE FROM t"), 403, "write statement", NULL},
    {"a write after a comment on /v1/query", Q, ONE("/**/DELETE FROM t"), 403, "write statement", NULL},
    {"WITH ... INSERT on /v1/query", Q, ONE("WITH x AS (SELECT 1) INSERT INTO pt(a) SELECT * FROM x"), 403,
     "write statement", NULL},
    {"PRAGMA on /v1/query", Q, ONE("/**/PRAGMA writable_schema=1"), 403, "write statement", "SQLITE_AUTH"},
    {"ATTACH on /v1/query", Q, ONE("-- a\\nATTACH 'x.db' AS x"), 403, "write statement", "SQLITE_AUTH"},
    {"BEGIN on /v1/query", Q, ONE("BEGIN"), 403, "write statement", NULL},
    {"a typo on /v1/query", Q, ONE("SELEC 1"), 400, "syntax error", "SQL_PARSE_ERROR"},
    /* Parameters are numbered as SQLite numbers them: a value never lands
     * in another parameter. */
    {"a parameter with a non-ASCII name", DO, PT_B(":\u00e9"), 400, "is not given", "ARGS_INVALID"},
    {"a #name parameter", DO, PT_B("#a"), 400, "is not given", "ARGS_INVALID"},
    {"a :a$b parameter", DO, PT_B(":a$b"), 400, "is not given", "ARGS_INVALID"},
    {"a $a::b parameter", DO, PT_B("$a::b"), 400, "is not given", "ARGS_INVALID"},
    {"a $a(x) parameter", DO, PT_B("$a(x)"), 400, "is not given", "ARGS_INVALID"},
    {"a parameter in a string", DO,
     "{\"statements\":[{\"sql\":\"INSERT INTO pt(a, b) VALUES (':a', :b)\",\"params\":{\":a\":1,\":b\":2}}]}",
     400, "no parameter", "ARGS_INVALID"},
    {"too many values", DO, "{\"statements\":[{\"sql\":\"SELECT ?\",\"params\":[1,2]}]}", 400,
     "1 parameter, 2 given", "ARGS_INVALID"},
    {"too few values", DO, "{\"statements\":[{\"sql\":\"SELECT ?, ?\",\"params\":[1]}]}", 400,
     "2 parameters, 1 given", "ARGS_INVALID"},
    {"?NNN past the values", DO, "{\"statements\":[{\"sql\":\"SELECT ?3\",\"params\":[1]}]}", 400,
     "3 parameters, 1 given", "ARGS_INVALID"},
    /* Limits (lithd runs with --max-rows 100; an answer holds at most 64 MiB
     * of text and blobs). --max-rows bounds /v1 alone: a Hrana answer is
     * bounded by its bytes, as sqld's (the 64 MiB rows below), so the rows
     * past it are not replayed as Hrana (test_answer_bounded_by_bytes). */
    {"rows past --max-rows on /v1/query", Q,
     ONE("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < 200) SELECT x FROM c"),
     422, "max_rows", NULL},
    {"rows past --max-rows on /v1/do", DO,
     ONE("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < 200) SELECT x FROM c"),
     422, "max_rows", NULL},
    {"an answer past 64 MiB on /v1/query", Q,
     ONE("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < 70) "
         "SELECT zeroblob(1000000) FROM c"),
     422, "max_result_bytes", "RESPONSE_TOO_LARGE"},
    {"an answer past 64 MiB on /v1/do", DO,
     ONE("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c WHERE x < 70) "
         "SELECT zeroblob(1000000) FROM c"),
     422, "max_result_bytes", "RESPONSE_TOO_LARGE"},
    {"a value past --max-value-bytes", DO, ONE("SELECT zeroblob(2000000)"), 400, "too big", "SQLITE_TOOBIG"},
    {"text that is not UTF-8", Q, ONE("SELECT CAST(x'ff' AS TEXT)"), 422, "not valid UTF-8",
     "RESPONSE_UNENCODABLE"},
    {"columns of one name as objects", "/v1/query?rows=objects", ONE("SELECT 1 AS a, 2 AS a"), 400,
     "both named", NULL},
    /* The request itself. */
    {"not JSON", DO, "{\"statements\": [", 400, "bad_request", NULL},
    {"an unknown key", DO, "{\"statements\":[{\"sql\":\"SELECT 1\",\"parms\":[1]}]}", 400, "bad_request",
     NULL},
    {"a constraint still holds", DO, ONE("INSERT INTO t(v) VALUES (-1)"), 409, "CHECK constraint failed",
     "SQLITE_CONSTRAINT"},
    /* Last: on dqlite the node goes on with it until its own bound
     * (lith-node --max-run-ms), and the rows after would wait for it. */
    {"a read past --max-run-ms", Q,
     ONE("WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"), 422,
     "\"code\":\"timeout\"", "SQLITE_INTERRUPT"},
    /* dqlite: the writer asks the node to cut at lithd's --max-run-ms and
     * waits that long plus its request timeout (was: taken for a lost
     * leader after 2 s, run again until failover: 503 after 12 s). */
    {"a write past --max-run-ms", DO,
     ONE("INSERT INTO t(v) WITH RECURSIVE c(x) AS (VALUES(1) UNION ALL SELECT x + 1 FROM c) "
         "SELECT count(*) FROM c"),
     422, "\"code\":\"timeout\"", "SQLITE_INTERRUPT"},
    {"lith-node's bound is not the client's to raise", Q, ONE("SELECT lith_max_run_ms(100000)"), 400,
     "no such function", "SQLITE_ERROR"},
    /* sqld's JWTs (--auth-jwt-key-file): a read-only token's writes are
     * refused by the store, whatever the statement; a forged, expired or
     * foreign token at the door (401, nothing run; not sent as Hrana: the
     * whole pipeline is refused). */
    {"read-only token: INSERT", DO, ONE("INSERT INTO t(v) VALUES (1)"), 403, "Authorization forbidden",
     "SQLITE_AUTH", "ro"},
    {"read-only token: DELETE", DO, ONE("DELETE FROM t"), 403, "Authorization forbidden", "SQLITE_AUTH",
     "ro"},
    {"read-only token: CREATE TABLE", DO, ONE("CREATE TABLE ro_made(x)"), 403, "Authorization forbidden",
     "SQLITE_AUTH", "ro"},
    {"read-only token: a write after comments", DO, ONE("/* a */ -- b\\n INSERT INTO t(v) VALUES (2)"), 403,
     "Authorization forbidden", "SQLITE_AUTH", "ro"},
    {"read-only token: an INSERT in a CTE", DO,
     ONE("WITH x(v) AS (SELECT 3) INSERT INTO t(v) SELECT v FROM x"), 403, "Authorization forbidden",
     "SQLITE_AUTH", "ro"},
    {"read-only token: PRAGMA user_version =", DO, ONE("PRAGMA user_version = 9"), 403, "forbidden",
     "SQLITE_AUTH", "ro"},
    {"JWT alg none", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "EdDSA", NULL, "none"},
    {"JWT HS256 keyed with the public key", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "EdDSA", NULL,
     "hs256"},
    {"JWT of another key", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "signature", NULL, "other-key"},
    {"JWT expired", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "expired", NULL, "expired"},
    {"JWT read-only with a full payload swapped in", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "signature",
     NULL, "swapped"},
    {"JWT for another database", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "no access", NULL, "other-db"},
    {"JWT past 8 KiB", DO, ONE("INSERT INTO t(v) VALUES (1)"), 401, "longer than", NULL, "huge"},
    {"JWT read-only on /v1/query", Q, ONE("SELECT count(*) FROM t"), 200, "[[0]]", NULL, "ro"},
};
#pragma GCC diagnostic pop

/* --max-run-ms of both lithds: the legitimate rows (a 70 MB answer built
 * to be refused for its size) run well within it, the endless ones are cut;
 * a sanitizer runs SQLite several times slower. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RUN_MS "6000"
#else
#define RUN_MS "1000"
#endif

static t_node node;
static struct tl_child local, dq;

/* sqld's JWTs for the rows' auth (group_setup makes them): "Bearer ..." by
 * name; FULL, the one every other request carries. */
static const char *const token_names[] = {"full",    "ro",      "none",     "hs256", "other-key",
                                          "expired", "swapped", "other-db", "huge"};
#define N_TOKENS (sizeof token_names / sizeof *token_names)
static char *tokens[N_TOKENS];
#define FULL (tokens[0])
#define LITHD_JWT_PAD 8300 /* a payload that makes a token past lithd's 8 KiB */

static const char *auth_of(const struct attack *a) {
  for (size_t i = 0; a->auth != NULL && i < N_TOKENS; i++)
    if (strcmp(token_names[i], a->auth) == 0)
      return tokens[i];
  assert_null(a->auth); /* a name not made */
  return FULL;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
}

/* One request to c: its status, and whether the body has `has`. */
static int try_one(const struct tl_child *c, const struct attack *a, int *has) {
  struct tl_resp r;
  tl_http(c, "POST", a->path, auth_of(a), a->body, &r);
  *has = r.body != NULL && strstr(r.body, a->has) != NULL;
  int status = r.status;
  if (status != a->status || !*has)
    print_message("  %s: %d %.300s\n", a->what, r.status, r.body ? r.body : "");
  tl_resp_free(&r);
  return status;
}

/* A /v1 value as a Hrana value (jansson reads what the table wrote). */
static json_t *hrana_value(const json_t *v) {
  if (json_is_integer(v)) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    return json_pack("{s:s,s:s}", "type", "integer", "value", buf);
  }
  if (json_is_real(v))
    return json_pack("{s:s,s:f}", "type", "float", "value", json_real_value(v));
  if (json_is_string(v))
    return json_pack("{s:s,s:s}", "type", "text", "value", json_string_value(v));
  return json_pack("{s:s}", "type", "null");
}

/* The row's statements (/v1/do's and /v1/query's "statements", /v1/batch's
 * commands' statements) as one Hrana execute request each, or (as_batch)
 * as the steps of one batch request, then a close: a pipeline body,
 * malloc'd. */
static char *hrana_body(const char *v1_body, int as_batch) {
  json_error_t err;
  json_t *in = json_loads(v1_body, 0, &err), *reqs = json_array(), *lists = json_array();
  assert_non_null(in);
  json_t *cmds = json_object_get(in, "commands");
  if (cmds != NULL) {
    for (size_t i = 0; i < json_array_size(cmds); i++)
      json_array_append(lists, json_object_get(json_array_get(cmds, i), "statements"));
  } else {
    json_array_append(lists, json_object_get(in, "statements"));
  }
  for (size_t i = 0; i < json_array_size(lists); i++) {
    json_t *list = json_array_get(lists, i);
    for (size_t j = 0; j < json_array_size(list); j++) {
      json_t *st = json_array_get(list, j);
      json_t *stmt = json_pack("{s:O}", "sql", json_object_get(st, "sql"));
      json_t *params = json_object_get(st, "params");
      if (json_is_array(params)) {
        json_t *args = json_array();
        for (size_t k = 0; k < json_array_size(params); k++)
          json_array_append_new(args, hrana_value(json_array_get(params, k)));
        json_object_set_new(stmt, "args", args);
      } else if (json_is_object(params)) {
        json_t *named = json_array();
        for (void *it = json_object_iter(params); it != NULL; it = json_object_iter_next(params, it))
          json_array_append_new(named, json_pack("{s:s,s:o}", "name", json_object_iter_key(it), "value",
                                                 hrana_value(json_object_iter_value(it))));
        json_object_set_new(stmt, "named_args", named);
      }
      json_array_append_new(reqs, as_batch ? json_pack("{s:o}", "stmt", stmt)
                                           : json_pack("{s:s,s:o}", "type", "execute", "stmt", stmt));
    }
  }
  if (as_batch) { /* the steps, without conditions: each one's outcome its own */
    json_t *steps = reqs;
    reqs = json_array();
    json_array_append_new(reqs, json_pack("{s:s,s:{s:o}}", "type", "batch", "batch", "steps", steps));
  }
  json_array_append_new(reqs, json_pack("{s:s}", "type", "close"));
  json_t *pipe = json_pack("{s:n,s:o}", "baton", "requests", reqs);
  char *out = json_dumps(pipe, JSON_COMPACT);
  json_decref(pipe);
  json_decref(lists);
  json_decref(in);
  return out;
}

/* One outcome: ok (a result, no error) or the refusal a->hrana, with a
 * message that says why. */
static int hrana_right(const struct attack *a, const json_t *ok, const json_t *e) {
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (strcmp(a->hrana, "ok") == 0)
    return ok != NULL && !json_is_null(ok) && (e == NULL || json_is_null(e));
  return code != NULL && strcmp(code, a->hrana) == 0 && msg != NULL && strlen(msg) > 10;
}

/* The row as Hrana on c, its statements as execute requests and again as
 * one batch's steps (the steps' own path on each store): 1 if every
 * outcome is a->hrana. */
static int try_hrana(const struct tl_child *c, const struct attack *a, const char *store) {
  int right = 1;
  for (int as_batch = 0; as_batch < 2 && right; as_batch++) {
    struct tl_resp r;
    char *body = hrana_body(a->body, as_batch);
    tl_http(c, "POST", "/v2/pipeline", auth_of(a), body, &r);
    free(body);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *results = json_object_get(j, "results");
    right = results != NULL && json_array_size(results) >= 2;
    json_t *whole = json_object_get(json_array_get(results, 0), "error");
    if (right && as_batch && whole != NULL) { /* a run limit ends the batch: the same code, for all */
      right = hrana_right(a, NULL, whole);
    } else if (right && as_batch) {
      json_t *res = json_object_get(
          json_object_get(json_object_get(json_array_get(results, 0), "response"), "result"), "step_results");
      json_t *errs = json_object_get(
          json_object_get(json_object_get(json_array_get(results, 0), "response"), "result"), "step_errors");
      right = json_array_size(res) > 0 && json_array_size(res) == json_array_size(errs);
      for (size_t k = 0; right && k < json_array_size(res); k++)
        right = hrana_right(a, json_array_get(res, k), json_array_get(errs, k));
    }
    for (size_t k = 0; right && !as_batch && k + 1 < json_array_size(results); k++) {
      json_t *res = json_array_get(results, k);
      const char *type = json_string_value(json_object_get(res, "type"));
      right =
          hrana_right(a, type != NULL && strcmp(type, "ok") == 0 ? res : NULL, json_object_get(res, "error"));
    }
    if (!right)
      print_message("%s store, Hrana %s: %s: %d %.300s (want %s)\n", store, as_batch ? "batch" : "execute",
                    a->what, r.status, r.body ? r.body : "", a->hrana);
    json_decref(j);
    tl_resp_free(&r);
  }
  return right;
}

/* The row as Hrana over WebSocket on c (routes/hrana_ws.c: the fourth way
 * in, the same road): a connection whose hello carries the row's token, a
 * stream, the row's execute requests one by one, and again as one batch.
 * 1 if every outcome is a->hrana. */
static int try_hrana_ws(const struct tl_child *c, const struct attack *a, const char *store) {
  static char msg[1 << 20];
  int right = 1, code = 0;
  const char *auth = auth_of(a);
  for (int as_batch = 0; as_batch < 2 && right; as_batch++) {
    char *body = hrana_body(a->body, as_batch);
    json_t *pipe = json_loads(body, 0, NULL), *reqs = json_object_get(pipe, "requests");
    free(body);
    int fd = wsc_open(c->port, "/", "hrana3", NULL);
    assert_true(fd >= 0);
    struct timeval tv = {TL_TIMEOUT_MS / 1000, 0}; /* a row past --max-run-ms (6 s under sanitizers) */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    json_t *hello = json_pack("{s:s,s:s}", "type", "hello", "jwt", auth + strlen("Bearer "));
    char *text = json_dumps(hello, JSON_COMPACT);
    json_decref(hello);
    right = wsc_send_text(fd, text) == 0 && wsc_read_text(fd, msg, sizeof msg, &code) > 0 &&
            strstr(msg, "hello_ok") != NULL;
    free(text);
    right = right &&
            wsc_send_text(fd, "{\"type\":\"request\",\"request_id\":0,\"request\":{\"type\":\"open_stream\","
                              "\"stream_id\":1}}") == 0 &&
            wsc_read_text(fd, msg, sizeof msg, &code) > 0 && strstr(msg, "response_ok") != NULL;
    for (size_t k = 0; right && k + 1 < json_array_size(reqs); k++) { /* the last is HTTP's close */
      json_t *rq = json_array_get(reqs, k);
      json_object_set_new(rq, "stream_id", json_integer(1));
      json_t *m = json_pack("{s:s,s:i,s:O}", "type", "request", "request_id", (int)k + 1, "request", rq);
      text = json_dumps(m, JSON_COMPACT);
      json_decref(m);
      right = wsc_send_text(fd, text) == 0 && wsc_read_text(fd, msg, sizeof msg, &code) > 0;
      free(text);
      json_t *ans = right ? json_loads(msg, 0, NULL) : NULL;
      const char *type = json_string_value(json_object_get(ans, "type"));
      right = type != NULL && json_integer_value(json_object_get(ans, "request_id")) == (json_int_t)k + 1;
      int ok = right && strcmp(type, "response_ok") == 0;
      json_t *result = json_object_get(json_object_get(ans, "response"), "result");
      if (right && as_batch && ok) {
        json_t *res = json_object_get(result, "step_results"), *errs = json_object_get(result, "step_errors");
        right = json_array_size(res) > 0 && json_array_size(res) == json_array_size(errs);
        for (size_t i = 0; right && i < json_array_size(res); i++)
          right = hrana_right(a, json_array_get(res, i), json_array_get(errs, i));
      } else if (right) { /* an execute's outcome, or a batch refused whole */
        right = hrana_right(a, ok ? result : NULL, json_object_get(ans, "error"));
      }
      if (!right)
        print_message("%s store, Hrana over WebSocket %s: %s: %.300s (want %s)\n", store,
                      as_batch ? "batch" : "execute", a->what, msg, a->hrana);
      json_decref(ans);
    }
    close(fd);
    json_decref(pipe);
  }
  return right;
}

static void test_every_attack_on_both_stores(void **state) {
  (void)state;
  int wrong = 0;
  for (size_t i = 0; i < sizeof attacks / sizeof *attacks; i++) {
    const struct attack *a = &attacks[i];
    int has_l = 0, has_d = 0;
    int sl = try_one(&local, a, &has_l), sd = try_one(&dq, a, &has_d);
    if (sl != a->status || !has_l) {
      print_message("local store: %s: %d, want %d with \"%s\"\n", a->what, sl, a->status, a->has);
      wrong++;
    }
    if (sd != a->status || !has_d) {
      print_message("dqlite store: %s: %d, want %d with \"%s\"\n", a->what, sd, a->status, a->has);
      wrong++;
    }
  }
  /* and through Hrana, the third format: the same rules, by construction */
  int hrana = 0;
  for (size_t i = 0; i < sizeof attacks / sizeof *attacks; i++) {
    const struct attack *a = &attacks[i];
    if (a->hrana == NULL)
      continue;
    hrana++;
    wrong += !try_hrana(&local, a, "local");
    wrong += !try_hrana(&dq, a, "dqlite");
    wrong += !try_hrana_ws(&local, a, "local");
    wrong += !try_hrana_ws(&dq, a, "dqlite");
  }
  print_message(
      "%zu attacks, each on both stores, %d of them through Hrana too, over HTTP and over WebSocket "
      "(as execute requests and as one batch): %d answers wrong\n",
      sizeof attacks / sizeof *attacks, hrana, wrong);
  assert_int_equal(wrong, 0);
}

/* The one integer a read of c answers. */
static int64_t read_int(const struct tl_child *c, const char *sql) {
  json_t *body = json_pack("{s:[{s:s}]}", "statements", "sql", sql);
  char *text = json_dumps(body, JSON_COMPACT);
  struct tl_resp r;
  tl_http(c, "POST", Q, FULL, text, &r);
  free(text);
  json_decref(body);
  assert_int_equal(r.status, 200);
  json_t *j = json_loads(r.body, 0, NULL);
  json_t *result = json_array_get(json_object_get(j, "results"), 0);
  json_t *v = json_array_get(json_array_get(json_object_get(result, "rows"), 0), 0);
  if (!json_is_integer(v))
    print_message("%s: %s\n", sql, r.body);
  assert_true(json_is_integer(v));
  int64_t n = json_integer_value(v);
  json_decref(j);
  tl_resp_free(&r);
  return n;
}

/* What the attacks tried to change is as it was, on both stores. */
static void test_nothing_changed(void **state) {
  (void)state;
  const struct tl_child *both[] = {&local, &dq};
  for (int k = 0; k < 2; k++) {
    const struct tl_child *c = both[k];
    tl_expect(c, "POST", DO, FULL, ONE("INSERT INTO t(v) VALUES (-5)"), 409, "CHECK constraint failed");
    tl_expect(c, "POST", Q, FULL, ONE("SELECT count(*) FROM pt"), 200, "[[0]]");
    tl_expect(c, "POST", Q, FULL, ONE("SELECT count(*) FROM t"), 200, "[[0]]");
    tl_expect(c, "POST", DO, FULL, ONE("PRAGMA writable_schema"), 200, "[[0]]");
    tl_expect(c, "POST", Q, FULL, ONE("SELECT count(*) FROM pragma_database_list"), 200, "[[1]]");
    tl_expect(c, "POST", DO, FULL, ONE("PRAGMA temp.user_version"), 200, "[[0]]");
    assert_int_equal(access("vacuumed.db", F_OK), -1); /* no VACUUM INTO wrote it */
    /* and what is allowed still runs */
    tl_expect(c, "POST", DO, FULL,
              "{\"statements\":[{\"sql\":\"/* ok */ INSERT INTO pt(a, b) VALUES (:a, :b)\","
              "\"params\":{\":a\":1,\":b\":2}}]}",
              200, "\"changes\":1");
    tl_expect(c, "POST", Q, FULL, ONE("SELECT a, b FROM pt"), 200, "[[1,2]]");
    tl_expect(c, "POST", DO, FULL, ONE("DELETE FROM pt"), 200, "\"changes\":1");
    /* lith's tables: all there, as they were, and nothing else named _lith_ */
    tl_expect(c, "POST", Q, FULL,
              ONE("SELECT group_concat(type || ' ' || name, ', ') FROM (SELECT type, name FROM sqlite_master "
                  "WHERE lower(substr(name, 1, 6)) = '_lith_' OR type = 'trigger' ORDER BY name)"),
              200, "[[\"table _lith_batches, index _lith_batches_time, table _lith_schema\"]]");
    tl_expect(c, "POST", Q, FULL,
              ONE("SELECT group_concat(name || ' ' || \\\"notnull\\\", ', ') FROM "
                  "pragma_table_info('_lith_batches')"),
              200, "[[\"id 0, time 1, lost 1\"]]");
    /* no foreign key names a _lith_ table; the client's tables as made */
    tl_expect(c, "POST", Q, FULL,
              ONE("SELECT count(*) FROM sqlite_master AS m, pragma_foreign_key_list(m.name) AS f "
                  "WHERE m.type = 'table' AND lower(substr(f.\\\"table\\\", 1, 6)) = '_lith_'"),
              200, "[[0]]");
    tl_expect(c, "POST", Q, FULL,
              ONE("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master WHERE type = 'table' "
                  "AND lower(substr(name, 1, 6)) <> '_lith_' ORDER BY name)"),
              200, "[[\"fkc,fkp,pt,t,u\"]]");
    tl_expect(c, "POST", Q, FULL, ONE("SELECT count(*) FROM pragma_table_info('pt')"), 200, "[[2]]");
    tl_expect(c, "POST", Q, FULL, ONE("SELECT \\\"table\\\" FROM pragma_foreign_key_list('fkc')"), 200,
              "[[\"fkp\"]]");
  }
  /* The reproduction of #32 on --dqlite: after the attacks, a plain write
   * answers 200 at once (a broken _lith_batches made each wait out
   * --dqlite-failover-ms, 3 s, and answer 503), and its batch is fenced. */
  int64_t fenced = read_int(&dq, "SELECT count(*) FROM _lith_batches");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tl_expect(&dq, "POST", DO, FULL, ONE("INSERT INTO t(v) VALUES (1)"), 200, "\"changes\":1");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int64_t ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  print_message("a write after the attacks on --dqlite: %lld ms\n", (long long)ms);
  assert_true(ms < 2500);
  assert_true(read_int(&dq, "SELECT count(*) FROM _lith_batches") > fenced);
  tl_expect(&dq, "POST", DO, FULL, ONE("DELETE FROM t"), 200, "\"changes\":1");
}

/* lithd --dqlite in front of the node, as group_setup starts it. */
static void start_dq(void) {
  tl_start(&dq, "dq", TL_NO_DB,
           TL_ARGS("--dqlite", node.address, "--schema", "schema.sql", "--max-rows", "100", "--max-run-ms",
                   RUN_MS, "--dqlite-failover-ms", "3000", "--auth-jwt-key-file", "jwt.pem"));
}

/* One request's status (its body printed), its time in ms (ms may be
 * NULL), and whether its body has `has` (NULL: not asked). */
static int post_has(const struct tl_child *c, const char *path, const char *sql, int64_t *ms, const char *has,
                    int *found) {
  json_t *body = json_pack("{s:[{s:s}]}", "statements", "sql", sql);
  char *text = json_dumps(body, JSON_COMPACT);
  struct tl_resp r;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tl_http(c, "POST", path, FULL, text, &r);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (ms != NULL)
    *ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  print_message("  %s: %d %.300s\n", sql, r.status, r.body ? r.body : "");
  if (has != NULL)
    *found = r.body != NULL && strstr(r.body, has) != NULL;
  int status = r.status;
  tl_resp_free(&r);
  free(text);
  json_decref(body);
  return status;
}

static int post_status(const struct tl_child *c, const char *path, const char *sql, int64_t *ms) {
  return post_has(c, path, sql, ms, NULL, NULL);
}

/* A trigger on a table of the client's whose body writes a _lith_ table
 * when it fires. On a local file SQLite authorizes a trigger's body where
 * it fires, and lith's rule refuses the write that fires it (403). On
 * --dqlite no client makes a trigger today (the dqlite writer takes one
 * statement per text, and a trigger's body holds a ';'); were one made, the
 * vetting's copy of the schema would have to hold it for the same refusal.
 * On either store: the trigger is not there, or the write that fires it is
 * refused, and lith's rows stay. */
static void test_trigger_cannot_write_lith_tables(void **state) {
  (void)state;
  const struct tl_child *both[] = {&local, &dq};
  for (int k = 0; k < 2; k++) {
    const struct tl_child *c = both[k];
    int64_t before = read_int(c, "SELECT count(*) FROM _lith_batches");
    int made = post_status(
        c, DO, "CREATE TRIGGER trg AFTER INSERT ON pt BEGIN DELETE FROM _lith_batches; END", NULL);
    int64_t there = read_int(c, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'");
    print_message("%s store: CREATE TRIGGER answered %d; triggers: %lld\n", k == 0 ? "local" : "dqlite", made,
                  (long long)there);
    assert_int_equal(made == 200, there == 1);
    int found = 0;
    int fired = post_has(c, DO, "INSERT INTO pt(a, b) VALUES (1, 2)", NULL, LITH_OWN, &found);
    if (there) {
      assert_int_equal(fired, 403);
      assert_true(found);
      tl_expect(c, "POST", DO, FULL, ONE("DROP TRIGGER trg"), 200, NULL);
    } else {
      assert_int_equal(fired, 200);
    }
    assert_true(read_int(c, "SELECT count(*) FROM _lith_batches") >= before);
    tl_expect(c, "POST", DO, FULL, ONE("DELETE FROM pt"), 200, NULL);
  }
}

/* #32's outage, whole, on --dqlite. A client's table whose foreign key
 * names _lith_batches, holding the id of a batch row old enough to be
 * pruned (one the writer fenced keep_s = 600 s ago: planted on the cluster,
 * as time would leave it; lithd has no option for keep_s), made the
 * writer's clean-up (DELETE FROM _lith_batches WHERE time < now - keep_s,
 * in the first batch of a writer and every 64th) fail "FOREIGN KEY
 * constraint failed": the batch failed, the writer took it for a lost
 * leader, and every write answered 503 after --dqlite-failover-ms, after a
 * restart from the first write. A deferred key onto a column not unique
 * failed every batch at once ("foreign key mismatch"). Now both keys are
 * refused; after a restart the clean-up runs (the old row goes) and a
 * plain write answers 200 at once. */
static void test_fk_onto_lith_cannot_stop_writes(void **state) {
  (void)state;
  char err[256];
  uint32_t db = 0;
  lith__dq_conn *c =
      t_leader_conn(node.address, "main", "SELECT count(*) FROM _lith_batches", 10000, &db, err, sizeof err);
  if (c == NULL)
    fail_msg("the cluster: %s", err);
  assert_int_equal(lith__dq_exec_sql(c, db, "INSERT INTO _lith_batches(id, time, lost) VALUES (42, 1000, 0)",
                                     NULL, 0, NULL),
                   LITH_DQ_OK);
  int made = post_status(&dq, DO, "CREATE TABLE c(x REFERENCES _lith_batches(id))", NULL);
  int filled = post_status(&dq, DO, "INSERT INTO c SELECT id FROM _lith_batches WHERE id = 42", NULL);
  /* a new writer: its first batch cleans up */
  assert_int_equal(tl_stop(&dq, SIGTERM, 10000), 0);
  start_dq();
  int64_t ms = 0;
  int wrote = post_status(&dq, DO, "INSERT INTO t(v) VALUES (7)", &ms);
  print_message("the first write after a restart: %d in %lld ms\n", wrote, (long long)ms);
  assert_int_equal(wrote, 200);
  assert_true(ms < 2500);
  int64_t left = -1;
  assert_int_equal(
      t_query_int(c, db, "SELECT count(*) FROM _lith_batches WHERE id = 42", &left, err, sizeof err), 0);
  assert_int_equal(left, 0); /* the clean-up ran */
  assert_int_equal(made, 403);
  assert_int_equal(filled, 400); /* no such table */
  /* the mismatch: no restart needed */
  int deferred = post_status(
      &dq, DO, "CREATE TABLE c2(x REFERENCES _lith_batches(time) DEFERRABLE INITIALLY DEFERRED)", NULL);
  wrote = post_status(&dq, DO, "DELETE FROM t", &ms);
  print_message("a write after it: %d in %lld ms\n", wrote, (long long)ms);
  assert_int_equal(wrote, 200);
  assert_true(ms < 2500);
  assert_int_equal(deferred, 403);
  lith__dq_close(c);
}

/* The key of --auth-jwt-key-file and the rows' tokens (tokens[]). */
static int make_tokens(void) {
  EVP_PKEY *key = mint_key(), *other = mint_key();
  if (key == NULL || other == NULL)
    return -1;
  char *pem = mint_pub_pem(key), exp[64], *pad = malloc(LITHD_JWT_PAD + 32);
  write_file("jwt.pem", pem);
  snprintf(exp, sizeof exp, "{\"exp\":%lld}", (long long)time(NULL) - 3600);
  snprintf(pad, LITHD_JWT_PAD + 32, "{\"pad\":\"%0*d\"}", LITHD_JWT_PAD, 0);
  char *ro = mint(key, "{\"a\":\"ro\"}"), *rw = mint(key, "{\"a\":\"rw\"}");
  /* ro's header and signature around rw's payload */
  char *swapped = malloc(strlen(ro) + strlen(rw) + 1);
  const char *r1 = strchr(rw, '.'), *r2 = strrchr(rw, '.');
  sprintf(swapped, "%.*s%.*s%s", (int)(strchr(ro, '.') - ro), ro, (int)(r2 - r1), r1, strrchr(ro, '.'));
  char *raw[N_TOKENS] = {mint(key, "{}"),
                         ro,
                         mint_none("{\"a\":\"rw\"}"),
                         mint_hs256(pem, "{\"a\":\"rw\"}"),
                         mint(other, "{}"),
                         mint(key, exp),
                         swapped,
                         mint(key, "{\"id\":\"elsewhere\"}"),
                         mint(key, pad)};
  for (size_t i = 0; i < N_TOKENS; i++) {
    tokens[i] = malloc(strlen(raw[i]) + 8);
    sprintf(tokens[i], "Bearer %s", raw[i]);
    free(raw[i]);
  }
  free(rw);
  free(pem);
  free(pad);
  EVP_PKEY_free(key);
  EVP_PKEY_free(other);
  return 0;
}

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  write_file("schema.sql", schema_sql);
  if (make_tokens() != 0)
    return -1;
  unlink("vacuumed.db");
  t_node_init(&node, 1);
  if (t_node_start(&node, NULL, 10000) != 0)
    return -1;
  sqlite3 *h = NULL; /* the local file with the cluster's own tables (lith_tables) */
  tl_remove_db("local.db");
  if (sqlite3_open("local.db", &h) != SQLITE_OK ||
      sqlite3_exec(h, lith_tables, NULL, NULL, NULL) != SQLITE_OK) {
    print_error("local.db: %s\n", sqlite3_errmsg(h));
    sqlite3_close(h);
    return -1;
  }
  sqlite3_close(h);
  tl_start(&local, "local", TL_KEEP_DB,
           TL_ARGS("--schema", "schema.sql", "--max-rows", "100", "--max-run-ms", RUN_MS,
                   "--auth-jwt-key-file", "jwt.pem"));
  start_dq();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < N_TOKENS; i++)
    free(tokens[i]);
  if (local.pid > 0)
    tl_stop(&local, SIGTERM, 10000);
  if (dq.pid > 0)
    tl_stop(&dq, SIGTERM, 10000);
  if (node.pid > 0)
    t_node_stop(&node, SIGTERM, 5000);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_attack_on_both_stores),
      cmocka_unit_test(test_nothing_changed),
      cmocka_unit_test(test_trigger_cannot_write_lith_tables),
      cmocka_unit_test(test_fk_onto_lith_cannot_stop_writes),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
