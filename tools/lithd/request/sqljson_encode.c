/*
 * sqljson, stage 3 of 3: a lithd_result or lithd_error as JSON text (see
 * sqljson.h, lithd_result_json and lithd_error_json).
 *
 * Design: the text is written straight into a growing buffer (buf.h), off
 * the writer thread. Doing it by hand rather than through a tree of JSON
 * nodes saves a node per cell and lets REALs come out in their shortest
 * exact form (0.1, not 0.10000000000000001). The string and integer
 * writers serve lithd's other hand-written answers too (sqljson.h).
 */
#include "sqljson_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void lithd_json_put_int(lithd_buf *b, int64_t v) {
  /* By hand: a response holds a few per statement, and snprintf's format
   * parsing was a visible share of lithd's loop thread. */
  char buf[24];
  char *p = buf + sizeof buf;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    *--p = '-';
  lithd_buf_put(b, p, (size_t)(buf + sizeof buf - p));
}

/* The shortest of %.15g, %.16g, %.17g that reads back as d (%.17g always
 * does), with ".0" added when it would read as an integer. Not finite: null
 * (SQLite stores +-Infinity, e.g. 1e999, and math functions can make it;
 * NaN becomes NULL inside SQLite; JSON has neither). */
void lithd__put_real(lithd_buf *b, double d) {
  char buf[40];
  if (!isfinite(d)) {
    lithd_buf_puts(b, "null");
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (strtod(buf, NULL) == d)
      break;
  }
  int looks_real = 0;
  for (char *c = buf; *c; c++) {
    if (*c == ',') /* a locale's decimal comma: JSON wants '.' */
      *c = '.';
    if (*c == '.' || *c == 'e' || *c == 'E')
      looks_real = 1;
  }
  lithd_buf_puts(b, buf);
  if (!looks_real)
    lithd_buf_puts(b, ".0");
}

/* A JSON string. Valid UTF-8 is copied as it is; a byte that starts no valid
 * sequence becomes U+FFFD (only messages can have one: row text was
 * checked when collected). */
void lithd_json_put_string(lithd_buf *b, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t run = 0; /* bytes copied verbatim, pending */
  lithd_buf_put(b, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    char esc[8];
    const char *rep = NULL;
    size_t k = 1;
    if (c == '"')
      rep = "\\\"";
    else if (c == '\\')
      rep = "\\\\";
    else if (c == '\n')
      rep = "\\n";
    else if (c == '\r')
      rep = "\\r";
    else if (c == '\t')
      rep = "\\t";
    else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      rep = esc;
    } else if (c >= 0x80) {
      k = lithd_utf8_len(p + i, n - i);
      if (!k) {
        rep = "\\ufffd";
        k = 1;
      }
    }
    if (rep) {
      lithd_buf_put(b, p + i - run, run);
      run = 0;
      lithd_buf_puts(b, rep);
    } else
      run += k;
    i += k;
  }
  lithd_buf_put(b, p + n - run, run);
  lithd_buf_put(b, "\"", 1);
}

void lithd__put_base64_text(lithd_buf *b, const unsigned char *p, size_t n) {
  char q[4];
  for (size_t i = 0; i < n; i += 3) {
    uint32_t w = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      w |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      w |= p[i + 2];
    q[0] = b64_chars[w >> 18 & 63];
    q[1] = b64_chars[w >> 12 & 63];
    q[2] = i + 1 < n ? b64_chars[w >> 6 & 63] : '=';
    q[3] = i + 2 < n ? b64_chars[w & 63] : '=';
    lithd_buf_put(b, q, 4);
  }
}

static void put_base64(lithd_buf *b, const unsigned char *p, size_t n) {
  lithd_buf_puts(b, "{\"base64\":\"");
  lithd__put_base64_text(b, p, n);
  lithd_buf_puts(b, "\"}");
}

/* An integer of an answer: as a string beyond what JSON.parse reads
 * exactly, when the request asked (sqljson.h, "int64"). */
static void put_int(lithd_buf *b, int64_t v, const lithd_format *f) {
  int quote = f->int64_strings && (v > LITHD_JS_SAFE_INT || v < -LITHD_JS_SAFE_INT);
  if (quote)
    lithd_buf_put(b, "\"", 1);
  lithd_json_put_int(b, v);
  if (quote)
    lithd_buf_put(b, "\"", 1);
}

static void put_value(lithd_buf *b, const value *v, const lithd_format *f) {
  switch (v->type) {
  case SQLITE_INTEGER: put_int(b, v->u.i, f); break;
  case SQLITE_FLOAT: lithd__put_real(b, v->u.d); break;
  case SQLITE_TEXT: lithd_json_put_string(b, (const char *)v->u.p, v->n); break;
  case SQLITE_BLOB: put_base64(b, v->u.p, v->n); break;
  default: lithd_buf_puts(b, "null"); break;
  }
}

char *lithd_error_json(const lithd_error *err) {
  lithd_buf out = {0};
  if (!err)
    return NULL;
  lithd_buf_puts(&out, "{\"error\":{\"code\":");
  lithd_json_put_string(&out, lithd_code_name(err->code), strlen(lithd_code_name(err->code)));
  lithd_buf_puts(&out, ",\"message\":");
  lithd_json_put_string(&out, err->message, strnlen(err->message, sizeof err->message));
  lithd_buf_puts(&out, ",\"statement\":");
  if (err->statement >= 0)
    lithd_json_put_int(&out, err->statement);
  else
    lithd_buf_puts(&out, "null");
  lithd_buf_puts(&out, "}}");
  return lithd_buf_finish(&out);
}

char *lithd_result_json(const lithd_result *r) {
  lithd_buf out = {0};
  if (!r)
    return NULL;
  if (r->err.code != LITH_OK)
    return lithd_error_json(&r->err);
  const lithd_format *f = &r->fmt;
  lithd_buf_puts(&out, "{\"results\":[");
  for (int i = 0; i < r->n; i++) {
    const stmt_out *o = &r->outs[i];
    if (i)
      lithd_buf_put(&out, ",", 1);
    lithd_buf_puts(&out, "{\"changes\":");
    put_int(&out, o->changes, f);
    lithd_buf_puts(&out, ",\"last_insert_rowid\":");
    put_int(&out, o->last_rowid, f);
    lithd_buf_puts(&out, ",\"columns\":[");
    for (int c = 0; c < o->ncols; c++) {
      if (c)
        lithd_buf_put(&out, ",", 1);
      lithd_json_put_string(&out, o->cols[c], strlen(o->cols[c]));
    }
    if (f->types) {
      lithd_buf_puts(&out, "],\"types\":[");
      for (int c = 0; c < o->ncols; c++) {
        if (c)
          lithd_buf_put(&out, ",", 1);
        if (o->decls && o->decls[c])
          lithd_json_put_string(&out, o->decls[c], strlen(o->decls[c]));
        else
          lithd_buf_puts(&out, "null");
      }
    }
    lithd_buf_puts(&out, "],\"rows\":[");
    const value *v = o->vals;
    for (int64_t row = 0; row < o->nrows; row++) {
      lithd_buf_puts(&out, row ? "," : "");
      lithd_buf_put(&out, f->rows_objects ? "{" : "[", 1);
      for (int c = 0; c < o->ncols; c++, v++) {
        if (c)
          lithd_buf_put(&out, ",", 1);
        if (f->rows_objects) { /* names checked distinct when the statement ran */
          lithd_json_put_string(&out, o->cols[c], strlen(o->cols[c]));
          lithd_buf_put(&out, ":", 1);
        }
        put_value(&out, v, f);
      }
      lithd_buf_put(&out, f->rows_objects ? "}" : "]", 1);
    }
    lithd_buf_puts(&out, "]}");
  }
  lithd_buf_puts(&out, "]}");
  return lithd_buf_finish(&out);
}
