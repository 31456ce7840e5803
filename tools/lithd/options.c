/*
 * lithd options — see options.h.
 *
 * Design: one table, lithd_opt_table, holds every option: its name, its
 * argument, its default, its help, the modes that accept it, its config
 * key and how its argument is read. Everything else reads the table:
 *
 *   - the command line: getopt_long's `struct option` array is built from
 *     it (a row's index is its getopt value, past OPT_BASE);
 *   - the config file: each "key = value" line is looked up by key and
 *     turned into "--name=value", then run through the same getopt_long
 *     loop as the command line, so both take the same options with the
 *     same checks and messages (a config error names the file and line);
 *   - the defaults: rows with def_applied have `def` parsed by their own
 *     setter before the sources are read, so --help's default is the value;
 *   - --help: usage() prints each row, wrapped, with its default and the
 *     modes that refuse it;
 *   - the mode checks: check_modes() walks the rows given against the mode
 *     (options.h).
 *
 * A new option is one row here (and its field in lithd_opts);
 * tools/lithd/test/test_options.c walks the table to hold the rest to it.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lith.h"
#include "log.h"
#include "textfile.h"

#define CONFIG_MAX (1 << 20)
/* getopt_long's value of row i: OPT_BASE + i (past every char). */
#define OPT_BASE 256
/* --help: the column of the help text, the width of a line. */
#define HELP_COL 26
#define HELP_WIDTH 79

#define STR_(x) #x
#define STR(x) STR_(x)

/* One source being read. */
struct lithd_opt_pass {
  lithd_opts *o;
  const char *base;     /* the directory of relative paths (ending in '/'); NULL: as given */
  int source;           /* 0: the table's defaults, 1: the config file, 2: the command line */
  unsigned char *given; /* per row: given by a source (a flag: only while set true) */
};
typedef struct lithd_opt_pass pass;

/* The field a row's generic setter writes. */
#define FIELD(p, r, T) ((T *)(void *)((char *)(p)->o + (r)->field))
enum { T_INT, T_I64, T_SIZE };

/* Setters: 0, 1 (answered: --help, --version) or 2 (refused, after a
 * message). */
static int set_num(pass *p, const lithd_opt *r, const char *arg);
static int set_bool(pass *p, const lithd_opt *r, const char *arg);
static int set_true(pass *p, const lithd_opt *r, const char *arg);
static int set_string(pass *p, const lithd_opt *r, const char *arg);
static int set_file_path(pass *p, const lithd_opt *r, const char *arg);
static int set_db(pass *p, const lithd_opt *r, const char *arg);
static int set_default(pass *p, const lithd_opt *r, const char *arg);
static int set_listen(pass *p, const lithd_opt *r, const char *arg);
static int set_sync(pass *p, const lithd_opt *r, const char *arg);
static int set_checkpoint(pass *p, const lithd_opt *r, const char *arg);
static int set_file_mode(pass *p, const lithd_opt *r, const char *arg);
static int set_schema(pass *p, const lithd_opt *r, const char *arg);
static int set_commands(pass *p, const lithd_opt *r, const char *arg);
static int set_max_memory(pass *p, const lithd_opt *r, const char *arg);
static int set_log_level(pass *p, const lithd_opt *r, const char *arg);
static int set_log_format(pass *p, const lithd_opt *r, const char *arg);
static int set_dqlite_db(pass *p, const lithd_opt *r, const char *arg);
static int set_config(pass *p, const lithd_opt *r, const char *arg);
static int set_help(pass *p, const lithd_opt *r, const char *arg);
static int set_version(pass *p, const lithd_opt *r, const char *arg);

/* A number in [lo, hi] into a field of type t; a string, a path (relative
 * to the config file's directory when it comes from there), a flag. */
#define NUM(f, t, l, h) .set = set_num, .field = offsetof(lithd_opts, f), .type = (t), .lo = (l), .hi = (h)
#define STRING(f) .set = set_string, .field = offsetof(lithd_opts, f)
#define PATH(f) .set = set_file_path, .field = offsetof(lithd_opts, f)
#define FLAG(f) .arg = optional_argument, .set = set_bool, .field = offsetof(lithd_opts, f)

#define LOCAL (LITHD_MODE_FILE | LITHD_MODE_RESTORE) /* not --dqlite */

const lithd_opt lithd_opt_table[] = {
    {.name = "db",
     .arg = required_argument,
     .meta = "[NAME=]PATH",
     .key = "db",
     .set = set_db,
     .help = "the database file (created if missing), named \"" LITHD_DB_MAIN "\"; NAME=PATH, given once "
             "per database: one of several, each its own writer, served at /v1/db/NAME/... (NAME: 1-64 "
             "of A-Z a-z 0-9 _ -)",
     .modes = LOCAL,
     .why = "the database is the cluster's"},
    {.name = "default",
     .arg = required_argument,
     .meta = "NAME",
     .key = "default",
     .set = set_default,
     .def = "none: those routes refuse",
     .help = "the database of /v1/do, /v1/query, ... when several are served",
     .modes = LOCAL,
     .why = "one database: --dqlite-db"},
    {.name = "listen",
     .arg = required_argument,
     .meta = "HOST:PORT",
     .key = "listen",
     .set = set_listen,
     .def = LITHD_DEFAULT_HOST ":" STR(LITHD_DEFAULT_PORT),
     .def_applied = 1,
     .help = "TCP address (port 0: any free); a HOST not loopback needs --token-file or --auth-jwt-key-file",
     .modes = LITHD_MODE_ALL},
    {.name = "unix",
     .arg = required_argument,
     .meta = "PATH",
     .key = "unix",
     PATH(unix_path),
     .help = "listen on a Unix socket (mode 0600); TCP then only with --listen",
     .modes = LITHD_MODE_ALL},
    {.name = "synchronous",
     .arg = required_argument,
     .meta = "normal|full",
     .key = "synchronous",
     .set = set_sync,
     .def = "normal",
     .def_applied = 1,
     .help = "full: every commit is fsynced before anyone is answered; normal: the WAL is fsynced at "
             "checkpoints (a power loss may lose the latest batches, whole ones)",
     .modes = LITHD_MODE_ALL},
    {.name = "checkpoint",
     .arg = required_argument,
     .meta = "writer|auto|external",
     .key = "checkpoint",
     .set = set_checkpoint,
     .def = "writer",
     .def_applied = 1,
     .help = "who checkpoints the WAL: lith's own thread, SQLite inside a COMMIT, or never lithd (a "
             "replicator such as Litestream)",
     .modes = LOCAL,
     .why = "each node checkpoints its own WAL"},
    {.name = "checkpoint-pages",
     .arg = required_argument,
     .meta = "N",
     .key = "checkpoint-pages",
     NUM(checkpoint_pages, T_INT, 1, 1 << 28),
     .def = "1000",
     .help = "WAL pages that start a checkpoint; with external, lithd warns once the WAL passes 4 x N",
     .modes = LOCAL,
     .why = "each node checkpoints its own WAL"},
    {.name = "wal-hold-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "wal-hold-ms",
     NUM(wal_hold_ms, T_INT, 0, 60000),
     .def = "100",
     .def_applied = 1,
     .help = "readers always reading keep the WAL from starting over: once it holds 4 x "
             "--checkpoint-pages, new reads wait while the running ones end (at most this long, else "
             "the hold gives up) and the WAL is copied whole (0: never; the -wal file then grows while "
             "reads never pause)",
     .modes = LOCAL,
     .why = "each node checkpoints its own WAL"},
    {.name = "litestream",
     .key = "litestream",
     FLAG(litestream),
     .help =
         "run beside Litestream, which replicates the WAL: --checkpoint external (lithd never "
         "checkpoints, not even at exit) and a " STR(
             LITHD_LITESTREAM_BUSY_MS) " ms busy timeout, "
                                       "so Litestream's brief write locks delay a batch, never fail it; "
                                       "--checkpoint-pages " STR(
                                           LITHD_LITESTREAM_CKPT_PAGES) " unless given (the WAL warning past "
                                                                        "Litestream's own "
                                                                        "forced checkpoint); refused with "
                                                                        "--checkpoint writer or auto",
     .modes = LOCAL,
     .why = "Raft replicates; there is no local WAL"},
    {.name = "readers",
     .arg = required_argument,
     .meta = "N",
     .key = "readers",
     NUM(readers, T_INT, 1, 1024),
     .def = "CPUs",
     .help = "read connections for /v1/query, per database",
     .modes = LITHD_MODE_ALL},
    {.name = "cache-kib",
     .arg = required_argument,
     .meta = "KIB",
     .key = "cache-kib",
     NUM(cache_kib, T_INT, 64, 1 << 24),
     .def = "16384",
     .help = "SQLite's page cache of each connection (the writer's and every reader's), KiB",
     .modes = LOCAL,
     .why = "the cluster's nodes keep the pages"},
    {.name = "mmap-mib",
     .arg = required_argument,
     .meta = "MIB",
     .key = "mmap-mib",
     NUM(mmap_mib, T_I64, 0, (long long)1 << 20),
     .def = "0",
     .help = "MiB of the database file each connection reads through mmap (SQLite caps it at its "
             "build's limit); 0: none, so an I/O error stays an error instead of a SIGBUS",
     .modes = LOCAL,
     .why = "the cluster's nodes keep the pages"},
    {.name = "max-batch",
     .arg = required_argument,
     .meta = "N",
     .key = "max-batch",
     NUM(max_batch, T_INT, 1, 1 << 20),
     .def = "1024",
     .help = "most commands in one transaction",
     .modes = LITHD_MODE_ALL},
    {.name = "max-queue",
     .arg = required_argument,
     .meta = "N",
     .key = "max-queue",
     NUM(max_queue, T_INT, 1, 1 << 24),
     .def = "65536",
     .help = "most commands queued for the writer",
     .modes = LITHD_MODE_ALL},
    {.name = "file-mode",
     .arg = required_argument,
     .meta = "MODE",
     .key = "file-mode",
     .set = set_file_mode,
     .def = "0600",
     .help = "permissions of a database or backup lithd creates, octal, at least 0600 (the -wal and -shm "
             "files follow it)",
     .modes = LOCAL,
     .why = "lithd creates no file"},
    {.name = "queue-wait-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "queue-wait-ms",
     NUM(queue_wait_ms, T_I64, 0, 3600 * 1000),
     .def = "2000",
     .def_applied = 1,
     .help = "how long a request waits for room in a full queue before 503 + Retry-After",
     .modes = LITHD_MODE_ALL},
    {.name = "schema",
     .arg = required_argument,
     .meta = "[NAME=]FILE",
     .key = "schema",
     .set = set_schema,
     .help = "SQL run once at startup as numbered migration steps (a line \"-- step\" starts the next; "
             "PRAGMA user_version counts the steps applied); NAME=: that database only, else every "
             "database",
     .modes = LITHD_MODE_ALL},
    {.name = "commands",
     .arg = required_argument,
     .meta = "[NAME=]FILE",
     .key = "commands",
     .set = set_commands,
     .help = "named commands (\"-- name: NAME\" then its SQL) for POST /v1/commands/NAME; NAME= as for "
             "--schema",
     .modes = LITHD_MODE_ALL},
    {.name = "only-named",
     .key = "only-named",
     FLAG(only_named),
     .help = "refuse raw SQL writes (/v1/do, /v1/batch): only named commands write",
     .modes = LITHD_MODE_ALL},
    {.name = "token-file",
     .arg = required_argument,
     .meta = "FILE",
     .key = "token-file",
     PATH(token_file),
     .help = "require \"Authorization: Bearer <token>\" (needed for a non-loopback --listen)",
     .modes = LITHD_MODE_ALL},
    {.name = "auth-jwt-key-file",
     .arg = required_argument,
     .meta = "FILE",
     .key = "auth-jwt-key-file",
     PATH(auth_jwt_key_file),
     .help = "accept sqld's JWTs (EdDSA) signed by the Ed25519 public key(s) in FILE (PEM, or 32 bytes in "
             "URL-safe base64): full or read-only access, per database; with --token-file too",
     .modes = LITHD_MODE_ALL},
    {.name = "tls-cert",
     .arg = required_argument,
     .meta = "FILE",
     .key = "tls-cert",
     PATH(tls_cert),
     .help = "serve https (TLS 1.2+, HTTP/2 by ALPN) on the TCP listener with this PEM certificate and its "
             "chain (--unix stays cleartext); needs --tls-key",
     .modes = LITHD_MODE_ALL},
    {.name = "tls-key",
     .arg = required_argument,
     .meta = "FILE",
     .key = "tls-key",
     PATH(tls_key),
     .help = "the PEM private key of --tls-cert",
     .modes = LITHD_MODE_ALL},
    {.name = "allow-origin",
     .arg = required_argument,
     .meta = "LIST",
     .key = "allow-origin",
     STRING(allow_origins),
     .def = "none, so no web page can send requests",
     .help = "Origin values (comma-separated; * for any) a request may carry; others get 403",
     .modes = LITHD_MODE_ALL},
    {.name = "allow-host",
     .arg = required_argument,
     .meta = "LIST",
     .key = "allow-host",
     STRING(allow_hosts),
     .help = "Host names besides localhost and IP addresses that a lithd without --token-file answers on "
             "loopback (a proxy's name; others get 403: DNS rebinding)",
     .modes = LITHD_MODE_ALL},
    {.name = "backup-dir",
     .arg = required_argument,
     .meta = "DIR",
     .key = "backup-dir",
     PATH(backup_dir),
     .def = "none: backups off",
     .help = "POST /v1/backup writes new files here, never replacing one (made at start if missing, mode "
             "0700; its parent must exist)",
     .modes = LITHD_MODE_ALL},
    {.name = "max-body",
     .arg = required_argument,
     .meta = "BYTES",
     .key = "max-body",
     NUM(max_body, T_SIZE, 1, (long long)1 << 40),
     .def = "8 MiB",
     .help = "largest request body",
     .modes = LITHD_MODE_ALL},
    {.name = "max-statements",
     .arg = required_argument,
     .meta = "N",
     .key = "max-statements",
     NUM(max_statements, T_INT, 1, 1000000),
     .def = "10000",
     .help = "statements in one request",
     .modes = LITHD_MODE_ALL},
    {.name = "max-sql",
     .arg = required_argument,
     .meta = "BYTES",
     .key = "max-sql",
     NUM(max_sql, T_SIZE, 1, (long long)1 << 30),
     .def = "100000",
     .help = "SQL text of one statement",
     .modes = LITHD_MODE_ALL},
    {.name = "max-rows",
     .arg = required_argument,
     .meta = "N",
     .key = "max-rows",
     NUM(max_rows, T_I64, 1, LLONG_MAX),
     .def = "10000",
     .help = "rows in one answer of /v1 (a Hrana answer is bounded by its bytes alone)",
     .modes = LITHD_MODE_ALL},
    {.name = "max-result-mib",
     .arg = required_argument,
     .meta = "MIB",
     .key = "max-result-mib",
     NUM(max_result_mib, T_I64, 1, (long long)1 << 20),
     .def = "64",
     .help = "bytes in one answer: /v1's text and blobs; a Hrana pipeline's whole answer, every cell "
             "counted (sqld's --max-response-size)",
     .modes = LITHD_MODE_ALL},
    {.name = "max-run-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "max-run-ms",
     NUM(max_run_ms, T_I64, 1, (long long)24 * 3600 * 1000),
     .def = "5000",
     .help = "time to run one request's statements",
     .modes = LITHD_MODE_ALL},
    {.name = "tx-idle-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "tx-idle-ms",
     NUM(tx_idle_ms, T_I64, 1, (long long)3600 * 1000),
     .def = "5000",
     .help = "an interactive transaction idle longer while another waits for it is rolled back",
     .modes = LITHD_MODE_ALL},
    {.name = "tx-max-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "tx-max-ms",
     NUM(tx_max_ms, T_I64, 1, (long long)3600 * 1000),
     .def = "10000",
     .help = "an interactive transaction open longer is rolled back (it holds the writer)",
     .modes = LITHD_MODE_ALL},
    {.name = "stream-idle-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "stream-idle-ms",
     NUM(stream_idle_ms, T_I64, 1, (long long)24 * 3600 * 1000),
     .def = "10000",
     .help = "a Hrana stream (baton) idle longer is closed",
     .modes = LITHD_MODE_ALL},
    /* SQLite's own ceiling for SQLITE_LIMIT_LENGTH is 1e9. */
    {.name = "max-value-bytes",
     .arg = required_argument,
     .meta = "BYTES",
     .key = "max-value-bytes",
     NUM(max_value_bytes, T_INT, 1024, 1000000000),
     .def = "1 MiB",
     .help = "largest string or blob SQL may make or read (SQLITE_LIMIT_LENGTH; bounds one LIKE's cost)",
     .modes = LITHD_MODE_ALL},
    {.name = "max-like-pattern",
     .arg = required_argument,
     .meta = "BYTES",
     .key = "max-like-pattern",
     NUM(max_like_pattern, T_INT, 1, 50000),
     .def = "50",
     .help = "longest LIKE or GLOB pattern",
     .modes = LITHD_MODE_ALL},
    {.name = "max-memory-mib",
     .arg = required_argument,
     .meta = "MIB",
     .key = "max-memory-mib",
     .set = set_max_memory,
     .field = offsetof(lithd_opts, max_memory_mib),
     .type = T_I64,
     .lo = 0,
     .hi = (long long)1 << 30,
     .def = "1024",
     .def_applied = 1,
     .help = "SQLite's heap, all connections; past it a statement fails \"out of memory\", lithd lives; "
             "0: no ceiling, else at least 16",
     .modes = LITHD_MODE_ALL},
    {.name = "stop-grace-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "stop-grace-ms",
     NUM(stop_grace_ms, T_I64, 0, (long long)3600 * 1000),
     .def = "10000",
     .def_applied = 1,
     .help = "on SIGTERM, how long requests and downloads running may finish; then reads are "
             "interrupted and downloads cut (writes accepted are always run and answered)",
     .modes = LITHD_MODE_ALL},
    {.name = "request-timeout-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "request-timeout-ms",
     NUM(request_timeout_ms, T_I64, 1, (long long)3600 * 1000),
     .def = "10000",
     .def_applied = 1,
     .help = "close a connection that takes longer to send a request (or to finish its TLS "
             "handshake), or that stays idle between requests, for this long",
     .modes = LITHD_MODE_ALL},
    {.name = "write-timeout-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "write-timeout-ms",
     NUM(write_timeout_ms, T_I64, 0, (long long)24 * 3600 * 1000),
     .def = "30000",
     .def_applied = 1,
     .help = "close a connection whose client takes none of the bytes waiting for it for this long "
             "(reset): a client that stops reading frees what it held, a download's slot included; "
             "0: never",
     .modes = LITHD_MODE_ALL},
    {.name = "max-answer-mib",
     .arg = required_argument,
     .meta = "MIB",
     .key = "max-answer-mib",
     NUM(max_answer_mib, T_I64, 1, (long long)1 << 20),
     .def = "512",
     .def_applied = 1,
     .help = "the answers being built or sent, all databases together; a read or batch that would "
             "pass it is answered 503 busy (retry later), never the OOM killer",
     .modes = LITHD_MODE_ALL},
    {.name = "log-level",
     .arg = required_argument,
     .meta = "error|warn|info|debug",
     .key = "log-level",
     .set = set_log_level,
     .def = "info",
     .def_applied = 1,
     .help = "debug logs every request; 5xx are logged at warn",
     .modes = LITHD_MODE_ALL},
    {.name = "log",
     .arg = required_argument,
     .meta = "FILE",
     .key = "log",
     PATH(log_file),
     .def = "stderr",
     .help = "log there (SIGHUP reopens it)",
     .modes = LITHD_MODE_ALL},
    {.name = "log-format",
     .arg = required_argument,
     .meta = "text|json",
     .key = "log-format",
     .set = set_log_format,
     .def = "text",
     .def_applied = 1,
     .help = "json: one object per line (ts, level, msg; a request's method, path, status, us, bytes, "
             "client)",
     .modes = LITHD_MODE_ALL},
    {.name = "config",
     .arg = required_argument,
     .meta = "FILE",
     .set = set_config,
     .help = "read options from FILE, one \"key = value\" line each (# comments; relative paths from the "
             "file's directory); the command line wins",
     .modes = LITHD_MODE_ALL},
    {.name = "restore",
     .arg = required_argument,
     .meta = "FROM",
     .key = "restore",
     PATH(restore),
     .help = "put the backup FROM in place of --db, then exit: it must pass PRAGMA integrity_check; "
             "refused while a lithd serves --db, or if --db exists (unless --force); with --dqlite: load "
             "FROM (any SQLite file) into the cluster's database, which must be empty",
     .modes = LITHD_MODE_ALL},
    {.name = "force",
     .arg = no_argument,
     .key = "force",
     .set = set_true,
     .field = offsetof(lithd_opts, force),
     .help = "replace an existing --db",
     .modes = LITHD_MODE_RESTORE,
     .needs = "--restore FROM --db PATH only (a cluster's database is never replaced: restore into a new "
              "cluster, or another --dqlite-db)"},
    {.name = "dqlite",
     .arg = required_argument,
     .meta = "ADDR[,ADDR...]",
     .key = "dqlite",
     STRING(dqlite),
     .help = "instead of --db: the database lives on a dqlite cluster (lith-node); commands are batched "
             "into one Raft transaction on its leader, answered after a majority stored it; reads go to "
             "the leader",
     .modes = LITHD_MODE_DQLITE | LITHD_MODE_DQLITE_RESTORE},
    {.name = "dqlite-db",
     .arg = required_argument,
     .meta = "NAME",
     .key = "dqlite-db",
     .set = set_dqlite_db,
     .def = "\"" LITHD_DB_MAIN "\"",
     .help = "the dqlite database",
     .modes = LITHD_MODE_DQLITE | LITHD_MODE_DQLITE_RESTORE,
     .needs = "--dqlite ADDR[,ADDR...]"},
    /* Taken, and unused, without --dqlite. */
    {.name = "dqlite-failover-ms",
     .arg = required_argument,
     .meta = "MS",
     .key = "dqlite-failover-ms",
     NUM(dqlite_failover_ms, T_INT, 100, 3600000),
     .def = "10000",
     .help = "how long to look for a leader before a command is answered 503",
     .modes = LITHD_MODE_ALL},
    {.name = "help",
     .arg = no_argument,
     .set = set_help,
     .help = "this text, then exit",
     .modes = LITHD_MODE_ALL},
    {.name = "version",
     .arg = no_argument,
     .set = set_version,
     .help = "lithd's version, then exit",
     .modes = LITHD_MODE_ALL},
};

#define N_OPTS ((int)(sizeof lithd_opt_table / sizeof lithd_opt_table[0]))
const int lithd_opt_count = N_OPTS;

/* The mode's own option, named by a refusal. */
static const char *mode_option(unsigned mode) {
  return mode == LITHD_MODE_DQLITE || mode == LITHD_MODE_DQLITE_RESTORE ? "--dqlite"
         : mode == LITHD_MODE_RESTORE                                   ? "--restore"
                                                                        : NULL;
}

/* ---- --help ------------------------------------------------------------- */

/* `text` from column `col` (the cursor there already), wrapped at
 * HELP_WIDTH, continuation lines indented to `indent`. */
static void put_wrapped(FILE *f, int col, int indent, const char *w) {
  int start = 1;
  while (*w != '\0') {
    int n = (int)strcspn(w, " ");
    if (!start && col + 1 + n > HELP_WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
      start = 1;
    }
    if (!start) {
      fputc(' ', f);
      col++;
    }
    fwrite(w, 1, (size_t)n, f);
    col += n;
    start = 0;
    for (w += n; *w == ' '; w++) {
    }
  }
  fputc('\n', f);
}

/* Append to text[0..cap) at n; returns the new length (at most cap - 1). */
static int add(char *text, size_t cap, int n, const char *fmt, ...) {
  va_list ap;
  int k;
  va_start(ap, fmt);
  k = vsnprintf(text + n, cap - (size_t)n, fmt, ap);
  va_end(ap);
  if (k < 0)
    return n;
  return (size_t)(n + k) >= cap ? (int)cap - 1 : n + k;
}

static void usage(FILE *f) {
  char text[1024];
  int i, n = 0, left = 0;

  fprintf(f, "usage: lithd --db PATH [options]\n"
             "       lithd --db NAME=PATH --db NAME=PATH ... [options]\n"
             "       lithd --dqlite ADDR[,ADDR...] [--dqlite-db NAME] [options]\n"
             "       lithd --restore FROM --db PATH [--force]\n"
             "       lithd --dqlite ADDR[,ADDR...] [--dqlite-db NAME] --restore FROM\n");
  /* What the config file does not take. */
  for (i = 0; i < N_OPTS; i++)
    left += lithd_opt_table[i].key == NULL;
  n = add(text, sizeof text, n, "Every option but");
  for (i = 0; i < N_OPTS; i++)
    if (lithd_opt_table[i].key == NULL) {
      left--;
      n = add(text, sizeof text, n, " --%s%s", lithd_opt_table[i].name,
              left > 1    ? ","
              : left == 1 ? " and"
                          : "");
    }
  add(text, sizeof text, n,
      " can also be a line \"name = value\" of the --config file (a flag: \"name\" alone, or "
      "\"name = BOOL\"). BOOL: true or false (yes, no, 1, 0); a flag given alone is true.");
  put_wrapped(f, 0, 0, text);
  for (i = 0; i < N_OPTS; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    int col;

    n = 0;
    n = add(text, sizeof text, n, "%s", r->help);
    if (r->def != NULL)
      n = add(text, sizeof text, n, " (default %s)", r->def);
    if (r->key != NULL && strcmp(r->key, r->name) != 0)
      n = add(text, sizeof text, n, "; its config file key: %s", r->key);
    if (r->needs != NULL)
      n = add(text, sizeof text, n, "; goes with %s", r->needs);
    for (unsigned m = LITHD_MODE_DQLITE; r->why != NULL && m <= LITHD_MODE_RESTORE; m <<= 1)
      if ((r->modes & m) == 0)
        n = add(text, sizeof text, n, "; not with %s (%s)", mode_option(m), r->why);
    col = fprintf(f, "  --%s%s%s", r->name,
                  r->arg == optional_argument ? "[=BOOL]"
                  : r->meta != NULL           ? " "
                                              : "",
                  r->arg != optional_argument && r->meta != NULL ? r->meta : "");
    if (col >= HELP_COL) { /* a long one: the text on the next line */
      fputc('\n', f);
      col = 0;
    }
    fprintf(f, "%*s", HELP_COL - col, "");
    col = HELP_COL;
    put_wrapped(f, col, HELP_COL, text);
  }
}

/* ---- Reading the values -------------------------------------------------- */

/* "HOST:PORT", "[V6]:PORT" or ":PORT". Returns 0 or -1. */
static int parse_listen(const char *s, char *host, size_t hostsz, int *port) {
  const char *colon;
  const char *h = s;
  size_t hlen;
  char *end;
  long p;

  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (close == NULL || close[1] != ':')
      return -1;
    h = s + 1;
    hlen = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(s, ':');
    if (colon == NULL)
      return -1;
    hlen = (size_t)(colon - s);
  }
  if (hlen >= hostsz)
    return -1;
  if (hlen == 0) {
    snprintf(host, hostsz, "%s", LITHD_DEFAULT_HOST);
  } else {
    memcpy(host, h, hlen);
    host[hlen] = '\0';
  }
  errno = 0;
  p = strtol(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || p < 0 || p > 65535)
    return -1;
  *port = (int)p;
  return 0;
}

static int is_loopback_host(const char *h) { return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0; }

/* "true", "yes", "1" or no value (a bare --name) set *out to 1; "false",
 * "no", "0" to 0. Returns 0 or -1 (after a message). */
static int parse_bool(const char *opt, const char *s, int *out) {
  if (s == NULL || strcmp(s, "true") == 0 || strcmp(s, "yes") == 0 || strcmp(s, "1") == 0)
    *out = 1;
  else if (strcmp(s, "false") == 0 || strcmp(s, "no") == 0 || strcmp(s, "0") == 0)
    *out = 0;
  else {
    fprintf(stderr, "lithd: --%s takes true or false, got \"%s\"\n", opt, s);
    return -1;
  }
  return 0;
}

/* A whole number in [lo, hi]; 0 or -1 after a message. */
static int parse_num(const char *opt, const char *s, long long lo, long long hi, long long *out) {
  char *end;
  long long v;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    fprintf(stderr, "lithd: --%s wants a whole number from %lld to %lld, got \"%s\"\n", opt, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* Replace *dst with a copy of s; a relative s is taken from `base` (a
 * directory ending in '/', or NULL for the current one). */
static int set_path(char **dst, const char *s, const char *base) {
  char *p;
  if (base != NULL && s[0] != '/') {
    size_t n = strlen(base) + strlen(s) + 1;
    if ((p = malloc(n)) == NULL)
      return -1;
    snprintf(p, n, "%s%s", base, s);
  } else if ((p = strdup(s)) == NULL) {
    return -1;
  }
  free(*dst);
  *dst = p;
  return 0;
}

/* Whether s[0..n) is a database name: 1-LITHD_DB_NAME_MAX of [A-Za-z0-9_-]. */
static int is_db_name(const char *s, size_t n) {
  if (n == 0 || n > LITHD_DB_NAME_MAX)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '_' || s[i] == '-'))
      return 0;
  return 1;
}

/* Split "NAME=REST" (NAME a database name) into a malloc'd *name and *rest
 * pointing into s; anything else: *name NULL, *rest s. Returns 0 or -1 (no
 * memory). */
static int split_name(const char *s, char **name, const char **rest) {
  const char *eq = strchr(s, '=');
  *name = NULL;
  *rest = s;
  if (eq == NULL || !is_db_name(s, (size_t)(eq - s)))
    return 0;
  if ((*name = strndup(s, (size_t)(eq - s))) == NULL)
    return -1;
  *rest = eq + 1;
  return 0;
}

static int same_name(const char *a, const char *b) {
  return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

/* --db [NAME=]PATH from `source`: a new entry, or the replacement of one
 * an earlier source gave. Returns 0, or 2 after a message. */
static int add_db(lithd_opts *o, const char *arg, const char *base, int source) {
  char *name = NULL;
  const char *path;
  lithd_opts_db *d = NULL;

  if (split_name(arg, &name, &path) != 0)
    goto nomem;
  if (name == NULL && (name = strdup(LITHD_DB_MAIN)) == NULL)
    goto nomem;
  if (*path == '\0') {
    fprintf(stderr, "lithd: --db %s: no path after the name\n", arg);
    free(name);
    return 2;
  }
  for (int i = 0; i < o->n_dbs; i++)
    if (strcmp(o->dbs[i].name, name) == 0)
      d = &o->dbs[i];
  if (d != NULL && d->source == source) {
    fprintf(stderr,
            "lithd: --db: the database \"%s\" is given twice (several databases need a name each: "
            "--db NAME=PATH)\n",
            name);
    free(name);
    return 2;
  }
  if (d == NULL) {
    lithd_opts_db *grown = realloc(o->dbs, (size_t)(o->n_dbs + 1) * sizeof *grown);
    if (grown == NULL)
      goto nomem;
    o->dbs = grown;
    d = &o->dbs[o->n_dbs++];
    memset(d, 0, sizeof *d);
    d->name = name;
  } else {
    free(name);
  }
  d->source = source;
  if (set_path(&d->path, path, base) == 0)
    return 0;
  fprintf(stderr, "lithd: out of memory\n");
  return 2;
nomem:
  free(name);
  fprintf(stderr, "lithd: out of memory\n");
  return 2;
}

/* --schema / --commands [NAME=]FILE, as add_db. */
static int add_file(lithd_opts *o, int commands, const char *arg, const char *base, int source) {
  const char *opt = commands ? "commands" : "schema";
  char *name = NULL;
  const char *path;
  lithd_opts_file *f = NULL;

  if (split_name(arg, &name, &path) != 0)
    goto nomem;
  if (*path == '\0') {
    fprintf(stderr, "lithd: --%s %s: no file after the name\n", opt, arg);
    free(name);
    return 2;
  }
  for (int i = 0; i < o->n_files; i++)
    if (o->files[i].commands == commands && same_name(o->files[i].name, name))
      f = &o->files[i];
  if (f != NULL && f->source == source) {
    if (name != NULL)
      fprintf(stderr, "lithd: --%s is given twice for the database \"%s\"\n", opt, name);
    else
      fprintf(stderr, "lithd: --%s FILE is given twice (one for a database: --%s NAME=FILE)\n", opt, opt);
    free(name);
    return 2;
  }
  if (f == NULL) {
    lithd_opts_file *grown = realloc(o->files, (size_t)(o->n_files + 1) * sizeof *grown);
    if (grown == NULL)
      goto nomem;
    o->files = grown;
    f = &o->files[o->n_files++];
    memset(f, 0, sizeof *f);
    f->commands = commands;
    f->name = name;
  } else {
    free(name);
  }
  f->source = source;
  if (set_path(&f->path, path, base) != 0)
    goto nomem;
  return 0;
nomem:
  fprintf(stderr, "lithd: out of memory\n");
  return 2;
}

/* Give each database its --schema and --commands (its own, else the plain
 * one). Returns 0, or 2 after a message (a setting names no database). */
static int resolve_files(lithd_opts *o) {
  for (int i = 0; i < o->n_files; i++) {
    const lithd_opts_file *f = &o->files[i];
    int found = f->name == NULL;
    for (int k = 0; k < o->n_dbs; k++) {
      lithd_opts_db *d = &o->dbs[k];
      char **dst = f->commands ? &d->commands : &d->schema;
      if (f->name != NULL && strcmp(f->name, d->name) != 0)
        continue;
      found = 1;
      if (f->name == NULL && *dst != NULL)
        continue; /* its own setting wins over the plain one */
      free(*dst);
      if ((*dst = strdup(f->path)) == NULL) {
        fprintf(stderr, "lithd: out of memory\n");
        return 2;
      }
    }
    if (!found) {
      fprintf(stderr, "lithd: --%s %s=%s: no database is named \"%s\" (--db NAME=PATH)\n",
              f->commands ? "commands" : "schema", f->name, f->path, f->name);
      return 2;
    }
  }
  return 0;
}

/* ---- Setters (the table's .set) ------------------------------------------ */

static int nomem(void) {
  fprintf(stderr, "lithd: out of memory\n");
  return 2;
}

static int set_num(pass *p, const lithd_opt *r, const char *arg) {
  long long v;
  if (parse_num(r->name, arg, r->lo, r->hi, &v) != 0)
    return 2;
  switch (r->type) {
  case T_INT: *FIELD(p, r, int) = (int)v; break;
  case T_I64: *FIELD(p, r, int64_t) = v; break;
  default: *FIELD(p, r, size_t) = (size_t)v; break;
  }
  return 0;
}

/* A flag given false counts as not given (the mode checks). */
static int set_bool(pass *p, const lithd_opt *r, const char *arg) {
  int *v = FIELD(p, r, int);
  if (parse_bool(r->name, arg, v) != 0)
    return 2;
  p->given[r - lithd_opt_table] = (unsigned char)*v;
  return 0;
}

static int set_true(pass *p, const lithd_opt *r, const char *arg) {
  *FIELD(p, r, int) = 1;
  return 0;
}

static int set_string(pass *p, const lithd_opt *r, const char *arg) {
  char **dst = FIELD(p, r, char *);
  free(*dst);
  if ((*dst = strdup(arg)) == NULL)
    return nomem();
  return 0;
}

static int set_file_path(pass *p, const lithd_opt *r, const char *arg) {
  return set_path(FIELD(p, r, char *), arg, p->base) == 0 ? 0 : nomem();
}

static int set_db(pass *p, const lithd_opt *r, const char *arg) {
  return add_db(p->o, arg, p->base, p->source);
}

static int set_schema(pass *p, const lithd_opt *r, const char *arg) {
  return add_file(p->o, 0, arg, p->base, p->source);
}

static int set_commands(pass *p, const lithd_opt *r, const char *arg) {
  return add_file(p->o, 1, arg, p->base, p->source);
}

/* --default and --dqlite-db: a database name; `what` for the message. */
static int set_name(char **dst, const char *opt, const char *what, const char *arg) {
  if (!is_db_name(arg, strlen(arg))) {
    fprintf(stderr, "lithd: --%s wants %s (1-%d of A-Z a-z 0-9 _ -), got \"%s\"\n", opt, what,
            LITHD_DB_NAME_MAX, arg);
    return 2;
  }
  free(*dst);
  if ((*dst = strdup(arg)) == NULL)
    return nomem();
  return 0;
}

static int set_default(pass *p, const lithd_opt *r, const char *arg) {
  return set_name(&p->o->default_db, r->name, "a database name", arg);
}

static int set_dqlite_db(pass *p, const lithd_opt *r, const char *arg) {
  return set_name(&p->o->dqlite_db, r->name, "a name", arg);
}

/* The table's default is not "given" (--listen, --checkpoint). */
static int set_listen(pass *p, const lithd_opt *r, const char *arg) {
  if (parse_listen(arg, p->o->host, sizeof p->o->host, &p->o->port) != 0) {
    fprintf(stderr, "lithd: --listen wants HOST:PORT, got \"%s\"\n", arg);
    return 2;
  }
  if (p->source > 0)
    p->o->listen_given = 1;
  return 0;
}

static int set_sync(pass *p, const lithd_opt *r, const char *arg) {
  if (strcmp(arg, "normal") == 0)
    p->o->synchronous = LITH_SYNC_NORMAL;
  else if (strcmp(arg, "full") == 0)
    p->o->synchronous = LITH_SYNC_FULL;
  else {
    fprintf(stderr, "lithd: --synchronous wants normal or full\n");
    return 2;
  }
  return 0;
}

static int set_checkpoint(pass *p, const lithd_opt *r, const char *arg) {
  if (strcmp(arg, "writer") == 0)
    p->o->checkpoint = LITH_CHECKPOINT_WRITER;
  else if (strcmp(arg, "auto") == 0)
    p->o->checkpoint = LITH_CHECKPOINT_AUTO;
  else if (strcmp(arg, "external") == 0)
    p->o->checkpoint = LITH_CHECKPOINT_EXTERNAL;
  else {
    fprintf(stderr, "lithd: --checkpoint wants writer, auto or external\n");
    return 2;
  }
  if (p->source > 0)
    p->o->checkpoint_given = 1;
  return 0;
}

static int set_file_mode(pass *p, const lithd_opt *r, const char *arg) {
  char *end;
  long m;
  errno = 0;
  m = strtol(arg, &end, 8);
  if (errno != 0 || end == arg || *end != '\0' || (m & ~0777L) != 0 || (m & 0600) != 0600) {
    fprintf(stderr, "lithd: --file-mode wants octal permission bits including 0600, got \"%s\"\n", arg);
    return 2;
  }
  p->o->file_mode = (int)m;
  return 0;
}

static int set_max_memory(pass *p, const lithd_opt *r, const char *arg) {
  int rc = set_num(p, r, arg);
  if (rc == 0 && p->o->max_memory_mib > 0 && p->o->max_memory_mib < 16) {
    fprintf(stderr, "lithd: --max-memory-mib wants 0 (no ceiling) or at least 16\n");
    return 2;
  }
  return rc;
}

static int set_log_level(pass *p, const lithd_opt *r, const char *arg) {
  if ((p->o->log_level = lithd_log_level_parse(arg)) < 0) {
    fprintf(stderr, "lithd: --log-level wants error, warn, info or debug\n");
    return 2;
  }
  return 0;
}

static int set_log_format(pass *p, const lithd_opt *r, const char *arg) {
  if ((p->o->log_format = lithd_log_format_parse(arg)) < 0) {
    fprintf(stderr, "lithd: --log-format wants text or json\n");
    return 2;
  }
  return 0;
}

/* Read before the passes (lithd_opts_parse); a config file has no key for
 * it, this is the guard behind that. */
static int set_config(pass *p, const lithd_opt *r, const char *arg) {
  if (p->base != NULL) {
    fprintf(stderr, "lithd: a config file cannot name another (\"config\")\n");
    return 2;
  }
  return 0;
}

static int set_help(pass *p, const lithd_opt *r, const char *arg) {
  usage(stdout);
  return 1;
}

static int set_version(pass *p, const lithd_opt *r, const char *arg) {
  printf("lithd %s\n", LITH_VERSION);
  return 1;
}

/* ---- The sources ---------------------------------------------------------- */

/* One getopt_long pass over argv (`longs`: the table's). Returns 0, 1
 * (help/version) or 2. */
static int parse_pass(int argc, char **argv, pass *p, const struct option *longs) {
  int c;

  optind = 0; /* glibc: start over, a second pass is a new scan */
  opterr = 1;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    const lithd_opt *r;
    int rc;
    if (c < OPT_BASE || c >= OPT_BASE + N_OPTS) {
      usage(stderr);
      return 2;
    }
    r = &lithd_opt_table[c - OPT_BASE];
    p->given[c - OPT_BASE] = 1;
    if ((rc = r->set(p, r, optarg)) != 0)
      return rc;
  }
  if (optind < argc) {
    fprintf(stderr, "lithd: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  return 0;
}

/* Read `path` as "key = value" lines into a pass of "--name=value". */
static int parse_config(const char *path, pass *p, const struct option *longs) {
  char *text = NULL, *line, *save = NULL, *base = NULL, *slash;
  char **args = NULL;
  char why[LITHD_TEXT_ERRMSG_MAX];
  int nargs = 1, lineno = 0, rc = 2;
  size_t n;

  /* A buffer that grows with the file, not one of CONFIG_MAX per read. */
  if (lithd_text_load(path, CONFIG_MAX, "--config", &text, &n, why, sizeof why) != 0) {
    fprintf(stderr, "lithd: %s\n", why);
    return 2;
  }
  /* Relative paths in the file: from its directory. */
  if ((base = strdup(path)) == NULL)
    goto nomem;
  slash = strrchr(base, '/');
  if (slash != NULL)
    slash[1] = '\0';
  else
    base[0] = '\0';
  args = calloc(n / 2 + 2, sizeof *args); /* a line of 2+ bytes per option at most */
  if (args == NULL)
    goto nomem;
  args[0] = (char *)"lithd";
  for (line = text; line != NULL && *line != '\0'; line = save) {
    char *nl = strchr(line, '\n'), *eq, *k, *v, *e, *hash;
    const lithd_opt *r = NULL;
    size_t need;
    lineno++;
    save = nl != NULL ? nl + 1 : NULL;
    if (nl != NULL)
      *nl = '\0';
    hash = strchr(line, '#');
    if (hash != NULL)
      *hash = '\0';
    for (k = line; *k == ' ' || *k == '\t'; k++) {
    }
    e = k + strlen(k);
    while (e > k && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
      *--e = '\0';
    if (*k == '\0')
      continue;
    eq = strchr(k, '=');
    v = NULL;
    if (eq != NULL) {
      *eq = '\0';
      for (v = eq + 1; *v == ' ' || *v == '\t'; v++) {
      }
      e = eq;
      while (e > k && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    }
    for (int i = 0; i < N_OPTS && r == NULL; i++)
      if (lithd_opt_table[i].key != NULL && strcmp(lithd_opt_table[i].key, k) == 0)
        r = &lithd_opt_table[i];
    if (r == NULL) {
      fprintf(stderr, "lithd: %s:%d: unknown setting \"%s\"\n", path, lineno, k);
      goto out;
    }
    if (r->arg == required_argument && (v == NULL || *v == '\0')) {
      fprintf(stderr, "lithd: %s:%d: \"%s\" needs a value (%s = ...)\n", path, lineno, k, k);
      goto out;
    }
    need = strlen(r->name) + (v != NULL ? strlen(v) : 0) + 4;
    if ((args[nargs] = malloc(need)) == NULL)
      goto nomem;
    if (v != NULL)
      snprintf(args[nargs], need, "--%s=%s", r->name, v);
    else
      snprintf(args[nargs], need, "--%s", r->name);
    nargs++;
  }
  p->base = base;
  p->source = 1;
  rc = parse_pass(nargs, args, p, longs);
  p->base = NULL;
  if (rc == 2)
    fprintf(stderr, "lithd: (in the config file %s)\n", path);
  goto out;
nomem:
  fprintf(stderr, "lithd: out of memory\n");
out:
  if (args != NULL)
    for (int i = 1; i < nargs; i++)
      free(args[i]);
  free(args);
  free(base);
  free(text);
  return rc;
}

/* ---- After the sources ----------------------------------------------------- */

/* --dqlite (with --restore or not), else --restore, else the local files
 * (options.h). */
static unsigned mode_of(const lithd_opts *o) {
  if (o->dqlite != NULL)
    return o->restore != NULL ? LITHD_MODE_DQLITE_RESTORE : LITHD_MODE_DQLITE;
  return o->restore != NULL ? LITHD_MODE_RESTORE : LITHD_MODE_FILE;
}

/* Refuse the first row given (in the table's order) that the mode does
 * not accept. Returns 0, or 2 after a message naming it. */
static int check_modes(const lithd_opts *o, const unsigned char *given) {
  unsigned mode = mode_of(o);
  for (int i = 0; i < N_OPTS; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    if (!given[i] || (r->modes & mode) != 0)
      continue;
    if (r->needs != NULL)
      fprintf(stderr, "lithd: --%s goes with %s\n", r->name, r->needs);
    else if (mode_option(mode) != NULL && r->why != NULL)
      fprintf(stderr, "lithd: %s cannot go with --%s (%s)\n", mode_option(mode), r->name, r->why);
    else
      fprintf(stderr, "lithd: --%s is refused here\n", r->name); /* a row without its reason */
    return 2;
  }
  return 0;
}

/* --dqlite (its refusals done): stand the cluster's database in as the one
 * database (its path "dqlite:NAME" is only a label; --schema and
 * --commands go to it as to any). */
static int dqlite_setup(lithd_opts *o) {
  const char *name = o->dqlite_db != NULL ? o->dqlite_db : LITHD_DB_MAIN;
  size_t n = strlen(name) + 8;
  if (o->dqlite[0] == '\0') {
    fprintf(stderr, "lithd: --dqlite wants ADDR[,ADDR...] (host:port of dqlite nodes)\n");
    return 2;
  }
  o->dbs = calloc(1, sizeof *o->dbs);
  if (o->dbs == NULL || (o->dbs[0].name = strdup(name)) == NULL || (o->dbs[0].path = malloc(n)) == NULL) {
    fprintf(stderr, "lithd: out of memory\n");
    if (o->dbs != NULL)
      o->n_dbs = 1; /* freed by lithd_opts_free */
    return 2;
  }
  snprintf(o->dbs[0].path, n, "dqlite:%s", name);
  o->dbs[0].source = 2;
  o->n_dbs = 1;
  return 0;
}

int lithd_opts_parse(int argc, char **argv, lithd_opts *o) {
  struct option longs[N_OPTS + 1];
  unsigned char given[N_OPTS];
  pass p = {NULL, NULL, 0, given};
  const char *config = NULL;
  int i, rc;

  memset(o, 0, sizeof *o);
  p.o = o;
  memset(given, 0, sizeof given);
  memset(longs, 0, sizeof longs);
  for (i = 0; i < N_OPTS; i++) {
    longs[i].name = lithd_opt_table[i].name;
    longs[i].has_arg = lithd_opt_table[i].arg;
    longs[i].val = OPT_BASE + i;
  }
  /* lithd's own defaults, through the rows' own setters. */
  for (i = 0; i < N_OPTS; i++)
    if (lithd_opt_table[i].def_applied &&
        lithd_opt_table[i].set(&p, &lithd_opt_table[i], lithd_opt_table[i].def) != 0) {
      fprintf(stderr, "lithd: the default of --%s does not parse\n", lithd_opt_table[i].name);
      return 2;
    }
  memset(given, 0, sizeof given);

  /* --config first, wherever it stands, so the command line can override. */
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      break;
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      config = argv[i + 1];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      config = argv[i] + 9;
  }
  if (config != NULL && (rc = parse_config(config, &p, longs)) != 0)
    return rc;
  p.source = 2;
  if ((rc = parse_pass(argc, argv, &p, longs)) != 0)
    return rc;

  if ((rc = check_modes(o, given)) != 0)
    return rc;
  if (o->dqlite != NULL && (rc = dqlite_setup(o)) != 0)
    return rc;
  if (o->n_dbs == 0) {
    fprintf(stderr, "lithd: --db PATH is required\n");
    usage(stderr);
    return 2;
  }
  if ((rc = resolve_files(o)) != 0)
    return rc;
  if (o->default_db != NULL) {
    int found = 0;
    for (i = 0; i < o->n_dbs; i++)
      found |= strcmp(o->dbs[i].name, o->default_db) == 0;
    if (!found) {
      fprintf(stderr, "lithd: --default %s: no database is named so; the databases:", o->default_db);
      for (i = 0; i < o->n_dbs; i++)
        fprintf(stderr, " %s", o->dbs[i].name);
      fprintf(stderr, "\n");
      return 2;
    }
  }
  if (o->restore != NULL && o->n_dbs != 1) {
    fprintf(stderr, "lithd: --restore puts one database in place: give one --db\n");
    return 2;
  }
  if (o->litestream) {
    /* Litestream checkpoints the WAL itself; a WAL that lithd checkpoints
     * and starts over while Litestream is not looking (it restarts; lithd's
     * TRUNCATE at exit) loses it its place: a new generation, a full
     * snapshot to upload again. */
    if (o->checkpoint_given && o->checkpoint != LITH_CHECKPOINT_EXTERNAL) {
      fprintf(stderr,
              "lithd: --litestream needs --checkpoint external (Litestream checkpoints the WAL "
              "itself); drop --checkpoint %s\n",
              o->checkpoint == LITH_CHECKPOINT_AUTO ? "auto" : "writer");
      return 2;
    }
    o->checkpoint = LITH_CHECKPOINT_EXTERNAL;
    if (o->checkpoint_pages == 0)
      o->checkpoint_pages = LITHD_LITESTREAM_CKPT_PAGES;
  }
  /* TLS keeps what is sent from other eyes; who may send is still the
   * token's to say (docs/security.md). */
  if (!is_loopback_host(o->host) && o->token_file == NULL && o->auth_jwt_key_file == NULL) {
    fprintf(stderr,
            "lithd: refusing to listen on %s (not loopback) without --token-file or --auth-jwt-key-file\n",
            o->host);
    return 2;
  }
  return 0;
}

void lithd_opts_free(lithd_opts *o) {
  for (int i = 0; i < o->n_dbs; i++) {
    free(o->dbs[i].name);
    free(o->dbs[i].path);
    free(o->dbs[i].schema);
    free(o->dbs[i].commands);
  }
  free(o->dbs);
  for (int i = 0; i < o->n_files; i++) {
    free(o->files[i].name);
    free(o->files[i].path);
  }
  free(o->files);
  free(o->default_db);
  free(o->unix_path);
  free(o->token_file);
  free(o->auth_jwt_key_file);
  free(o->tls_cert);
  free(o->tls_key);
  free(o->allow_origins);
  free(o->allow_hosts);
  free(o->backup_dir);
  free(o->restore);
  free(o->dqlite);
  free(o->dqlite_db);
  free(o->log_file);
  memset(o, 0, sizeof *o);
}
