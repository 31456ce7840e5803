/*
 * lithd options — the command line and the config file, into one struct.
 *
 * Every long option can also be a line of the config file (--config FILE):
 *
 *   # lithd.conf
 *   db = /var/lib/app/app.db
 *   listen = 127.0.0.1:8765
 *   synchronous = full
 *   commands = app.sql        # relative paths: from the config file's directory
 *   only-named = true
 *
 * The file is read first, the command line after it, so an option given on
 * the command line wins. Relative paths in the file are taken from the
 * file's directory (a service's config file sits beside its data), relative
 * paths on the command line from the current directory.
 *
 * Several databases (one lithd, one writer per file): `db` is given once per
 * database as NAME=PATH, and the per-database files as NAME=FILE; a plain
 * FILE is every database's (shards usually share one schema):
 *
 *   db = users=/var/lib/app/users.db
 *   db = orders=/var/lib/app/orders.db
 *   schema = app.sql              # every database
 *   schema = orders=orders.sql    # this one instead
 *   commands = orders=orders-cmds.sql
 *   default = users               # what /v1/do, /v1/query... serve
 *
 * NAME is 1-64 of [A-Za-z0-9_-]: it goes into URLs (/v1/db/NAME/do) and
 * metric labels. A plain `db = PATH` is the database "main" (the one
 * database of an older config file); a path whose text before '=' is a name
 * must be written ./PATH. Each name and each (name, file) setting is a map
 * entry: given again by the command line, it replaces the file's; given
 * twice in one source, it is an error. Per database are the path, --schema
 * and --commands; every other option is the process's and holds for each
 * database alike (each gets its own --readers, --max-queue, ...).
 *
 * Every option is one row of lithd_opt_table (below, and options.c).
 */
#ifndef LITHD_OPTIONS_H
#define LITHD_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define LITHD_DEFAULT_HOST "127.0.0.1"
#define LITHD_DEFAULT_PORT 8765
/* --litestream: the least busy_timeout (ms) the writer gets, so that
 * Litestream's write locks (its checkpoints, its _litestream_seq writes)
 * delay a batch rather than fail it with "busy" (Litestream's advice: 5 s). */
#define LITHD_LITESTREAM_BUSY_MS 5000
/* --litestream: --checkpoint-pages unless given, so that the warning of a
 * WAL nobody checkpoints (4 x this) comes at twice the size at which
 * Litestream 0.3 forces its own checkpoint (max-checkpoint-page-count,
 * 10000 pages): under load its WAL reaches that size while it works well
 * (test_lithd_replica saw 9958 pages), and a warning there is a false alarm. */
#define LITHD_LITESTREAM_CKPT_PAGES 5000

/* The name of the database of a plain --db PATH. */
#define LITHD_DB_MAIN "main"
/* Longest database name. */
#define LITHD_DB_NAME_MAX 64

/* One database to serve. Strings malloc'd (lithd_opts_free). */
typedef struct lithd_opts_db {
  char *name;     /* [A-Za-z0-9_-]{1,LITHD_DB_NAME_MAX} */
  char *path;     /* the file */
  char *schema;   /* --schema NAME=FILE, else the plain --schema FILE; NULL: none */
  char *commands; /* --commands likewise; NULL: none */
  int source;     /* internal: 1 the config file, 2 the command line */
} lithd_opts_db;

/* A --schema or --commands setting before it is given to its database. */
typedef struct lithd_opts_file {
  int commands; /* 0: --schema, 1: --commands */
  char *name;   /* NULL: every database */
  char *path;
  int source;
} lithd_opts_file;

typedef struct lithd_opts {
  lithd_opts_db *dbs; /* n_dbs >= 1 once parsed, in the order given */
  int n_dbs;
  char *default_db; /* --default NAME: the database of /v1/do, ...; NULL: the only one, or none */
  char host[256];
  int port;
  int listen_given;
  char *unix_path;
  int synchronous;        /* LITH_SYNC_ */
  int checkpoint;         /* LITH_CHECKPOINT_ */
  int checkpoint_given;   /* --checkpoint was given (in the file or on the command line) */
  int litestream;         /* --litestream: checkpoint external, busy timeout LITHD_LITESTREAM_BUSY_MS */
  int checkpoint_pages;   /* 0: lith's default (1000) */
  int wal_hold_ms;        /* --wal-hold-ms (default 100) */
  int readers;            /* 0: lith's default (CPUs) */
  int cache_kib;          /* 0: lith's default (16384) */
  int64_t mmap_mib;       /* 0: none (lith's default) */
  int max_batch;          /* 0: lith's default */
  int max_queue;          /* 0: lith's default */
  int file_mode;          /* 0: lith's default (0600) */
  int64_t queue_wait_ms;  /* how long a request waits for room in a full queue */
  lithd_opts_file *files; /* internal: --schema and --commands as given */
  int n_files;
  int only_named;
  char *token_file;
  char *auth_jwt_key_file; /* --auth-jwt-key-file: sqld's JWT public key(s); NULL: no JWTs */
  /* --tls-cert, --tls-key: the TCP listener's PEM certificate (and chain)
   * and its key; NULL: cleartext (lith_http_server_create checks both) */
  char *tls_cert;
  char *tls_key;
  char *allow_origins; /* comma-separated Origin values a request may carry; NULL: none */
  char *allow_hosts;   /* further Host names a token-less loopback lithd answers */
  char *backup_dir;    /* where POST /v1/backup writes; NULL: backups off */
  char *
      restore; /* --restore FROM: restore into db (restore.h) or the cluster (dqlite_restore.h) and exit; NULL: serve */
  int force;          /* --force: a restore may replace an existing db */
  size_t max_body;    /* 0: default */
  int max_statements; /* 0: default (sqljson.h) */
  size_t max_sql;
  int64_t max_rows;
  int64_t max_result_mib; /* --max-result-mib: one answer's bytes (0: default) */
  int64_t max_run_ms;
  int64_t tx_idle_ms;     /* an interactive transaction: idle at most (0: default) */
  int64_t tx_max_ms;      /* ... open at most in all (0: default) */
  int64_t stream_idle_ms; /* a Hrana stream: idle at most (0: default) */
  int max_value_bytes;    /* 0: default (guard.h) */
  int max_like_pattern;   /* 0: default (guard.h) */
  int64_t max_memory_mib; /* SQLite's hard heap limit (sqlite3_hard_heap_limit64) */
  int64_t stop_grace_ms;  /* SIGTERM: time before reads and backups are interrupted */
  /* --write-timeout-ms: a connection whose client takes no byte for this long is closed; 0: never */
  int64_t write_timeout_ms;
  /* --request-timeout-ms: a request's head and body, a TLS handshake, an idle keep-alive */
  int64_t request_timeout_ms;
  int64_t max_answer_mib; /* --max-answer-mib: the process's answer budget (sqljson.h) */
  char *dqlite;           /* --dqlite ADDR,...: the database is a dqlite cluster's (dq.h); NULL: local */
  char *dqlite_db;        /* --dqlite-db NAME; NULL: LITHD_DB_MAIN */
  int dqlite_failover_ms; /* 0: dq.h's default */
  int log_level;          /* LITHD_LOG_ */
  int log_format;         /* LITHD_LOG_TEXT or LITHD_LOG_JSON */
  char *log_file;
} lithd_opts;

/* ---- The table of options (options.c) -------------------------------------
 *
 * One row per long option, and the only place an option is declared: the
 * command line (getopt_long's table is built from it), the config file (a
 * line's key is looked up in it), --help (printed from it) and the mode
 * checks all read it, so no option can be documented in one and missing
 * from another.
 *
 * The mode comes from the options given: --dqlite ADDR,... makes it
 * LITHD_MODE_DQLITE (with --restore FROM: LITHD_MODE_DQLITE_RESTORE), else
 * --restore FROM makes it LITHD_MODE_RESTORE, else it is LITHD_MODE_FILE. An option given (a flag given =false is not) in a
 * mode its row does not accept is refused, exit 2, with a message naming
 * it: "--NAME goes with NEEDS" when the row has `needs`, else "--dqlite
 * cannot go with --NAME (WHY)" (the mode's own option, then the row's
 * `why`); of several, the first in the table. The rows that make a mode:
 * --dqlite's accepts only its modes (given with --db, its row refuses),
 * --restore's every mode (it turns the local files into LITHD_MODE_RESTORE,
 * --dqlite into LITHD_MODE_DQLITE_RESTORE). A refusal in
 * LITHD_MODE_DQLITE_RESTORE names --dqlite, as in LITHD_MODE_DQLITE. */

#define LITHD_MODE_FILE 1u    /* the local files of --db */
#define LITHD_MODE_DQLITE 2u  /* --dqlite: the database is a cluster's */
#define LITHD_MODE_RESTORE 4u /* --restore FROM: put a backup in place, then exit */
#define LITHD_MODE_DQLITE_RESTORE \
  8u /* --dqlite with --restore FROM: load it into the cluster's database, then exit (dqlite_restore.h) */
#define LITHD_MODE_ALL (LITHD_MODE_FILE | LITHD_MODE_DQLITE | LITHD_MODE_RESTORE | LITHD_MODE_DQLITE_RESTORE)

struct lithd_opt_pass; /* options.c: one source (defaults, file, command line) being read */

typedef struct lithd_opt {
  const char *name; /* --NAME */
  int arg;          /* getopt's no_argument, required_argument, or optional_argument: a flag, [=true|false] */
  const char *meta; /* the argument as --help names it ("PATH"); NULL: none */
  const char *def;  /* the default as --help shows it; NULL: none shown */
  int def_applied;  /* 1: `def` is parsed into the field before the sources are read (lithd's own
                       default); 0: the field stays 0, which means the default of what it configures */
  const char *help; /* one paragraph; --help wraps it and adds the default and the modes */
  unsigned modes;   /* the LITHD_MODE_ that accept it */
  const char *needs; /* refused outside `modes`: "--NAME goes with NEEDS" */
  const char *why;   /* refused in a mode's --dqlite or --restore: "--dqlite cannot go with --NAME (WHY)" */
  const char *key;   /* its key in the config file; NULL: command line only */
  /* options.c's: how the argument is read and where it goes */
  int (*set)(struct lithd_opt_pass *, const struct lithd_opt *, const char *arg);
  size_t field; /* offsetof(lithd_opts, ...) for the setters shared by several rows */
  int type;     /* the field's C type, for the number setter */
  long long lo, hi;
} lithd_opt;

/* The rows, in --help's order. */
extern const lithd_opt lithd_opt_table[];
extern const int lithd_opt_count;

/* Parse the config file (if --config is given) and then argv into *o
 * (defaults first). Returns 0 to run, 1 when --help or --version was
 * answered (exit 0), 2 on a usage error (a message is on stderr already).
 * Strings in *o are malloc'd: lithd_opts_free. */
int lithd_opts_parse(int argc, char **argv, lithd_opts *o);

void lithd_opts_free(lithd_opts *o);

#endif /* LITHD_OPTIONS_H */
