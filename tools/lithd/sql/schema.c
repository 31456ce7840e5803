/*
 * lithd schema — see schema.h.
 *
 * A step may not end or open a transaction itself: lithd runs the pending
 * steps in one transaction of its own, on a file (lith_open's migrations)
 * and on a cluster (dqlite.c's apply_schema), and a step's COMMIT would
 * commit the steps before it and leave the rest to fail alone. The rule
 * is read here, once for both stores, before either sees a step: on a
 * cluster a COMMIT in a step had committed half the schema.
 */
#include "schema.h"
#include "split.h"
#include "sqljson_int.h"
#include "textfile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_MAX (16 << 20)

static const char *skip_sp(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  return p;
}

/* 1 if the line [p, eol) is a "-- step" marker. */
static int is_step(const char *p, const char *eol) {
  p = skip_sp(p, eol);
  if ((size_t)(eol - p) < 2 || memcmp(p, "--", 2) != 0)
    return 0;
  p = skip_sp(p + 2, eol);
  if ((size_t)(eol - p) < 4 || memcmp(p, "step", 4) != 0)
    return 0;
  p += 4;
  return p == eol || !isalnum((unsigned char)*p);
}

/* 1 if [p, e) holds only whitespace and "--" comment lines. */
static int blank(const char *p, const char *e) {
  while (p < e) {
    if (isspace((unsigned char)*p)) {
      p++;
    } else if (e - p >= 2 && p[0] == '-' && p[1] == '-') {
      while (p < e && *p != '\n')
        p++;
    } else {
      return 0;
    }
  }
  return 1;
}

static int add_step(lithd_schema *s, const char *p, const char *e) {
  char **ns = realloc(s->steps, (size_t)(s->n + 1) * sizeof *ns);
  if (ns == NULL)
    return -1;
  s->steps = ns;
  if ((ns[s->n] = strndup(p, (size_t)(e - p))) == NULL)
    return -1;
  s->n++;
  return 0;
}

/* 1 if a statement of step is a BEGIN, COMMIT (END) or ROLLBACK (not
 * ROLLBACK TO: a savepoint's stays inside the transaction), SQLite's word
 * (lithd__txctl); [*at, *at + *len) is it. -1 out of memory. */
static int own_transaction(const char *step, const char **at, size_t *len) {
  lithd_split sp;
  const char *p;
  size_t n;
  lithd_split_init(&sp, step, strlen(step));
  while (lithd_split_next(&sp, &p, &n)) {
    char *one = strndup(p, n);
    int t;
    if (one == NULL)
      return -1;
    t = lithd__txctl(one, NULL);
    free(one);
    if (t == TXC_BEGIN || t == TXC_COMMIT || t == TXC_ROLLBACK) {
      *at = lithd_sql_skip_blank(p, p + n);
      *len = (size_t)(p + n - *at);
      return 1;
    }
  }
  return 0;
}

int lithd_schema_load(const char *path, lithd_schema *out, char *err, size_t errsz) {
  char *text = NULL;
  const char *p, *end, *start;
  size_t n;
  int markers = 0;

  memset(out, 0, sizeof *out);
  if (lithd_text_load(path, SCHEMA_MAX, "--schema", &text, &n, err, errsz) != 0)
    return -1;
  end = text + n;
  start = text;
  for (p = text; p < end;) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL)
      eol = end;
    if (is_step(p, eol)) {
      /* What precedes the first marker is step 1 only if it holds SQL. */
      if ((markers > 0 || !blank(start, p)) && add_step(out, start, p) != 0)
        goto nomem;
      markers++;
      start = eol;
    }
    p = eol < end ? eol + 1 : end;
  }
  if ((markers > 0 || !blank(start, end)) && add_step(out, start, end) != 0)
    goto nomem;
  for (int i = 0; i < out->n; i++)
    if (blank(out->steps[i], out->steps[i] + strlen(out->steps[i]))) {
      snprintf(err, errsz, "--schema %s: step %d is empty", path, i + 1);
      goto fail;
    }
  if (out->n == 0) {
    snprintf(err, errsz, "--schema %s: no SQL in the file", path);
    goto fail;
  }
  for (int i = 0; i < out->n; i++) {
    const char *at = NULL;
    size_t len = 0;
    int own = own_transaction(out->steps[i], &at, &len);
    if (own < 0)
      goto nomem;
    if (own) {
      snprintf(err, errsz,
               "--schema %s: step %d holds \"%.*s\": remove it (lithd runs the pending steps in one "
               "transaction of its own)",
               path, i + 1, (int)(len < 40 ? len : 40), at);
      goto fail;
    }
  }
  free(text);
  return 0;
nomem:
  snprintf(err, errsz, "out of memory");
fail:
  free(text);
  lithd_schema_free(out);
  return -1;
}

void lithd_schema_free(lithd_schema *s) {
  for (int i = 0; i < s->n; i++)
    free(s->steps[i]);
  free(s->steps);
  s->steps = NULL;
  s->n = 0;
}
