/*
 * lith — the command-line client of lithd.
 *
 * Design:
 *   - One request per run: the command line becomes one JSON body (built
 *     with jansson, so quoting is never the shell user's problem), sent by
 *     client.c over TCP or a Unix socket; the answer is printed as tab-
 *     separated lines, or unchanged with --json.
 *   - Arguments are typed the way a shell user means them: whatever parses
 *     as a JSON scalar (or {"base64": ...}) is that value, anything else is
 *     text. Integers go through jansson's json_int_t (long long) and never a
 *     double, so every 64-bit integer arrives exact; a number that cannot be
 *     carried exactly (too big an integer, an infinite real) is a usage error
 *     rather than silently becoming text.
 *   - Global options come before the command, and everything after the
 *     command is its arguments: "-5" is a number to bind, not an option.
 *   - The exit status tells a script what happened without parsing text:
 *     0 done, 1 lithd answered with an error (nothing of the command was
 *     kept), 2 the command line was wrong (nothing was sent), 3 no usable
 *     answer (cannot connect, timed out, cut off, not HTTP) — for a write,
 *     3 after sending means its outcome is unknown, and the message says so.
 *   - lithd answers errors as {"error": {"code", "message"[, "statement"]}}
 *     (an older lithd's HTTP layer said {"error": "message"}); either is
 *     printed on one line.
 *   - Every error path frees what it holds and leaves through one exit
 *     (goto out), so a sanitizer run shows no leak on any path.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "lith.h" /* LITH_VERSION */
#include "token.h"

#define DEFAULT_URL "http://127.0.0.1:8765"
#define DEFAULT_TIMEOUT_S 30
#define BODY_MAX ((size_t)1 << 30)

enum { EXIT_DONE = 0, EXIT_SERVER = 1, EXIT_USAGE = 2, EXIT_NO_ANSWER = 3 };

/* A database name of --db: 1 to 64 of [A-Za-z0-9_-], lithd's rule, so
 * that it goes into the path as is and can never add a piece to it. */
#define DB_NAME_MAX 64

struct cli {
  lithc_endpoint ep;
  char *token;    /* malloc'd; NULL for none */
  const char *db; /* --db NAME (points into argv or environ); NULL: lithd's only or default one */
  int json;
  int timeout_ms;
  const char *cacert; /* --cacert FILE (points into argv); NULL: SSL_CERT_FILE or the system's CAs */
};

/* ---- Messages ----------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: lith [OPTIONS] COMMAND [ARGS...]\n"
          "\n"
          "The command-line client of lithd (one request per run).\n"
          "\n"
          "Commands:\n"
          "  do SQL [ARG...]          run one statement as a command (POST /v1/do)\n"
          "  do -f FILE|-             POST the file's JSON (or stdin's) as is to /v1/do:\n"
          "                           {\"statements\": [{\"sql\": ..., \"params\": [...]}, ...]},\n"
          "                           all run in one command, all or nothing\n"
          "  query SQL [ARG...]       run one read-only query (POST /v1/query)\n"
          "  run NAME [KEY=VALUE...]  run the named command NAME (POST /v1/commands/NAME)\n"
          "  batch FILE|-             POST the file's JSON (or stdin's) as is to /v1/batch:\n"
          "                           {\"commands\": [{\"statements\": [...]}, ...]}, each\n"
          "                           command its own all-or-nothing, usually one commit;\n"
          "                           prints \"command N\" and its results, or its error on\n"
          "                           stderr (exit 1 if any command failed; with --json\n"
          "                           the answer as is, exit 0 once lithd answered 200)\n"
          "  stats                    the writer's counters, one \"key value\" per line\n"
          "  health                   \"ok\" if lithd answers /healthz\n"
          "  backup NAME              a consistent copy of the database, as a new file NAME\n"
          "                           in lithd's --backup-dir (never replacing one)\n"
          "  backup --out FILE [--sql] [--force]\n"
          "                           download a consistent copy (GET /v1/backup; --sql:\n"
          "                           as an SQL script) into FILE, written as FILE.tmp\n"
          "                           then renamed; an existing FILE only with --force\n"
          "\n"
          "Options (before the command):\n"
          "  --url http://HOST:PORT   lithd's address (default $LITHD_URL, else " DEFAULT_URL ");\n"
          "                           https://HOST:PORT for a lithd with --tls-cert: its\n"
          "                           certificate is verified, and must name HOST\n"
          "  --cacert FILE            https: trust the CA certificates in FILE (PEM)\n"
          "                           instead of the system's (default $SSL_CERT_FILE)\n"
          "  --unix PATH              connect to lithd's Unix socket (default $LITHD_UNIX;\n"
          "                           when both variables are set the socket wins)\n"
          "  --token-file FILE        send the bearer token in FILE (default\n"
          "                           $LITHD_TOKEN_FILE, else the token in $LITHD_TOKEN)\n"
          "  --db NAME                the database NAME of a lithd serving several\n"
          "                           (lithd --db NAME=PATH ...): every request goes to\n"
          "                           /v1/db/NAME/... (do, query, run, batch, stats,\n"
          "                           backup); NAME is 1 to 64 of A-Z a-z 0-9 _ -\n"
          "                           (default $LITHD_DB, else lithd's only or default one)\n"
          "  --json                   print lithd's JSON answer unchanged\n"
          "  --timeout SEC            give up after SEC seconds (default %d; 0: never)\n"
          "  --help, --version\n"
          "\n"
          "ARG and VALUE: a JSON number, null, true/false (1/0), a \"quoted string\" or\n"
          "{\"base64\": \"...\"} (a blob) is bound as that value; anything else as text.\n"
          "So 42 binds the integer 42, '\"42\"' the text 42, 007 and hello are text.\n"
          "Integers are exact over the whole 64-bit range; one beyond it is an error.\n"
          "\n"
          "Output: rows as tab-separated lines under a header of column names (NULL\n"
          "for null, blobs as base64:...; text as is, so use --json when values may\n"
          "hold tabs or line breaks); for a statement without columns, \"changes N,\n"
          "last_insert_rowid M\". Errors go to stderr as \"lith: CODE: MESSAGE\".\n"
          "\n"
          "Exit status:\n"
          "  0  success\n"
          "  1  lithd answered with an error (a failed command changed nothing)\n"
          "  2  usage error: nothing was sent\n"
          "  3  no usable answer: cannot connect, timed out, connection cut, not HTTP,\n"
          "     or the output could not be written. After a write was sent, its\n"
          "     outcome is then unknown (the message says so).\n",
          DEFAULT_TIMEOUT_S);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  fputs("lith: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n(lith --help for the usage)\n", stderr);
  return EXIT_USAGE;
}

/* ---- Arguments to JSON values ------------------------------------------- */

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? — JSON's number grammar. */
static int is_json_number(const char *s) {
  if (*s == '-')
    s++;
  if (*s == '0') {
    s++;
  } else if (isdigit((unsigned char)*s)) {
    while (isdigit((unsigned char)*s))
      s++;
  } else {
    return 0;
  }
  if (*s == '.') {
    s++;
    if (!isdigit((unsigned char)*s))
      return 0;
    while (isdigit((unsigned char)*s))
      s++;
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-')
      s++;
    if (!isdigit((unsigned char)*s))
      return 0;
    while (isdigit((unsigned char)*s))
      s++;
  }
  return *s == '\0';
}

/* The JSON value an argument stands for (a new reference), or NULL after
 * a message on stderr. `what` names the argument in messages. */
static json_t *arg_value(const char *s, const char *what) {
  size_t n = strlen(s);
  json_error_t jerr;
  json_t *v;

  /* A JSON value only when it is exactly one: no surrounding blanks. */
  if (n > 0 && !isspace((unsigned char)s[0]) && !isspace((unsigned char)s[n - 1])) {
    v = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
    if (v != NULL) {
      json_t *b64 = json_object_get(v, "base64");
      if (!json_is_object(v) && !json_is_array(v))
        return v;
      if (json_is_object(v) && json_object_size(v) == 1 && json_is_string(b64))
        return v;
      json_decref(v); /* another object or an array: JSON text, passed as text */
    } else if (is_json_number(s)) {
      usage_error("%s: %s cannot be carried exactly (integers must fit in 64 bits, reals be "
                  "finite); quote it as '\"%s\"' to pass it as text",
                  what, s, s);
      return NULL;
    }
  }
  v = json_stringn(s, n);
  if (v == NULL)
    usage_error("%s is not valid UTF-8", what);
  return v;
}

/* ---- Printing the answer ------------------------------------------------ */

/* A real in the fewest digits that read back as the same double, with a
 * ".0" when it would otherwise look like an integer. */
static void print_real(double d) {
  char buf[64];
  int prec;
  if (!isfinite(d)) {
    printf("%s", isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
    return;
  }
  for (prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (strtod(buf, NULL) == d)
      break;
  }
  fputs(buf, stdout);
  if (strpbrk(buf, ".eE") == NULL)
    fputs(".0", stdout);
}

static void print_value(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_STRING: fwrite(json_string_value(v), 1, json_string_length(v), stdout); break;
  case JSON_INTEGER: printf("%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
  case JSON_REAL: print_real(json_real_value(v)); break;
  case JSON_NULL: fputs("NULL", stdout); break;
  case JSON_TRUE: fputs("true", stdout); break;
  case JSON_FALSE: fputs("false", stdout); break;
  case JSON_OBJECT: {
    const json_t *b64 = json_object_get(v, "base64");
    if (json_object_size(v) == 1 && json_is_string(b64)) {
      fputs("base64:", stdout);
      fwrite(json_string_value(b64), 1, json_string_length(b64), stdout);
      break;
    }
  } /* fall through: any other object as JSON */
  /* FALLTHROUGH */
  default: {
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text != NULL)
      fputs(text, stdout);
    free(text);
  }
  }
}

static int unexpected(const char *what) {
  fprintf(stderr, "lith: unexpected answer from lithd: %s\n", what);
  return EXIT_NO_ANSWER;
}

/* {"results": [{"changes", "last_insert_rowid", "columns", "rows"}, ...]} */
static int print_results(const json_t *root) {
  const json_t *results = json_object_get(root, "results");
  size_t i, j, k;

  if (!json_is_array(results))
    return unexpected("no \"results\" array");
  for (i = 0; i < json_array_size(results); i++) {
    const json_t *r = json_array_get(results, i);
    const json_t *cols = json_object_get(r, "columns");
    const json_t *rows = json_object_get(r, "rows");

    if (i > 0)
      putchar('\n');
    if (json_is_array(cols) && json_array_size(cols) > 0) {
      if (!json_is_array(rows))
        return unexpected("columns without \"rows\"");
      for (k = 0; k < json_array_size(cols); k++) {
        if (k > 0)
          putchar('\t');
        print_value(json_array_get(cols, k));
      }
      putchar('\n');
      for (j = 0; j < json_array_size(rows); j++) {
        const json_t *row = json_array_get(rows, j);
        if (!json_is_array(row))
          return unexpected("a row that is not an array");
        for (k = 0; k < json_array_size(row); k++) {
          if (k > 0)
            putchar('\t');
          print_value(json_array_get(row, k));
        }
        putchar('\n');
      }
    } else {
      const json_t *ch = json_object_get(r, "changes");
      const json_t *id = json_object_get(r, "last_insert_rowid");
      if (!json_is_integer(ch) || !json_is_integer(id))
        return unexpected("a result without \"changes\" and \"last_insert_rowid\"");
      printf("changes %" JSON_INTEGER_FORMAT ", last_insert_rowid %" JSON_INTEGER_FORMAT "\n",
             json_integer_value(ch), json_integer_value(id));
    }
  }
  return EXIT_DONE;
}

/* A failed command's or request's {"code", "message"[, "statement"]}, on
 * one line of stderr after `prefix`. */
static void print_error_object(const char *prefix, const json_t *e) {
  const json_t *code = json_object_get(e, "code");
  const json_t *msg = json_object_get(e, "message");
  const json_t *st = json_object_get(e, "statement");
  fprintf(stderr, "lith: %s%s: %s", prefix, json_is_string(code) ? json_string_value(code) : "error",
          json_is_string(msg) ? json_string_value(msg) : "(no message)");
  if (json_is_integer(st))
    fprintf(stderr, " (statement %" JSON_INTEGER_FORMAT ")", json_integer_value(st));
}

/* /v1/batch: {"results": [{"results": [...]} | {"error": {...}}, ...]}: a
 * "command N" line and its results for each command that succeeded, a line
 * on stderr for each that failed (then the exit status is 1). */
static int print_batch(const json_t *root) {
  const json_t *results = json_object_get(root, "results");
  int status = EXIT_DONE, printed = 0;
  char prefix[48];
  size_t i;

  if (!json_is_array(results))
    return unexpected("no \"results\" array");
  for (i = 0; i < json_array_size(results); i++) {
    const json_t *c = json_array_get(results, i);
    const json_t *e = json_object_get(c, "error");
    if (json_is_object(e)) {
      snprintf(prefix, sizeof prefix, "command %zu: ", i);
      print_error_object(prefix, e);
      fputc('\n', stderr);
      status = EXIT_SERVER;
      continue;
    }
    if (printed++ > 0)
      putchar('\n');
    printf("command %zu\n", i);
    int rc = print_results(c);
    if (rc != EXIT_DONE)
      return rc;
  }
  return status;
}

/* Every member as "key value". */
static int print_pairs(const json_t *root) {
  const char *key;
  json_t *v;
  if (!json_is_object(root))
    return unexpected("not a JSON object");
  json_object_foreach((json_t *)root, key, v) {
    printf("%s ", key);
    print_value(v);
    putchar('\n');
  }
  return EXIT_DONE;
}

static int print_health(const json_t *root) {
  if (!json_is_true(json_object_get(root, "ok")))
    return unexpected("no \"ok\": true");
  puts("ok");
  return EXIT_DONE;
}

static int print_backup(const json_t *root) {
  const json_t *dest = json_object_get(root, "dest");
  const json_t *bytes = json_object_get(root, "bytes");
  const json_t *ms = json_object_get(root, "ms");
  if (!json_is_string(dest) || !json_is_integer(bytes) || !json_is_integer(ms))
    return print_pairs(root);
  printf("backup %s: %" JSON_INTEGER_FORMAT " bytes in %" JSON_INTEGER_FORMAT " ms\n",
         json_string_value(dest), json_integer_value(bytes), json_integer_value(ms));
  return EXIT_DONE;
}

/* Say what lithd's error answer means, on one line of stderr. */
static void print_server_error(const struct cli *cli, const char *method, const char *path,
                               const lithc_response *r, const json_t *root) {
  const json_t *e = json_object_get(root, "error");
  const char *retry;
  size_t retry_len = 0;

  if (json_is_object(e)) { /* {"error": {"code", "message"[, "statement"]}} */
    const json_t *code = json_object_get(e, "code");
    const json_t *msg = json_object_get(e, "message");
    const char *c = json_is_string(code) ? json_string_value(code) : "error";
    print_error_object("", e);
    if (r->status == 401)
      fputs(cli->token != NULL ? " (the token was refused)"
                               : " (give --token-file FILE, or set LITHD_TOKEN_FILE)",
            stderr);
    else if (strcmp(c, "method_not_allowed") == 0 ||
             (r->status == 404 && json_is_string(msg) && strcmp(json_string_value(msg), "not found") == 0))
      fputs(" (this lithd does not serve it: is it older than this lith?)", stderr);
  } else { /* an older lithd's {"error": "..."}, or not JSON at all */
    fprintf(stderr, "lith: %s %s: HTTP %d", method, path, r->status);
    if (json_is_string(e)) {
      fprintf(stderr, ": %s", json_string_value(e));
    } else if (r->body_len > 0) {
      size_t n = strcspn(r->body, "\r\n");
      fprintf(stderr, ": %.*s", (int)(n > 200 ? 200 : n), r->body);
    }
    if (r->status == 401)
      fputs(cli->token != NULL ? " (the token was refused)"
                               : " (give --token-file FILE, or set LITHD_TOKEN_FILE)",
            stderr);
    else if ((r->status == 404 || r->status == 405) && json_is_string(e))
      fputs(" (this lithd does not serve it: is it older than this lith?)", stderr);
  }
  retry = lithc_response_header(r, "retry-after", &retry_len);
  if (retry != NULL)
    fprintf(stderr, " (retry after %.*s s)", (int)retry_len, retry);
  fputc('\n', stderr);
}

/* ---- One exchange ------------------------------------------------------- */

typedef int (*printer)(const json_t *root);

/* Handle the answer to method/path: print it (`print` for a 2xx in text
 * mode, the body as is with --json) or its error. Returns the exit status.
 * Apart from exchange so that the fuzzer reaches it without a server. */
static int handle_answer(const struct cli *cli, const char *method, const char *path, const lithc_response *r,
                         printer print) {
  json_t *root;
  json_error_t jerr;
  int ok = r->status >= 200 && r->status < 300;
  int status;

  root = json_loadb(r->body, r->body_len, JSON_ALLOW_NUL, &jerr);
  if (cli->json && root != NULL) {
    fwrite(r->body, 1, r->body_len, stdout);
    if (r->body_len == 0 || r->body[r->body_len - 1] != '\n')
      putchar('\n');
  }
  if (!ok) {
    print_server_error(cli, method, path, r, root);
    status = EXIT_SERVER;
  } else if (root == NULL) {
    fprintf(stderr, "lith: %s %s: the answer is not JSON: %s\n", method, path, jerr.text);
    status = EXIT_NO_ANSWER;
  } else {
    status = cli->json ? EXIT_DONE : print(root);
  }
  json_decref(root);
  return status;
}

/* The path a request for `path` ("/v1/do", "/v1/commands/X", ...) goes to:
 * with --db NAME, "/v1/db/NAME/do" and so on (NAME was checked: it adds
 * no piece to the path); else `path` itself. /healthz is lithd's, not a
 * database's: never routed. Returns path or buf. */
static const char *route(const struct cli *cli, const char *path, char *buf, size_t cap) {
  if (cli->db == NULL || strncmp(path, "/v1/", 4) != 0)
    return path;
  snprintf(buf, cap, "/v1/db/%s/%s", cli->db, path + 4);
  return buf;
}

/* Send the request and handle the answer (handle_answer). Returns the exit
 * status. */
static int exchange(const struct cli *cli, const char *method, const char *path, const char *body,
                    size_t body_len, printer print) {
  lithc_request req;
  lithc_response r;
  char err[1024], routed[1200];
  int rc, status;

  path = route(cli, path, routed, sizeof routed);
  memset(&req, 0, sizeof req);
  req.method = method;
  req.path = path;
  req.token = cli->token;
  req.ca_file = cli->cacert;
  req.body = body;
  req.body_len = body_len;
  req.timeout_ms = cli->timeout_ms;
  rc = lithc_request_send(&cli->ep, &req, &r, err, sizeof err);
  if (rc != LITHC_OK) {
    fprintf(stderr, "lith: %s\n", err);
    return rc == LITHC_BAD_ARG ? EXIT_USAGE : EXIT_NO_ANSWER;
  }
  status = handle_answer(cli, method, path, &r, print);
  lithc_response_free(&r);
  return status;
}

/* JSON text of `v` (stolen), sent to path and printed. */
static int exchange_json(const struct cli *cli, const char *path, json_t *v, printer print) {
  char *body;
  int status;
  if (v == NULL) {
    fprintf(stderr, "lith: out of memory\n");
    return EXIT_NO_ANSWER;
  }
  body = json_dumps(v, JSON_COMPACT);
  json_decref(v);
  if (body == NULL) {
    fprintf(stderr, "lith: out of memory\n");
    return EXIT_NO_ANSWER;
  }
  status = exchange(cli, "POST", path, body, strlen(body), print);
  free(body);
  return status;
}

/* ---- Commands ----------------------------------------------------------- */

/* do / query: {"statements": [{"sql": SQL, "params": [ARG...]}]} */
static int statement_cmd(const struct cli *cli, const char *cmd, const char *path, int argc, char **argv) {
  json_t *params = NULL, *sql = NULL, *body = NULL;
  char what[32];
  int i;

  if (argc < 1)
    return usage_error("%s: missing SQL (lith %s SQL [ARG...])", cmd, cmd);
  sql = json_string(argv[0]);
  if (sql == NULL)
    return usage_error("%s: the SQL is not valid UTF-8", cmd);
  params = json_array();
  if (params == NULL)
    goto nomem;
  for (i = 1; i < argc; i++) {
    json_t *v;
    snprintf(what, sizeof what, "argument %d", i);
    v = arg_value(argv[i], what);
    if (v == NULL)
      goto usage;
    if (json_array_append_new(params, v) != 0)
      goto nomem;
  }
  body = json_pack("{s:[{s:o,s:o}]}", "statements", "sql", sql, "params", params);
  /* json_pack's "o" steals both references, even when it fails */
  return exchange_json(cli, path, body, print_results);
nomem:
  fprintf(stderr, "lith: out of memory\n");
  json_decref(sql);
  json_decref(params);
  return EXIT_NO_ANSWER;
usage:
  json_decref(sql);
  json_decref(params);
  return EXIT_USAGE;
}

static int send_file(const struct cli *cli, const char *cmd, const char *path, const char *file,
                     printer print);

/* do SQL [ARG...], or do -f FILE|- (the body as is: "-f" is never SQL). */
static int cmd_do(const struct cli *cli, int argc, char **argv) {
  if (argc >= 1 && strcmp(argv[0], "-f") == 0) {
    if (argc != 2)
      return usage_error("do -f: wants one FILE, or - for stdin (lith do -f FILE|-)");
    return send_file(cli, "do -f", "/v1/do", argv[1], print_results);
  }
  return statement_cmd(cli, "do", "/v1/do", argc, argv);
}

static int cmd_query(const struct cli *cli, int argc, char **argv) {
  return statement_cmd(cli, "query", "/v1/query", argc, argv);
}

/* run NAME [KEY=VALUE...]: {"params": {"KEY": VALUE, ...}} */
static int cmd_run(const struct cli *cli, int argc, char **argv) {
  json_t *params = NULL;
  char path[1024];
  size_t n = 0;
  const char *p;
  int i;

  if (argc < 1)
    return usage_error("run: missing NAME (lith run NAME [KEY=VALUE...])");
  if (argv[0][0] == '\0')
    return usage_error("run: the command name is empty");
  /* /v1/commands/ + NAME, percent-encoded outside the unreserved set */
  n = (size_t)snprintf(path, sizeof path, "/v1/commands/");
  for (p = argv[0]; *p != '\0'; p++) {
    unsigned char ch = (unsigned char)*p;
    if (n + 4 > sizeof path)
      return usage_error("run: the command name is too long");
    if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~')
      path[n++] = (char)ch;
    else
      n += (size_t)snprintf(path + n, sizeof path - n, "%%%02X", ch);
  }
  path[n] = '\0';

  params = json_object();
  if (params == NULL)
    goto nomem;
  for (i = 1; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    char *key;
    json_t *v;
    char what[64];

    if (eq == NULL || eq == argv[i]) {
      usage_error("run: \"%s\" is not KEY=VALUE", argv[i]);
      goto usage;
    }
    key = strndup(argv[i], (size_t)(eq - argv[i]));
    if (key == NULL)
      goto nomem;
    if (json_object_get(params, key) != NULL) {
      usage_error("run: parameter %s given twice", key);
      free(key);
      goto usage;
    }
    snprintf(what, sizeof what, "parameter %.40s", key);
    v = arg_value(eq + 1, what);
    if (v == NULL) {
      free(key);
      goto usage;
    }
    if (json_object_set_new(params, key, v) != 0) {
      /* jansson refuses a key that is not UTF-8 (v was freed) */
      usage_error("run: parameter name %s is not valid UTF-8", key);
      free(key);
      goto usage;
    }
    free(key);
  }
  return exchange_json(cli, path, json_pack("{s:o}", "params", params), print_results);
nomem:
  fprintf(stderr, "lith: out of memory\n");
  json_decref(params);
  return EXIT_NO_ANSWER;
usage:
  json_decref(params);
  return EXIT_USAGE;
}

/* Read a whole file ("-": stdin) into a malloc'd buffer. */
static char *read_file(const char *name, size_t *len) {
  FILE *f = strcmp(name, "-") == 0 ? stdin : fopen(name, "rb");
  char *buf = NULL;
  size_t cap = 0, n = 0;

  if (f == NULL) {
    fprintf(stderr, "lith: %s: %s\n", name, strerror(errno));
    return NULL;
  }
  for (;;) {
    size_t got;
    if (cap - n < 65536) {
      char *nb;
      cap = cap == 0 ? 65536 : cap * 2;
      if (cap > BODY_MAX) {
        fprintf(stderr, "lith: %s: larger than %zu bytes\n", name, BODY_MAX);
        goto fail;
      }
      nb = realloc(buf, cap);
      if (nb == NULL) {
        fprintf(stderr, "lith: out of memory\n");
        goto fail;
      }
      buf = nb;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  if (ferror(f)) {
    fprintf(stderr, "lith: reading %s: %s\n", name, strerror(errno));
    goto fail;
  }
  if (f != stdin)
    fclose(f);
  *len = n;
  return buf;
fail:
  free(buf);
  if (f != stdin)
    fclose(f);
  return NULL;
}

/* POST the JSON of `file` (- for stdin) as is to `path`, unless it is
 * empty; `cmd` names the command in messages. */
static int send_file(const struct cli *cli, const char *cmd, const char *path, const char *file,
                     printer print) {
  char *body;
  size_t len = 0, i;
  int status;

  body = read_file(file, &len);
  if (body == NULL)
    return EXIT_USAGE;
  for (i = 0; i < len && isspace((unsigned char)body[i]); i++) {
  }
  if (i == len) {
    free(body);
    return usage_error("%s: %s is empty", cmd, file);
  }
  /* One command's {"statements": ...} sent to /v1/batch would only earn a
   * 400: say which command takes it. */
  if (strcmp(path, "/v1/batch") == 0) {
    json_t *root = json_loadb(body, len, 0, NULL);
    int one = json_is_object(root) && json_object_get(root, "statements") != NULL &&
              json_object_get(root, "commands") == NULL;
    json_decref(root);
    if (one) {
      free(body);
      return usage_error("batch: %s holds {\"statements\": [...]}, one command: send it with "
                         "lith do -f %s, or as {\"commands\": [{\"statements\": [...]}]}",
                         file, file);
    }
  }
  status = exchange(cli, "POST", path, body, len, print);
  free(body);
  return status;
}

static int cmd_batch(const struct cli *cli, int argc, char **argv) {
  if (argc != 1)
    return usage_error("batch: wants one FILE, or - for stdin (lith batch FILE|-)");
  return send_file(cli, "batch", "/v1/batch", argv[0], print_batch);
}

static int no_args(const char *cmd, int argc, char **argv) {
  if (argc == 0)
    return 0;
  if (argv[0][0] == '-')
    return usage_error("%s: options go before the command (lith %s %s)", cmd, argv[0], cmd);
  return usage_error("%s takes no arguments", cmd);
}

static int cmd_stats(const struct cli *cli, int argc, char **argv) {
  int rc = no_args("stats", argc, argv);
  return rc != 0 ? rc : exchange(cli, "GET", "/v1/stats", NULL, 0, print_pairs);
}

static int cmd_health(const struct cli *cli, int argc, char **argv) {
  int rc = no_args("health", argc, argv);
  return rc != 0 ? rc : exchange(cli, "GET", "/healthz", NULL, 0, print_health);
}

/* Seconds since some fixed point, for the time a download took. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* backup --out FILE [--sql] [--force]: GET /v1/backup into FILE.tmp, synced,
 * checked (an SQLite file's header), renamed to FILE, the directory synced:
 * FILE is the old file or the whole new copy, never a part. */
static int backup_download(const struct cli *cli, const char *out, int sql, int force) {
  char *tmp = NULL, *dir = NULL, err[1024], magic[16], routed[128];
  const char *path = route(cli, sql ? "/v1/backup?format=sql" : "/v1/backup", routed, sizeof routed);
  lithc_request req;
  lithc_response r;
  long long bytes = 0;
  struct stat st;
  int fd = -1, rc, status = EXIT_NO_ANSWER;
  double t0 = now_s();

  memset(&r, 0, sizeof r);
  if (!force && lstat(out, &st) == 0)
    return usage_error("backup: %s exists; --force replaces it", out);
  if ((tmp = malloc(strlen(out) + sizeof ".tmp")) == NULL || (dir = strdup(out)) == NULL) {
    fprintf(stderr, "lith: out of memory\n");
    goto out;
  }
  sprintf(tmp, "%s.tmp", out);
  unlink(tmp);                                                 /* a run that was cut short left it */
  fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600); /* the data is private */
  if (fd < 0) {
    fprintf(stderr, "lith: backup: cannot create %s: %s\n", tmp, strerror(errno));
    goto out;
  }
  memset(&req, 0, sizeof req);
  req.method = "GET";
  req.path = path;
  req.token = cli->token;
  req.ca_file = cli->cacert;
  req.timeout_ms = cli->timeout_ms;
  rc = lithc_download(&cli->ep, &req, fd, &r, &bytes, err, sizeof err);
  if (rc != LITHC_OK) {
    fprintf(stderr, "lith: backup: %s\n", err);
    status = rc == LITHC_BAD_ARG ? EXIT_USAGE : EXIT_NO_ANSWER;
    goto out;
  }
  if (r.status != 200) {
    status = handle_answer(cli, "GET", path, &r, print_pairs);
    goto out;
  }
  if (!sql && (pread(fd, magic, sizeof magic, 0) != (ssize_t)sizeof magic ||
               memcmp(magic, "SQLite format 3", sizeof magic) != 0)) {
    fprintf(stderr, "lith: backup: the download is not an SQLite database\n");
    goto out;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    fd = -1;
    fprintf(stderr, "lith: backup: cannot write %s: %s\n", tmp, strerror(errno));
    goto out;
  }
  fd = -1;
  if (rename(tmp, out) != 0) {
    fprintf(stderr, "lith: backup: cannot rename %s to %s: %s\n", tmp, out, strerror(errno));
    goto out;
  }
  free(tmp);
  tmp = NULL;
  {
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
  }
  double took = now_s() - t0;
  printf("backup %s: %lld bytes in %.0f ms (%.1f MB/s)\n", out, bytes, took * 1000,
         took > 0 ? (double)bytes / 1e6 / took : 0.0);
  status = EXIT_DONE;
out:
  if (fd >= 0)
    close(fd);
  if (tmp != NULL)
    unlink(tmp);
  free(tmp);
  free(dir);
  lithc_response_free(&r);
  return status;
}

/* backup NAME: {"dest": NAME}, a new file in lithd's --backup-dir;
 * backup --out FILE [--sql] [--force]: a download (backup_download). */
static int cmd_backup(const struct cli *cli, int argc, char **argv) {
  json_t *d;

  if (argc >= 1 && argv[0][0] == '-') {
    const char *out = NULL;
    int sql = 0, force = 0;
    for (int i = 0; i < argc; i++) {
      if (strcmp(argv[i], "--out") == 0 && (i + 1 == argc || argv[i + 1][0] == '\0'))
        return usage_error("backup: --out needs a FILE");
      else if (strcmp(argv[i], "--out") == 0)
        out = argv[++i];
      else if (strcmp(argv[i], "--sql") == 0)
        sql = 1;
      else if (strcmp(argv[i], "--force") == 0)
        force = 1;
      else
        return usage_error("backup: unexpected \"%s\" (lith backup --out FILE [--sql] [--force])", argv[i]);
    }
    if (out == NULL)
      return usage_error("backup: --out FILE is missing (lith backup --out FILE [--sql] [--force])");
    return backup_download(cli, out, sql, force);
  }
  if (argc != 1)
    return usage_error("backup: wants one NAME (lith backup NAME)");
  if (argv[0][0] == '\0')
    return usage_error("backup: NAME is empty");
  d = json_string(argv[0]);
  if (d == NULL)
    return usage_error("backup: NAME is not valid UTF-8");
  return exchange_json(cli, "/v1/backup", json_pack("{s:o}", "dest", d), print_backup);
}

static const struct command {
  const char *name;
  int (*fn)(const struct cli *cli, int argc, char **argv);
} commands[] = {
    {"do", cmd_do},       {"query", cmd_query},   {"run", cmd_run},       {"batch", cmd_batch},
    {"stats", cmd_stats}, {"health", cmd_health}, {"backup", cmd_backup},
};

/* ---- Options ------------------------------------------------------------ */

/* The token in `path` (token.h's rules, the same as lithd's), or NULL
 * after a message. */
static char *read_token(const char *path) {
  char err[512];
  char *tok = lithd_token_read(path, err, sizeof err);
  if (tok == NULL)
    fprintf(stderr, "lith: token file %s\n", err);
  return tok;
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Whether s is a database name (DB_NAME_MAX). */
static int is_db_name(const char *s) {
  size_t n = 0;
  for (; s[n] != '\0'; n++) {
    char ch = s[n];
    if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') && !(ch >= '0' && ch <= '9') && ch != '_' &&
        ch != '-')
      return 0;
  }
  return n >= 1 && n <= DB_NAME_MAX;
}

/* Parse the options into *cli; *cmd_index is the command's place in argv.
 * Returns -1 to go on, or an exit status. */
static int parse_options(int argc, char **argv, struct cli *cli, int *cmd_index) {
  enum {
    OPT_URL = 256,
    OPT_UNIX,
    OPT_TOKEN_FILE,
    OPT_DB,
    OPT_JSON,
    OPT_TIMEOUT,
    OPT_HELP,
    OPT_VERSION,
    OPT_CACERT
  };
  static const struct option longs[] = {{"url", required_argument, NULL, OPT_URL},
                                        {"unix", required_argument, NULL, OPT_UNIX},
                                        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
                                        {"db", required_argument, NULL, OPT_DB},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                        {"help", no_argument, NULL, OPT_HELP},
                                        {"version", no_argument, NULL, OPT_VERSION},
                                        {"cacert", required_argument, NULL, OPT_CACERT},
                                        {NULL, 0, NULL, 0}};
  const char *url = NULL, *unix_path = NULL, *token_file = NULL;
  char err[512];
  int c;

  opterr = 0;
  cli->timeout_ms = DEFAULT_TIMEOUT_S * 1000;
  /* '+': stop at the command, so that its arguments may start with '-' */
  while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    switch (c) {
    case OPT_URL: url = optarg; break;
    case OPT_UNIX: unix_path = optarg; break;
    case OPT_TOKEN_FILE: token_file = optarg; break;
    case OPT_DB: cli->db = optarg; break;
    case OPT_CACERT: cli->cacert = optarg; break;
    case OPT_JSON: cli->json = 1; break;
    case OPT_TIMEOUT: {
      char *end;
      double s;
      errno = 0;
      s = strtod(optarg, &end);
      if (errno != 0 || end == optarg || *end != '\0' || !(s >= 0) || s > 1e6)
        return usage_error("--timeout wants seconds (0 to 1000000), got \"%s\"", optarg);
      cli->timeout_ms = (int)ceil(s * 1000);
      break;
    }
    case 'h':
    case OPT_HELP: usage(stdout); return EXIT_DONE;
    case OPT_VERSION: printf("lith %s\n", LITH_VERSION); return EXIT_DONE;
    case ':': return usage_error("%s needs a value", argv[optind - 1]);
    default: return usage_error("unknown option %s", argv[optind - 1]);
    }
  }
  if (url != NULL && unix_path != NULL)
    return usage_error("give --url or --unix, not both");
  if (cli->db == NULL)
    cli->db = env("LITHD_DB");
  if (cli->db != NULL && !is_db_name(cli->db))
    return usage_error("--db: \"%s\" is not a database name (1 to %d of A-Z a-z 0-9 _ -)", cli->db,
                       DB_NAME_MAX);
  if (optind >= argc)
    return usage_error("no command given");
  *cmd_index = optind;

  /* Where: the command line, else the environment (the socket first). */
  if (url == NULL && unix_path == NULL) {
    unix_path = env("LITHD_UNIX");
    if (unix_path == NULL)
      url = env("LITHD_URL");
    if (unix_path == NULL && url == NULL)
      url = DEFAULT_URL;
  }
  if (unix_path != NULL) {
    if (lithc_endpoint_unix(&cli->ep, unix_path, err, sizeof err) != LITHC_OK)
      return usage_error("%s", err);
  } else if (lithc_endpoint_url(&cli->ep, url, err, sizeof err) != LITHC_OK) {
    return usage_error("%s", err);
  }

  /* The token: --token-file, else $LITHD_TOKEN_FILE, else $LITHD_TOKEN. */
  if (token_file == NULL)
    token_file = env("LITHD_TOKEN_FILE");
  if (token_file != NULL) {
    cli->token = read_token(token_file);
    if (cli->token == NULL)
      return EXIT_USAGE;
  } else if (env("LITHD_TOKEN") != NULL) {
    cli->token = strdup(env("LITHD_TOKEN"));
    if (cli->token == NULL) {
      fprintf(stderr, "lith: out of memory\n");
      return EXIT_NO_ANSWER;
    }
    if (strpbrk(cli->token, "\r\n") != NULL)
      return usage_error("LITHD_TOKEN holds a line break");
  }
  return -1;
}

int main(int argc, char **argv) {
  struct cli cli;
  int status, cmd = 0;
  size_t i;

  memset(&cli, 0, sizeof cli);
  status = parse_options(argc, argv, &cli, &cmd);
  if (status >= 0)
    goto out;

  for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[cmd], commands[i].name) == 0)
      break;
  if (i == sizeof commands / sizeof commands[0])
    status = usage_error("unknown command \"%s\"", argv[cmd]);
  else
    status = commands[i].fn(&cli, argc - cmd - 1, argv + cmd + 1);
out:
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "lith: writing the output: %s\n", strerror(errno));
    if (status == EXIT_DONE)
      status = EXIT_NO_ANSWER;
  }
  free(cli.token);
  return status;
}
