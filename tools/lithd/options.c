/*
 * lithd options — see options.h.
 *
 * Design: one table of long options serves both sources. The config file
 * is turned into "--key=value" arguments and run through the same
 * getopt_long loop as the command line, so both take exactly the same
 * options with the same checks and messages (a message names the file and
 * line for a config error).
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lith.h"
#include "log.h"
#include "textfile.h"

#define CONFIG_MAX (1 << 20)

enum {
  OPT_DB = 256,
  OPT_LISTEN,
  OPT_UNIX,
  OPT_SYNC,
  OPT_CKPT,
  OPT_READERS,
  OPT_MAXBATCH,
  OPT_MAXQUEUE,
  OPT_QUEUEWAIT,
  OPT_SCHEMA,
  OPT_COMMANDS,
  OPT_ONLYNAMED,
  OPT_TOKEN,
  OPT_MAXBODY,
  OPT_MAXSTMTS,
  OPT_MAXSQL,
  OPT_MAXROWS,
  OPT_MAXRUN,
  OPT_LOGLEVEL,
  OPT_LOG,
  OPT_CONFIG,
  OPT_HELP,
  OPT_VERSION,
  OPT_FILEMODE,
  OPT_ALLOWORIGIN,
  OPT_ALLOWHOST,
  OPT_BACKUPDIR,
  OPT_MAXVALUE,
  OPT_MAXLIKE,
  OPT_MAXMEM,
  OPT_GRACE,
  OPT_WRITETIMEOUT,
  OPT_CKPTPAGES,
  OPT_LOGFORMAT,
  OPT_RESTORE,
  OPT_FORCE,
  OPT_LITESTREAM,
  OPT_DEFAULT,
  OPT_DQLITE,
  OPT_DQLITEDB,
  OPT_DQFAILOVER
};

static const struct option longs[] = {{"db", required_argument, NULL, OPT_DB},
                                      {"default", required_argument, NULL, OPT_DEFAULT},
                                      {"listen", required_argument, NULL, OPT_LISTEN},
                                      {"unix", required_argument, NULL, OPT_UNIX},
                                      {"synchronous", required_argument, NULL, OPT_SYNC},
                                      {"checkpoint", required_argument, NULL, OPT_CKPT},
                                      {"checkpoint-pages", required_argument, NULL, OPT_CKPTPAGES},
                                      {"litestream", optional_argument, NULL, OPT_LITESTREAM},
                                      {"readers", required_argument, NULL, OPT_READERS},
                                      {"max-batch", required_argument, NULL, OPT_MAXBATCH},
                                      {"max-queue", required_argument, NULL, OPT_MAXQUEUE},
                                      {"file-mode", required_argument, NULL, OPT_FILEMODE},
                                      {"allow-origin", required_argument, NULL, OPT_ALLOWORIGIN},
                                      {"allow-host", required_argument, NULL, OPT_ALLOWHOST},
                                      {"backup-dir", required_argument, NULL, OPT_BACKUPDIR},
                                      {"queue-wait-ms", required_argument, NULL, OPT_QUEUEWAIT},
                                      {"schema", required_argument, NULL, OPT_SCHEMA},
                                      {"commands", required_argument, NULL, OPT_COMMANDS},
                                      {"only-named", optional_argument, NULL, OPT_ONLYNAMED},
                                      {"token-file", required_argument, NULL, OPT_TOKEN},
                                      {"max-body", required_argument, NULL, OPT_MAXBODY},
                                      {"max-statements", required_argument, NULL, OPT_MAXSTMTS},
                                      {"max-sql", required_argument, NULL, OPT_MAXSQL},
                                      {"max-rows", required_argument, NULL, OPT_MAXROWS},
                                      {"max-run-ms", required_argument, NULL, OPT_MAXRUN},
                                      {"max-value-bytes", required_argument, NULL, OPT_MAXVALUE},
                                      {"max-like-pattern", required_argument, NULL, OPT_MAXLIKE},
                                      {"max-memory-mib", required_argument, NULL, OPT_MAXMEM},
                                      {"stop-grace-ms", required_argument, NULL, OPT_GRACE},
                                      {"write-timeout-ms", required_argument, NULL, OPT_WRITETIMEOUT},
                                      {"log-level", required_argument, NULL, OPT_LOGLEVEL},
                                      {"log", required_argument, NULL, OPT_LOG},
                                      {"log-format", required_argument, NULL, OPT_LOGFORMAT},
                                      {"config", required_argument, NULL, OPT_CONFIG},
                                      {"restore", required_argument, NULL, OPT_RESTORE},
                                      {"force", no_argument, NULL, OPT_FORCE},
                                      {"dqlite", required_argument, NULL, OPT_DQLITE},
                                      {"dqlite-db", required_argument, NULL, OPT_DQLITEDB},
                                      {"dqlite-failover-ms", required_argument, NULL, OPT_DQFAILOVER},
                                      {"help", no_argument, NULL, OPT_HELP},
                                      {"version", no_argument, NULL, OPT_VERSION},
                                      {NULL, 0, NULL, 0}};

static void usage(FILE *f) {
  fprintf(f,
          "usage: lithd --db PATH [options]\n"
          "       lithd --db NAME=PATH --db NAME=PATH ... [options]\n"
          "       lithd --dqlite ADDR[,ADDR...] [--dqlite-db NAME] [options]\n"
          "  --db PATH               the database file (created if missing), named \"" LITHD_DB_MAIN "\"\n"
          "  --db NAME=PATH          one of several databases, each its own writer, served\n"
          "                          at /v1/db/NAME/... (NAME: 1-64 of A-Z a-z 0-9 _ -)\n"
          "  --default NAME          the database of /v1/do, /v1/query, ... when several\n"
          "                          are served (default: none, those routes refuse)\n"
          "  --listen HOST:PORT      TCP address (default " LITHD_DEFAULT_HOST ":%d; port 0: any free)\n"
          "  --unix PATH             listen on a Unix socket (mode 0600); TCP then only\n"
          "                          with --listen\n"
          "  --synchronous normal|full        (default normal)\n"
          "  --checkpoint writer|auto|external (default writer)\n"
          "  --checkpoint-pages N    WAL pages that start a checkpoint (default 1000); with\n"
          "                          external, lithd warns once the WAL passes 4 x N\n"
          "  --litestream            run beside Litestream, which replicates the WAL:\n"
          "                          --checkpoint external (lithd never checkpoints,\n"
          "                          not even at exit) and a %d ms busy timeout, so\n"
          "                          Litestream's brief write locks delay a batch, never\n"
          "                          fail it; --checkpoint-pages %d unless given (the WAL\n"
          "                          warning past Litestream's own forced checkpoint);\n"
          "                          refused with --checkpoint writer or auto\n"
          "  --readers N             read connections for /v1/query (default: CPUs)\n"
          "  --max-batch N           most commands in one transaction (default 1024)\n"
          "  --max-queue N           most commands queued for the writer (default 65536)\n"
          "  --file-mode MODE        permissions of a database or backup lithd creates, octal\n"
          "                          (default 0600; the -wal and -shm files follow it)\n"
          "  --queue-wait-ms MS      how long a request waits for room in a full queue\n"
          "                          before 503 + Retry-After (default 2000)\n"
          "  --schema [NAME=]FILE    SQL run once at startup as numbered migration steps\n"
          "                          (a line \"-- step\" starts the next; PRAGMA user_version\n"
          "                          counts the steps applied); NAME=: that database only,\n"
          "                          else every database\n"
          "  --commands [NAME=]FILE  named commands (\"-- name: NAME\" then its SQL) for\n"
          "                          POST /v1/commands/NAME; NAME= as for --schema\n"
          "  --only-named            refuse raw SQL writes (/v1/do, /v1/batch): only named\n"
          "                          commands write\n"
          "  --token-file FILE       require \"Authorization: Bearer <token>\"\n"
          "                          (needed for a non-loopback --listen)\n"
          "  --allow-origin LIST     Origin values (comma-separated; * for any) a request\n"
          "                          may carry; others get 403 (default: none, so no web\n"
          "                          page can send requests)\n"
          "  --allow-host LIST       Host names besides localhost and IP addresses that a\n"
          "                          lithd without --token-file answers on loopback (a\n"
          "                          proxy's name; others get 403: DNS rebinding)\n"
          "  --backup-dir DIR        POST /v1/backup writes new files here, never\n"
          "                          replacing one (default: backups off)\n"
          "  --max-body BYTES        largest request body (default 8 MiB)\n"
          "  --max-statements N      statements in one request (default 1000)\n"
          "  --max-sql BYTES         SQL text of one statement (default 100000)\n"
          "  --max-rows N            rows in one answer (default 10000)\n"
          "  --max-run-ms MS         time to run one request's statements (default 5000)\n"
          "  --max-value-bytes BYTES largest string or blob SQL may make or read (default\n"
          "                          1 MiB; SQLITE_LIMIT_LENGTH; bounds one LIKE's cost)\n"
          "  --max-like-pattern BYTES longest LIKE or GLOB pattern (default 50)\n"
          "  --max-memory-mib MIB    SQLite's heap, all connections (default 1024); past\n"
          "                          it a statement fails \"out of memory\", lithd lives;\n"
          "                          0: no ceiling\n"
          "  --stop-grace-ms MS      on SIGTERM, how long requests running may finish\n"
          "                          before reads and backups are interrupted (default\n"
          "                          10000); writes accepted are always run and answered;\n"
          "                          a download running is let finish within it\n"
          "  --write-timeout-ms MS   close a connection whose client takes none of the\n"
          "                          bytes waiting for it for this long (default 30000;\n"
          "                          0: never): a client that stops reading a download\n"
          "                          frees its slot\n"
          "  --log-level error|warn|info|debug (default info)\n"
          "  --log FILE              log there instead of stderr (SIGHUP reopens it)\n"
          "  --log-format text|json  json: one object per line (ts, level, msg; a\n"
          "                          request's method, path, status, us, bytes, client)\n"
          "  --config FILE           read these options from FILE (\"key = value\" lines);\n"
          "                          the command line wins\n"
          "  --restore FROM          put the backup FROM in place of --db, then exit: it\n"
          "                          must pass PRAGMA integrity_check; refused while a\n"
          "                          lithd serves --db, or if --db exists (unless --force)\n"
          "  --force                 with --restore: replace an existing --db\n"
          "  --dqlite ADDR[,ADDR...] instead of --db: the database lives on a dqlite\n"
          "                          cluster (lith-node); commands are batched into one\n"
          "                          Raft transaction on its leader, answered after a\n"
          "                          majority stored it; reads go to the leader\n"
          "  --dqlite-db NAME        the dqlite database (default \"" LITHD_DB_MAIN "\")\n"
          "  --dqlite-failover-ms MS how long to look for a leader before a command is\n"
          "                          answered 503 (default 10000)\n"
          "  --help, --version\n",
          LITHD_DEFAULT_PORT, LITHD_LITESTREAM_BUSY_MS, LITHD_LITESTREAM_CKPT_PAGES);
}

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

/* A whole number in [lo, hi]; 0 or -1 after a message. */
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

/* One getopt_long pass over argv. `base` is the directory of relative
 * paths (NULL: as given). Returns 0, 1 (help/version) or 2. */
static int parse_pass(int argc, char **argv, lithd_opts *o, const char *base) {
  int source = base != NULL ? 1 : 2;
  int c;
  long long v;

  optind = 0; /* glibc: start over, a second pass is a new scan */
  opterr = 1;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
    case OPT_DB:
      if (add_db(o, optarg, base, source) != 0)
        return 2;
      break;
    case OPT_DEFAULT:
      if (!is_db_name(optarg, strlen(optarg))) {
        fprintf(stderr, "lithd: --default wants a database name (1-%d of A-Z a-z 0-9 _ -), got \"%s\"\n",
                LITHD_DB_NAME_MAX, optarg);
        return 2;
      }
      free(o->default_db);
      if ((o->default_db = strdup(optarg)) == NULL)
        goto nomem;
      break;
    case OPT_LISTEN:
      if (parse_listen(optarg, o->host, sizeof o->host, &o->port) != 0) {
        fprintf(stderr, "lithd: --listen wants HOST:PORT, got \"%s\"\n", optarg);
        return 2;
      }
      o->listen_given = 1;
      break;
    case OPT_UNIX:
      if (set_path(&o->unix_path, optarg, base) != 0)
        goto nomem;
      break;
    case OPT_SYNC:
      if (strcmp(optarg, "normal") == 0)
        o->synchronous = LITH_SYNC_NORMAL;
      else if (strcmp(optarg, "full") == 0)
        o->synchronous = LITH_SYNC_FULL;
      else {
        fprintf(stderr, "lithd: --synchronous wants normal or full\n");
        return 2;
      }
      break;
    case OPT_CKPT:
      if (strcmp(optarg, "writer") == 0)
        o->checkpoint = LITH_CHECKPOINT_WRITER;
      else if (strcmp(optarg, "auto") == 0)
        o->checkpoint = LITH_CHECKPOINT_AUTO;
      else if (strcmp(optarg, "external") == 0)
        o->checkpoint = LITH_CHECKPOINT_EXTERNAL;
      else {
        fprintf(stderr, "lithd: --checkpoint wants writer, auto or external\n");
        return 2;
      }
      o->checkpoint_given = 1;
      break;
    case OPT_CKPTPAGES:
      if (parse_num("checkpoint-pages", optarg, 1, 1 << 28, &v) != 0)
        return 2;
      o->checkpoint_pages = (int)v;
      break;
    case OPT_READERS:
      if (parse_num("readers", optarg, 1, 1024, &v) != 0)
        return 2;
      o->readers = (int)v;
      break;
    case OPT_MAXBATCH:
      if (parse_num("max-batch", optarg, 1, 1 << 20, &v) != 0)
        return 2;
      o->max_batch = (int)v;
      break;
    case OPT_MAXQUEUE:
      if (parse_num("max-queue", optarg, 1, 1 << 24, &v) != 0)
        return 2;
      o->max_queue = (int)v;
      break;
    case OPT_FILEMODE: {
      char *end;
      errno = 0;
      long m = strtol(optarg, &end, 8);
      if (errno != 0 || end == optarg || *end != '\0' || (m & ~0777L) != 0 || (m & 0600) != 0600) {
        fprintf(stderr, "lithd: --file-mode wants octal permission bits including 0600, got \"%s\"\n",
                optarg);
        return 2;
      }
      o->file_mode = (int)m;
      break;
    }
    case OPT_QUEUEWAIT:
      if (parse_num("queue-wait-ms", optarg, 0, 3600 * 1000, &v) != 0)
        return 2;
      o->queue_wait_ms = v;
      break;
    case OPT_SCHEMA:
    case OPT_COMMANDS:
      if (add_file(o, c == OPT_COMMANDS, optarg, base, source) != 0)
        return 2;
      break;
    case OPT_ONLYNAMED:
      if (parse_bool("only-named", optarg, &o->only_named) != 0)
        return 2;
      break;
    case OPT_LITESTREAM:
      if (parse_bool("litestream", optarg, &o->litestream) != 0)
        return 2;
      break;
    case OPT_TOKEN:
      if (set_path(&o->token_file, optarg, base) != 0)
        goto nomem;
      break;
    case OPT_ALLOWORIGIN:
      free(o->allow_origins);
      if ((o->allow_origins = strdup(optarg)) == NULL)
        goto nomem;
      break;
    case OPT_BACKUPDIR:
      if (set_path(&o->backup_dir, optarg, base) != 0)
        goto nomem;
      break;
    case OPT_RESTORE:
      if (set_path(&o->restore, optarg, base) != 0)
        goto nomem;
      break;
    case OPT_FORCE: o->force = 1; break;
    case OPT_DQLITE:
      free(o->dqlite);
      if ((o->dqlite = strdup(optarg)) == NULL)
        goto nomem;
      break;
    case OPT_DQLITEDB:
      if (!is_db_name(optarg, strlen(optarg))) {
        fprintf(stderr, "lithd: --dqlite-db wants a name (1-%d of A-Z a-z 0-9 _ -), got \"%s\"\n",
                LITHD_DB_NAME_MAX, optarg);
        return 2;
      }
      free(o->dqlite_db);
      if ((o->dqlite_db = strdup(optarg)) == NULL)
        goto nomem;
      break;
    case OPT_DQFAILOVER:
      if (parse_num("dqlite-failover-ms", optarg, 100, 3600000, &v) != 0)
        return 2;
      o->dqlite_failover_ms = (int)v;
      break;
    case OPT_ALLOWHOST:
      free(o->allow_hosts);
      if ((o->allow_hosts = strdup(optarg)) == NULL)
        goto nomem;
      break;
    case OPT_MAXBODY:
      if (parse_num("max-body", optarg, 1, (long long)1 << 40, &v) != 0)
        return 2;
      o->max_body = (size_t)v;
      break;
    case OPT_MAXSTMTS:
      if (parse_num("max-statements", optarg, 1, 1000000, &v) != 0)
        return 2;
      o->max_statements = (int)v;
      break;
    case OPT_MAXSQL:
      if (parse_num("max-sql", optarg, 1, (long long)1 << 30, &v) != 0)
        return 2;
      o->max_sql = (size_t)v;
      break;
    case OPT_MAXROWS:
      if (parse_num("max-rows", optarg, 1, LLONG_MAX, &v) != 0)
        return 2;
      o->max_rows = v;
      break;
    case OPT_MAXRUN:
      if (parse_num("max-run-ms", optarg, 1, (long long)24 * 3600 * 1000, &v) != 0)
        return 2;
      o->max_run_ms = v;
      break;
    case OPT_MAXVALUE:
      /* SQLite's own ceiling for SQLITE_LIMIT_LENGTH is 1e9. */
      if (parse_num("max-value-bytes", optarg, 1024, 1000000000, &v) != 0)
        return 2;
      o->max_value_bytes = (int)v;
      break;
    case OPT_MAXLIKE:
      if (parse_num("max-like-pattern", optarg, 1, 50000, &v) != 0)
        return 2;
      o->max_like_pattern = (int)v;
      break;
    case OPT_MAXMEM:
      if (parse_num("max-memory-mib", optarg, 0, (long long)1 << 30, &v) != 0)
        return 2;
      if (v > 0 && v < 16) {
        fprintf(stderr, "lithd: --max-memory-mib wants 0 (no ceiling) or at least 16\n");
        return 2;
      }
      o->max_memory_mib = v;
      break;
    case OPT_GRACE:
      if (parse_num("stop-grace-ms", optarg, 0, (long long)3600 * 1000, &v) != 0)
        return 2;
      o->stop_grace_ms = v;
      break;
    case OPT_WRITETIMEOUT:
      if (parse_num("write-timeout-ms", optarg, 0, (long long)24 * 3600 * 1000, &v) != 0)
        return 2;
      o->write_timeout_ms = v;
      break;
    case OPT_LOGLEVEL:
      if ((o->log_level = lithd_log_level_parse(optarg)) < 0) {
        fprintf(stderr, "lithd: --log-level wants error, warn, info or debug\n");
        return 2;
      }
      break;
    case OPT_LOGFORMAT:
      if ((o->log_format = lithd_log_format_parse(optarg)) < 0) {
        fprintf(stderr, "lithd: --log-format wants text or json\n");
        return 2;
      }
      break;
    case OPT_LOG:
      if (set_path(&o->log_file, optarg, base) != 0)
        goto nomem;
      break;
    case OPT_CONFIG:
      if (base != NULL) {
        fprintf(stderr, "lithd: a config file cannot name another (\"config\")\n");
        return 2;
      }
      break; /* read before this pass */
    case OPT_HELP: usage(stdout); return 1;
    case OPT_VERSION: printf("lithd %s\n", LITH_VERSION); return 1;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "lithd: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  return 0;
nomem:
  fprintf(stderr, "lithd: out of memory\n");
  return 2;
}

/* Read `path` as "key = value" lines into a pass of "--key=value". */
static int parse_config(const char *path, lithd_opts *o) {
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
    const struct option *opt;
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
    for (opt = longs; opt->name != NULL; opt++)
      if (strcmp(opt->name, k) == 0)
        break;
    if (opt->name == NULL || opt->val == OPT_HELP || opt->val == OPT_VERSION || opt->val == OPT_CONFIG) {
      fprintf(stderr, "lithd: %s:%d: unknown setting \"%s\"\n", path, lineno, k);
      goto out;
    }
    if (opt->has_arg == required_argument && (v == NULL || *v == '\0')) {
      fprintf(stderr, "lithd: %s:%d: \"%s\" needs a value (%s = ...)\n", path, lineno, k, k);
      goto out;
    }
    need = strlen(k) + (v != NULL ? strlen(v) : 0) + 4;
    if ((args[nargs] = malloc(need)) == NULL)
      goto nomem;
    if (v != NULL)
      snprintf(args[nargs], need, "--%s=%s", k, v);
    else
      snprintf(args[nargs], need, "--%s", k);
    nargs++;
  }
  rc = parse_pass(nargs, args, o, base);
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

/* --dqlite: refuse what needs a local file, then stand the cluster's
 * database in as the one database (its path "dqlite:NAME" is only a
 * label; --schema and --commands go to it as to any). */
static int dqlite_check(lithd_opts *o) {
  const char *bad = o->n_dbs > 0              ? "--db (the database is the cluster's)"
                    : o->restore != NULL      ? "--restore (restore a node's data directory instead)"
                    : o->backup_dir != NULL   ? "--backup-dir (every node keeps a full copy)"
                    : o->litestream           ? "--litestream (Raft replicates; there is no local WAL)"
                    : o->checkpoint_given     ? "--checkpoint (each node checkpoints its own WAL)"
                    : o->checkpoint_pages > 0 ? "--checkpoint-pages (each node checkpoints its own WAL)"
                    : o->default_db != NULL   ? "--default (one database: --dqlite-db)"
                    : o->file_mode > 0        ? "--file-mode (lithd creates no file)"
                                              : NULL;
  const char *name = o->dqlite_db != NULL ? o->dqlite_db : LITHD_DB_MAIN;
  size_t n = strlen(name) + 8;
  if (bad != NULL) {
    fprintf(stderr, "lithd: --dqlite cannot go with %s\n", bad);
    return 2;
  }
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
  const char *config = NULL;
  int i, rc;

  memset(o, 0, sizeof *o);
  snprintf(o->host, sizeof o->host, "%s", LITHD_DEFAULT_HOST);
  o->port = LITHD_DEFAULT_PORT;
  o->synchronous = LITH_SYNC_NORMAL;
  o->checkpoint = LITH_CHECKPOINT_WRITER;
  o->queue_wait_ms = 2000;
  o->max_memory_mib = 1024;
  o->stop_grace_ms = 10000;
  o->write_timeout_ms = 30000;
  o->log_level = LITHD_LOG_INFO;

  /* --config first, wherever it stands, so the command line can override. */
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      break;
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      config = argv[i + 1];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      config = argv[i] + 9;
  }
  if (config != NULL && (rc = parse_config(config, o)) != 0)
    return rc;
  if ((rc = parse_pass(argc, argv, o, NULL)) != 0)
    return rc;

  if (o->dqlite != NULL && (rc = dqlite_check(o)) != 0)
    return rc;
  if (o->dqlite == NULL && o->dqlite_db != NULL) {
    fprintf(stderr, "lithd: --dqlite-db goes with --dqlite ADDR[,ADDR...]\n");
    return 2;
  }
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
  if (o->force && o->restore == NULL) {
    fprintf(stderr, "lithd: --force goes with --restore FROM only\n");
    return 2;
  }
  if (!is_loopback_host(o->host) && o->token_file == NULL) {
    fprintf(stderr, "lithd: refusing to listen on %s (not loopback) without --token-file\n", o->host);
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
  free(o->allow_origins);
  free(o->allow_hosts);
  free(o->backup_dir);
  free(o->restore);
  free(o->dqlite);
  free(o->dqlite_db);
  free(o->log_file);
  memset(o, 0, sizeof *o);
}
