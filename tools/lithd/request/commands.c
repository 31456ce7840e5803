/*
 * lithd named commands — see commands.h.
 *
 * Design: the file is split once at startup into commands and statements
 * (sql/split.h finds where SQLite ends a statement, as sqlite3_complete
 * would, so a ';' inside a string or a trigger body does not split it, in
 * time linear in the file); lithd_commands_check prepares each
 * statement once to validate it and to read its parameter names. A request
 * then only builds the JSON shape sqljson already knows
 * ({"statements": [{"sql", "params": {":name": value}}]}) from the request's
 * values (references, no copies) and hands it to lithd_batch_from_value, so
 * values, limits and binding follow exactly the rules of /v1/do.
 */
#include "commands.h"
#include "split.h"
#include "textfile.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (4 << 20)
#define NAME_MAX_LEN 64

typedef struct cmd_stmt {
  char *sql; /* one statement, NUL-terminated */
  int line;  /* line of the file where it starts */
  int nparams;
  char **full; /* parameter names as in the SQL (":from"), by index - 1 */
} cmd_stmt;

typedef struct cmd {
  char *name;
  char *description; /* "" if none */
  int line;          /* line of the marker */
  cmd_stmt *stmts;
  int nstmts;
  char **params; /* bare names, unique, in order of first use */
  int nparams;
} cmd;

struct lithd_commands {
  cmd *cmds;
  int n, cap;
  /* The names, hashed: slots[] holds a command's index, or -1; nslots a
   * power of two at least twice n. A list of thousands was checked for
   * duplicates pairwise: 40,000 commands took 4 s to load. */
  int *slots;
  size_t nslots;
  char *path;
};

static uint64_t name_hash(const char *name, size_t len) { /* FNV-1a */
  uint64_t h = 14695981039346656037ull;
  for (size_t k = 0; k < len; k++)
    h = (h ^ (unsigned char)name[k]) * 1099511628211ull;
  return h;
}

/* The slot of name: its command's, or the empty one where it would go. */
static size_t name_slot(const lithd_commands *set, const char *name, size_t len) {
  size_t k = (size_t)name_hash(name, len) & (set->nslots - 1);
  for (;;) {
    int i = set->slots[k];
    if (i < 0 || (strncmp(set->cmds[i].name, name, len) == 0 && set->cmds[i].name[len] == '\0'))
      return k;
    k = (k + 1) & (set->nslots - 1);
  }
}

/* Room in slots for one more name; 0, or -1 out of memory. */
static int names_grow(lithd_commands *set) {
  if ((size_t)set->n * 2 + 2 <= set->nslots)
    return 0;
  size_t n = set->nslots ? set->nslots * 2 : 64;
  int *old = set->slots, *slots = malloc(n * sizeof *slots);
  if (slots == NULL)
    return -1;
  for (size_t k = 0; k < n; k++)
    slots[k] = -1;
  set->slots = slots;
  set->nslots = n;
  for (int i = 0; i < set->n; i++)
    set->slots[name_slot(set, set->cmds[i].name, strlen(set->cmds[i].name))] = i;
  free(old);
  return 0;
}

static void cfail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cfail(char *err, size_t errsz, const char *fmt, ...) {
  va_list ap;
  if (err == NULL || errsz == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errsz, fmt, ap);
  va_end(ap);
}

static int add_stmt(cmd *c, const char *s, size_t n, int line) {
  cmd_stmt *ns = realloc(c->stmts, (size_t)(c->nstmts + 1) * sizeof *ns);
  if (ns == NULL)
    return -1;
  c->stmts = ns;
  memset(&ns[c->nstmts], 0, sizeof ns[0]);
  if ((ns[c->nstmts].sql = strndup(s, n)) == NULL)
    return -1;
  ns[c->nstmts].line = line;
  c->nstmts++;
  return 0;
}

/* Split body[0..len) (starting at file line `line`) into c's statements,
 * where SQLite ends them (split.h); blanks and comments before one are
 * not its own, and a ';' alone is none. Lines are counted as the split
 * goes, once each. */
static int split_body(cmd *c, const char *body, size_t len, int line, char *err, size_t errsz) {
  lithd_split sp;
  const char *p, *counted = body;
  size_t n;

  lithd_split_init(&sp, body, len);
  while (lithd_split_next(&sp, &p, &n)) {
    const char *stop = sp.cut ? p + n - 1 : p + n; /* before its ';' */
    const char *s = lithd_sql_skip_blank(p, stop);
    if (s >= stop)
      continue;
    for (; counted < s; counted++)
      line += *counted == '\n';
    if (add_stmt(c, s, (size_t)(p + n - s), line) != 0) {
      cfail(err, errsz, "out of memory");
      return -1;
    }
  }
  if (c->nstmts == 0) {
    cfail(err, errsz, "command \"%s\" (line %d) has no statements", c->name, c->line);
    return -1;
  }
  return 0;
}

/* p past spaces and tabs, up to e. */
static const char *skip_sp(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  return p;
}

/* 1 if [p, e) begins with word. */
static int starts_with(const char *p, const char *e, const char *word) {
  size_t n = strlen(word);
  return (size_t)(e - p) >= n && memcmp(p, word, n) == 0;
}

/* "-- name: NAME" (spaces optional) -> NAME's start and length, else NULL. */
static const char *marker(const char *line, const char *eol, size_t *namelen) {
  const char *p = skip_sp(line, eol);
  const char *e = eol;
  if (!starts_with(p, eol, "--"))
    return NULL;
  p = skip_sp(p + 2, eol);
  if (!starts_with(p, eol, "name:"))
    return NULL;
  p = skip_sp(p + 5, eol);
  while (e > p && isspace((unsigned char)e[-1]))
    e--;
  *namelen = (size_t)(e - p);
  return p;
}

static int valid_name(const char *s, size_t n) {
  size_t i;
  if (n == 0 || n > NAME_MAX_LEN)
    return 0;
  for (i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
      return 0;
  return 1;
}

/* Append a description line (a comment, "--" stripped) to c. */
static int add_description(cmd *c, const char *s, const char *eol) {
  size_t old = strlen(c->description), n;
  char *nd;
  while (s < eol && (*s == ' ' || *s == '\t' || *s == '-'))
    s++;
  while (eol > s && isspace((unsigned char)eol[-1]))
    eol--;
  if (eol <= s)
    return 0; /* an empty comment line */
  n = (size_t)(eol - s);
  nd = realloc(c->description, old + n + 2);
  if (nd == NULL)
    return -1;
  if (old > 0)
    nd[old++] = ' ';
  memcpy(nd + old, s, n);
  nd[old + n] = '\0';
  c->description = nd;
  return 0;
}

int lithd_commands_load(const char *path, lithd_commands **out, char *err, size_t errsz) {
  lithd_commands *set = NULL;
  size_t len = 0;
  char *text = NULL;
  const char *p, *end, *body = NULL;
  int line = 1, body_line = 0, in_description = 0;
  cmd *cur = NULL;

  *out = NULL;
  if (lithd_text_load(path, FILE_MAX, NULL, &text, &len, err, errsz) != 0)
    return -1;
  set = calloc(1, sizeof *set);
  if (set == NULL || (set->path = strdup(path)) == NULL)
    goto nomem;
  end = text + len;
  for (p = text; p <= end; line++) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *name;
    size_t namelen;
    if (eol == NULL)
      eol = end;
    name = marker(p, eol, &namelen);
    if (name != NULL) {
      int i;
      if (cur != NULL && split_body(cur, body, (size_t)(p - body), body_line, err, errsz) != 0)
        goto fail;
      if (!valid_name(name, namelen)) {
        cfail(err, errsz, "%s:%d: a command name is 1-%d of A-Z a-z 0-9 _ . -", path, line, NAME_MAX_LEN);
        goto fail;
      }
      if (names_grow(set) != 0)
        goto nomem;
      size_t slot = name_slot(set, name, namelen);
      if ((i = set->slots[slot]) >= 0) {
        cfail(err, errsz, "%s:%d: command \"%.*s\" is declared twice (first on line %d)", path, line,
              (int)namelen, name, set->cmds[i].line);
        goto fail;
      }
      if (set->n == set->cap) {
        int ncap = set->cap ? set->cap * 2 : 16;
        cmd *nc = realloc(set->cmds, (size_t)ncap * sizeof *nc);
        if (nc == NULL)
          goto nomem;
        set->cmds = nc;
        set->cap = ncap;
      }
      cur = &set->cmds[set->n];
      memset(cur, 0, sizeof *cur);
      set->n++;
      if ((cur->name = strndup(name, namelen)) == NULL || (cur->description = strdup("")) == NULL)
        goto nomem;
      cur->line = line;
      set->slots[slot] = set->n - 1;
      body = eol < end ? eol + 1 : end;
      body_line = line + 1;
      in_description = 1;
    } else if (cur == NULL) {
      const char *s = lithd_sql_skip_blank(p, eol);
      if (s < eol) {
        cfail(err, errsz, "%s:%d: SQL before the first \"-- name: NAME\" line", path, line);
        goto fail;
      }
    } else if (in_description) {
      const char *s = skip_sp(p, eol);
      if (starts_with(s, eol, "--")) {
        if (add_description(cur, s, eol) != 0)
          goto nomem;
      } else if (s < eol) {
        in_description = 0;
      }
    }
    if (eol == end)
      break;
    p = eol + 1;
  }
  if (cur != NULL && split_body(cur, body, (size_t)(end - body), body_line, err, errsz) != 0)
    goto fail;
  if (set->n == 0) {
    cfail(err, errsz, "%s: no commands (each begins with a \"-- name: NAME\" line)", path);
    goto fail;
  }
  free(text);
  *out = set;
  return 0;
nomem:
  cfail(err, errsz, "out of memory");
fail:
  free(text);
  lithd_commands_free(set);
  return -1;
}

/* Add bare name to c's parameters unless there. */
static int add_param(cmd *c, const char *bare) {
  int i;
  char **np;
  for (i = 0; i < c->nparams; i++)
    if (strcmp(c->params[i], bare) == 0)
      return 0;
  np = realloc(c->params, (size_t)(c->nparams + 1) * sizeof *np);
  if (np == NULL)
    return -1;
  c->params = np;
  if ((np[c->nparams] = strdup(bare)) == NULL)
    return -1;
  c->nparams++;
  return 0;
}

int lithd_commands_check(lithd_commands *set, sqlite3 *db, char *err, size_t errsz) {
  int i, j, k;
  for (i = 0; i < set->n; i++) {
    cmd *c = &set->cmds[i];
    for (j = 0; j < c->nstmts; j++) {
      cmd_stmt *cs = &c->stmts[j];
      sqlite3_stmt *st = NULL;
      const char *tail = NULL;
      int rc = sqlite3_prepare_v2(db, cs->sql, -1, &st, &tail);
      if (rc != SQLITE_OK) {
        cfail(err, errsz,
              "%s:%d: command \"%s\", statement %d: %s (the schema must exist when lithd starts: --schema)",
              set->path, cs->line, c->name, j + 1, sqlite3_errmsg(db));
        return -1;
      }
      if (st == NULL || *lithd_sql_skip_blank(tail, tail + strlen(tail)) != '\0') {
        sqlite3_finalize(st);
        cfail(err, errsz, "%s:%d: command \"%s\", statement %d: %s", set->path, cs->line, c->name, j + 1,
              st == NULL ? "empty statement" : "more than one statement (end each with ';')");
        return -1;
      }
      cs->nparams = sqlite3_bind_parameter_count(st);
      cs->full = calloc((size_t)cs->nparams + 1, sizeof *cs->full);
      if (cs->full == NULL)
        goto nomem;
      for (k = 0; k < cs->nparams; k++) {
        const char *nm = sqlite3_bind_parameter_name(st, k + 1);
        if (nm == NULL || nm[0] == '?') {
          sqlite3_finalize(st);
          cfail(err, errsz, "%s:%d: command \"%s\", statement %d: parameter %d has no name (use :name)",
                set->path, cs->line, c->name, j + 1, k + 1);
          return -1;
        }
        if ((cs->full[k] = strdup(nm)) == NULL || add_param(c, nm + 1) != 0) {
          sqlite3_finalize(st);
          goto nomem;
        }
      }
      sqlite3_finalize(st);
    }
  }
  return 0;
nomem:
  cfail(err, errsz, "out of memory");
  return -1;
}

int lithd_commands_count(const lithd_commands *set) { return set != NULL ? set->n : 0; }

static const cmd *find(const lithd_commands *set, const char *name) {
  if (set == NULL || set->nslots == 0)
    return NULL;
  int i = set->slots[name_slot(set, name, strlen(name))];
  return i >= 0 ? &set->cmds[i] : NULL;
}

/* The value of bare name `bare` in params (keys spelt with or without
 * their sigil), or NULL. */
static const lj_value *param_of(const lj_value *params, const char *bare) {
  size_t n = strlen(bare);
  for (size_t i = 0; params != NULL && i < params->n; i++) {
    const lj_member *m = &params->u.members[i];
    const char *k = m->key;
    size_t kl = m->keylen;
    if (kl > 0 && (k[0] == ':' || k[0] == '@' || k[0] == '$')) {
      k++;
      kl--;
    }
    if (kl == n && memcmp(k, bare, n) == 0)
      return m->value;
  }
  return NULL;
}

int lithd_commands_batch(const lithd_commands *set, const char *name, const char *body, size_t len,
                         const lithd_limits *lim, lithd_batch **out, lithd_error *e) {
  const cmd *c = find(set, name);
  lithd_arena tmp = {0};
  lj_value *req = NULL, *root, *list;
  const lj_value *params = NULL;
  lj_error jerr = {0, 0, ""};
  size_t i;
  int k, rc;

  *out = NULL;
  if (c == NULL)
    return lithd_error_set(e, LITHD_NOT_FOUND, -1, "no command named \"%.64s\"", name);
  if (lim != NULL && lim->max_body_bytes > 0 && len > lim->max_body_bytes)
    return lithd_error_set(e, LITHD_TOO_LARGE, -1, "the body is %zu bytes, over the limit of %zu", len,
                           lim->max_body_bytes);
  if (len > 0) {
    if (lj_parse(&tmp, body, len, &req, &jerr) != 0) {
      rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "invalid JSON at line %d column %d: %s", jerr.line,
                           jerr.column, jerr.text);
      goto out;
    }
    params = lj_get(req, "params");
    if (req->type != LJ_OBJECT || req->n > 1 ||
        (req->n == 1 && (params == NULL || params->type != LJ_OBJECT))) {
      rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "the body must be {\"params\": {\"name\": value, ...}}");
      goto out;
    }
  }
  /* Every parameter given must be one of the command's, given once, and
   * every one of the command's given: a misspelt name must not bind NULL.
   * A key may carry its sigil (":from" as /v1/do wants it) or not. */
  for (i = 0; params != NULL && i < params->n; i++) {
    const char *key = params->u.members[i].key;
    const char *bare = key[0] == ':' || key[0] == '@' || key[0] == '$' ? key + 1 : key;
    size_t j;
    for (k = 0; k < c->nparams; k++)
      if (strcmp(c->params[k], bare) == 0)
        break;
    if (k == c->nparams || strlen(key) != params->u.members[i].keylen) {
      rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "command \"%s\" has no parameter \"%.64s\"", c->name,
                           key);
      goto out;
    }
    for (j = 0; j < i; j++) {
      const char *other = params->u.members[j].key;
      if (other[0] == ':' || other[0] == '@' || other[0] == '$')
        other++;
      if (strcmp(other, bare) == 0) {
        rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "parameter \"%.64s\" is given twice", bare);
        goto out;
      }
    }
  }
  for (k = 0; k < c->nparams; k++)
    if (param_of(params, c->params[k]) == NULL) {
      rc = lithd_error_set(e, LITHD_BAD_REQUEST, -1, "parameter \"%.64s\" of command \"%s\" is missing",
                           c->params[k], c->name);
      goto out;
    }

  /* {"statements": [{"sql": ..., "params": {":name": value, ...}}, ...]} */
  root = lj_make(&tmp, LJ_OBJECT, 1);
  list = lj_make(&tmp, LJ_ARRAY, (size_t)c->nstmts);
  if (root == NULL || list == NULL)
    goto nomem;
  root->u.members[0].key = "statements";
  root->u.members[0].keylen = strlen("statements");
  root->u.members[0].value = list;
  for (i = 0; i < (size_t)c->nstmts; i++) {
    const cmd_stmt *cs = &c->stmts[i];
    lj_value *st = lj_make(&tmp, LJ_OBJECT, 2);
    lj_value *sql = lj_make_string(&tmp, cs->sql, strlen(cs->sql));
    lj_value *ps = lj_make(&tmp, LJ_OBJECT, (size_t)cs->nparams);
    if (st == NULL || sql == NULL || ps == NULL)
      goto nomem;
    st->u.members[0].key = "sql";
    st->u.members[0].keylen = 3;
    st->u.members[0].value = sql;
    st->u.members[1].key = "params";
    st->u.members[1].keylen = 6;
    st->u.members[1].value = ps;
    for (k = 0; k < cs->nparams; k++) {
      ps->u.members[k].key = cs->full[k];
      ps->u.members[k].keylen = strlen(cs->full[k]);
      ps->u.members[k].value = (lj_value *)param_of(params, cs->full[k] + 1);
    }
    list->u.items[i] = st;
  }
  {
    /* The statements are the operator's, not the client's: the bounds on
     * how many and how long do not apply to them; rows and time still do. */
    lithd_limits own;
    if (lim != NULL)
      own = *lim;
    else
      lithd_limits_default(&own);
    own.max_statements = INT_MAX;
    own.max_sql_bytes = SIZE_MAX;
    own.max_params = INT_MAX;
    rc = lithd_batch_from_value(root, &own, out, e);
  }
  goto out;
nomem:
  rc = lithd_error_set(e, LITH_NOMEM, -1, "out of memory");
out:
  lithd_arena_free(&tmp);
  return rc;
}

char *lithd_commands_json(const lithd_commands *set) {
  lithd_buf b = {0};
  int i, k;

  lithd_buf_puts(&b, "{\"commands\":[");
  for (i = 0; set != NULL && i < set->n; i++) {
    const cmd *c = &set->cmds[i];
    lithd_buf_puts(&b, i > 0 ? ",{\"name\":" : "{\"name\":");
    lithd_json_put_string(&b, c->name, strlen(c->name));
    lithd_buf_puts(&b, ",\"description\":");
    lithd_json_put_string(&b, c->description, strlen(c->description));
    lithd_buf_puts(&b, ",\"statements\":");
    lithd_json_put_int(&b, c->nstmts);
    lithd_buf_puts(&b, ",\"params\":[");
    for (k = 0; k < c->nparams; k++) {
      if (k > 0)
        lithd_buf_puts(&b, ",");
      lithd_json_put_string(&b, c->params[k], strlen(c->params[k]));
    }
    lithd_buf_puts(&b, "]}");
  }
  lithd_buf_puts(&b, "]}");
  return lithd_buf_finish(&b);
}

void lithd_commands_free(lithd_commands *set) {
  int i, j, k;
  if (set == NULL)
    return;
  for (i = 0; i < set->n; i++) {
    cmd *c = &set->cmds[i];
    for (j = 0; j < c->nstmts; j++) {
      for (k = 0; c->stmts[j].full != NULL && k < c->stmts[j].nparams; k++)
        free(c->stmts[j].full[k]);
      free(c->stmts[j].full);
      free(c->stmts[j].sql);
    }
    for (k = 0; k < c->nparams; k++)
      free(c->params[k]);
    free(c->params);
    free(c->stmts);
    free(c->name);
    free(c->description);
  }
  free(set->cmds);
  free(set->slots);
  free(set->path);
  free(set);
}
