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

typedef struct lithd_opts {
  char *db;
  char host[256];
  int port;
  int listen_given;
  char *unix_path;
  int synchronous;       /* LITH_SYNC_ */
  int checkpoint;        /* LITH_CHECKPOINT_ */
  int checkpoint_given;  /* --checkpoint was given (in the file or on the command line) */
  int litestream;        /* --litestream: checkpoint external, busy timeout LITHD_LITESTREAM_BUSY_MS */
  int checkpoint_pages;  /* 0: lith's default (1000) */
  int readers;           /* 0: lith's default (CPUs) */
  int max_batch;         /* 0: lith's default */
  int max_queue;         /* 0: lith's default */
  int file_mode;         /* 0: lith's default (0600) */
  int64_t queue_wait_ms; /* how long a request waits for room in a full queue */
  char *schema;
  char *commands;
  int only_named;
  char *token_file;
  char *allow_origins; /* comma-separated Origin values a request may carry; NULL: none */
  char *allow_hosts;   /* further Host names a token-less loopback lithd answers */
  char *backup_dir;    /* where POST /v1/backup writes; NULL: backups off */
  char *restore;       /* --restore FROM: restore into db and exit (restore.h); NULL: serve */
  int force;           /* --force: a restore may replace an existing db */
  size_t max_body;     /* 0: default */
  int max_statements;  /* 0: default (sqljson.h) */
  size_t max_sql;
  int64_t max_rows;
  int64_t max_run_ms;
  int max_value_bytes;    /* 0: default (guard.h) */
  int max_like_pattern;   /* 0: default (guard.h) */
  int64_t max_memory_mib; /* SQLite's hard heap limit (sqlite3_hard_heap_limit64) */
  int64_t stop_grace_ms;  /* SIGTERM: time before reads and backups are interrupted */
  int log_level;          /* LITHD_LOG_ */
  int log_format;         /* LITHD_LOG_TEXT or LITHD_LOG_JSON */
  char *log_file;
} lithd_opts;

/* Parse the config file (if --config is given) and then argv into *o
 * (defaults first). Returns 0 to run, 1 when --help or --version was
 * answered (exit 0), 2 on a usage error (a message is on stderr already).
 * Strings in *o are malloc'd: lithd_opts_free. */
int lithd_opts_parse(int argc, char **argv, lithd_opts *o);

void lithd_opts_free(lithd_opts *o);

#endif /* LITHD_OPTIONS_H */
