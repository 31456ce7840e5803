/*
 * bench/hrana_null.c — a "null" Hrana server: the ceiling baseline of
 * bench/hrana.js's arm N. Not a server: a yardstick.
 *
 * What it is for: bench/hrana.js measures @libsql/client doing a transfer as
 * client.batch([4 statements], "write") through lithd's POST /v2/pipeline,
 * and the Node client process, not lithd, is what limits it
 * (bench/notes/hrana-2026-12-03-node-process.md). Arm N runs the very same
 * client code against this program,
 * which runs no SQL at all and answers each pipeline with a valid answer of a
 * canned shape (every statement "ok", no columns, no rows, one row affected)
 * at almost no cost. So N's transfers/s is the most any Hrana server could
 * give that client on that machine: A ÷ N is lithd's share of it, and N ÷ C
 * the most any server could do against the client's own local file: (the
 * issue's goal asks 6x).
 * It stores nothing, checks no SQL, has no auth and no cursors, and says "ok"
 * to everything it understands: never point an application at it.
 *
 * Design: one thread, one level-triggered epoll loop, non-blocking sockets,
 * HTTP/1.1 keep-alive with pipelining (after each read every complete
 * request in the input is answered, in order). Per connection an input
 * buffer (a request's head, at most 16 KiB, and its Content-Length body, at
 * most 1 MiB) and an output buffer; while output is pending the connection
 * is not read, so a client that does not read its answers cannot make them
 * pile up. The pipeline's JSON is not parsed into a tree: a small skipper
 * validates it and picks out requests[i].type and the length of
 * requests[i].batch.steps, all the answer's shape depends on. SIGTERM and
 * SIGINT arrive on a signalfd in the same loop: everything is freed, exit 0.
 * Out of memory is fatal (a bench tool; it holds a few buffers per client).
 *
 * Usage: hrana_null --listen 127.0.0.1:PORT (PORT 0: the kernel picks). Once
 * listening it prints "listening ADDR:PORT" on stdout, the one line it prints.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_HEAD (16 * 1024)        /* a request's line and headers */
#define MAX_BODY (1024 * 1024)      /* a request's body */
#define READ_CHUNK (64 * 1024)      /* room made in the input buffer before each read */
#define MAX_DEPTH 64                /* JSON nesting (the skipper recurses); deeper is refused as malformed */
#define MAX_DRAIN (4 * 1024 * 1024) /* input discarded after a closing answer before giving up */
#define KEEP_BUF (256 * 1024)       /* a connection's buffer larger than this is freed once empty */

/* ---- buffers ------------------------------------------------------------------------------------------ */

struct buf {
  char *p;
  size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more) {
  if (b->cap - b->len >= more)
    return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len < more)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    fputs("hrana_null: out of memory\n", stderr);
    exit(1);
  }
  b->p = p;
  b->cap = cap;
}

static void buf_add(struct buf *b, const char *s, size_t n) {
  if (n == 0)
    return; /* and b->p may still be NULL */
  buf_reserve(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void buf_adds(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* An idle connection gives back what one large request made it take. */
static void buf_trim(struct buf *b) {
  if (b->len == 0 && b->cap > KEEP_BUF) {
    free(b->p);
    b->p = NULL;
    b->cap = 0;
  }
}

/* n bytes at s equal the literal lit (ci: ignoring ASCII case). */
static bool is(const char *s, size_t n, const char *lit) {
  return n == strlen(lit) && memcmp(s, lit, n) == 0;
}
static bool is_ci(const char *s, size_t n, const char *lit) {
  return n == strlen(lit) && strncasecmp(s, lit, n) == 0;
}

/* ---- the JSON skipper -------------------------------------------------------------------------------- */

/* A cursor over the body. Containers are walked with obj_next and arr_next, so
 * the pipeline's reader and the generic skipper share one grammar. */
struct scan {
  const char *start, *p, *end;
  int depth;
};

static void sc_ws(struct scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static bool sc_at(const struct scan *s, char c) { return s->p < s->end && *s->p == c; }

static bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at the cursor; *str, *len: its raw bytes between the quotes.
 * Escapes are checked, not decoded: a key or type spelled with escapes is not
 * recognised (no client spells them so). UTF-8 is not validated. */
static bool sc_string(struct scan *s, const char **str, size_t *len) {
  if (!sc_at(s, '"'))
    return false;
  const char *from = ++s->p;
  while (s->p < s->end) {
    unsigned char c = (unsigned char)*s->p;
    if (c == '"') {
      *str = from;
      *len = (size_t)(s->p - from);
      s->p++;
      return true;
    }
    if (c < 0x20)
      return false;
    if (c != '\\') {
      s->p++;
      continue;
    }
    if (s->end - s->p < 2)
      return false;
    switch (s->p[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't': s->p += 2; break;
    case 'u':
      if (s->end - s->p < 6 || !is_hex(s->p[2]) || !is_hex(s->p[3]) || !is_hex(s->p[4]) || !is_hex(s->p[5]))
        return false;
      s->p += 6;
      break;
    default: return false;
    }
  }
  return false;
}

static bool sc_digits(struct scan *s) {
  const char *from = s->p;
  while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
    s->p++;
  return s->p > from;
}

/* JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool sc_number(struct scan *s) {
  if (sc_at(s, '-'))
    s->p++;
  if (sc_at(s, '0'))
    s->p++;
  else if (!sc_digits(s))
    return false;
  if (sc_at(s, '.')) {
    s->p++;
    if (!sc_digits(s))
      return false;
  }
  if (sc_at(s, 'e') || sc_at(s, 'E')) {
    s->p++;
    if (sc_at(s, '+') || sc_at(s, '-'))
      s->p++;
    if (!sc_digits(s))
      return false;
  }
  return true;
}

static bool sc_word(struct scan *s, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
    return false;
  s->p += n;
  return true;
}

/* Enters an object or array; the depth bounds the skipper's recursion. */
static bool sc_open(struct scan *s, char c) {
  sc_ws(s);
  if (!sc_at(s, c) || s->depth >= MAX_DEPTH)
    return false;
  s->p++;
  s->depth++;
  return true;
}

/* The next item of an array or object entered with sc_open (close: its
 * closing bracket): 1 at it, 0 when the container ends (consumed), -1 when
 * malformed. *first: true before the first call. */
static int sc_next(struct scan *s, bool *first, char close) {
  sc_ws(s);
  if (sc_at(s, close)) {
    s->p++;
    s->depth--;
    return 0;
  }
  if (!*first) {
    if (!sc_at(s, ','))
      return -1;
    s->p++;
    sc_ws(s);
  }
  *first = false;
  return 1;
}

/* The next member of an object: 1 with *key, *klen set and the cursor at
 * its value (which the caller must consume), else as sc_next. */
static int sc_obj_next(struct scan *s, bool *first, const char **key, size_t *klen) {
  int rc = sc_next(s, first, '}');
  if (rc != 1)
    return rc;
  if (!sc_string(s, key, klen))
    return -1;
  sc_ws(s);
  if (!sc_at(s, ':'))
    return -1;
  s->p++;
  sc_ws(s);
  return 1;
}

/* The next element of an array: as sc_next. */
static int sc_arr_next(struct scan *s, bool *first) { return sc_next(s, first, ']'); }

/* Skips one value of any kind, checking it. */
static bool sc_value(struct scan *s) {
  sc_ws(s);
  if (s->p >= s->end)
    return false;
  bool first = true;
  const char *k;
  size_t kn;
  int r;
  switch (*s->p) {
  case '"': return sc_string(s, &k, &kn);
  case '{':
    if (!sc_open(s, '{'))
      return false;
    while ((r = sc_obj_next(s, &first, &k, &kn)) == 1)
      if (!sc_value(s))
        return false;
    return r == 0;
  case '[':
    if (!sc_open(s, '['))
      return false;
    while ((r = sc_arr_next(s, &first)) == 1)
      if (!sc_value(s))
        return false;
    return r == 0;
  case 't': return sc_word(s, "true");
  case 'f': return sc_word(s, "false");
  case 'n': return sc_word(s, "null");
  default: return sc_number(s);
  }
}

/* ---- the pipeline ------------------------------------------------------------------------------------ */

enum kind { K_UNSUPPORTED, K_PLAIN, K_EXECUTE, K_BATCH, K_NO_STEPS };

/* One element of "requests", as much as its answer needs. */
struct req {
  enum kind kind;
  const char *type; /* K_PLAIN: the type, echoed (a literal of ours) */
  size_t steps;     /* K_BATCH: the length of batch.steps */
};

/* The requests of the pipeline being answered: one thread, so one array,
 * reused (no allocation per request once it has grown). */
static struct req *reqs;
static size_t nreqs, reqs_cap;

struct perr {
  const char *code, *msg;
};
static const struct perr BAD_JSON = {"INVALID_JSON", "malformed JSON"};

/* The length of batch.steps (any other member of batch is skipped): -1 when
 * batch is not an object or has no steps array, -2 when malformed. */
static long batch_steps(struct scan *s) {
  bool first = true, afirst;
  const char *k;
  size_t kn;
  int r;
  long steps = -1;
  if (!sc_open(s, '{'))
    return sc_value(s) ? -1 : -2; /* batch is not an object: no steps */
  while ((r = sc_obj_next(s, &first, &k, &kn)) == 1) {
    sc_ws(s);
    if (is(k, kn, "steps") && sc_at(s, '[')) {
      if (!sc_open(s, '['))
        return -2;
      afirst = true;
      steps = 0;
      int e;
      while ((e = sc_arr_next(s, &afirst)) == 1) {
        if (!sc_value(s))
          return -2;
        steps++;
      }
      if (e < 0)
        return -2;
    } else if (!sc_value(s))
      return -2;
  }
  return r == 0 ? steps : -2;
}

/* Reads one element of "requests" (an object) into *q. */
static const struct perr *read_request(struct scan *s, struct req *q, bool *has_close) {
  static const char *const PLAIN[] = {"store_sql", "close_sql", "close", "sequence"};
  static const struct perr NOT_OBJECT = {"PROTO_ERROR", "a request is not an object"};
  bool first = true;
  const char *k, *type = NULL;
  size_t kn, tlen = 0;
  long steps = -1; /* -1: no batch.steps array */
  int r;
  sc_ws(s);
  if (!sc_at(s, '{'))
    return sc_value(s) ? &NOT_OBJECT : &BAD_JSON;
  if (!sc_open(s, '{'))
    return &BAD_JSON;
  /* Members come in any order: the type and the steps are matched at the end. */
  while ((r = sc_obj_next(s, &first, &k, &kn)) == 1) {
    sc_ws(s);
    if (is(k, kn, "type") && sc_at(s, '"')) {
      if (!sc_string(s, &type, &tlen))
        return &BAD_JSON;
    } else if (is(k, kn, "batch")) {
      long n = batch_steps(s);
      if (n == -2)
        return &BAD_JSON;
      steps = n;
    } else if (!sc_value(s))
      return &BAD_JSON;
  }
  if (r < 0)
    return &BAD_JSON;
  q->kind = K_UNSUPPORTED;
  q->type = NULL;
  q->steps = 0;
  if (!type)
    return NULL;
  if (is(type, tlen, "execute"))
    q->kind = K_EXECUTE;
  else if (is(type, tlen, "batch")) {
    q->kind = steps >= 0 ? K_BATCH : K_NO_STEPS;
    q->steps = steps >= 0 ? (size_t)steps : 0;
  } else
    for (size_t i = 0; i < sizeof PLAIN / sizeof PLAIN[0]; i++)
      if (is(type, tlen, PLAIN[i])) {
        q->kind = K_PLAIN;
        q->type = PLAIN[i];
      }
  if (is(type, tlen, "close"))
    *has_close = true;
  return NULL;
}

/* Reads a pipeline body into reqs; NULL, or why it is refused (*at: the byte). */
static const struct perr *read_pipeline(const char *body, size_t n, bool *has_close, size_t *at) {
  static const struct perr NO_REQUESTS = {"PROTO_ERROR", "no requests array"};
  struct scan s = {body, body, body + n, 0};
  const struct perr *err = NULL;
  bool first = true, seen = false;
  const char *k;
  size_t kn;
  int r;
  nreqs = 0;
  *has_close = false;
  if (!sc_open(&s, '{'))
    err = &BAD_JSON;
  while (!err && (r = sc_obj_next(&s, &first, &k, &kn)) != 0) {
    if (r < 0) {
      err = &BAD_JSON;
    } else if (is(k, kn, "requests") && sc_at(&s, '[')) {
      bool afirst = true;
      int e;
      seen = true;
      nreqs = 0; /* a repeated key: the last one counts, as in most JSON readers */
      *has_close = false;
      if (!sc_open(&s, '['))
        err = &BAD_JSON;
      while (!err && (e = sc_arr_next(&s, &afirst)) != 0) {
        if (e < 0) {
          err = &BAD_JSON;
          break;
        }
        if (nreqs == reqs_cap) {
          size_t cap = reqs_cap ? reqs_cap * 2 : 16;
          struct req *p = realloc(reqs, cap * sizeof *p);
          if (!p) {
            fputs("hrana_null: out of memory\n", stderr);
            exit(1);
          }
          reqs = p;
          reqs_cap = cap;
        }
        err = read_request(&s, &reqs[nreqs], has_close);
        if (!err)
          nreqs++;
      }
    } else if (!sc_value(&s)) {
      err = &BAD_JSON;
    }
  }
  if (!err) {
    sc_ws(&s);
    if (s.p != s.end)
      err = &BAD_JSON; /* something after the object */
    else if (!seen)
      err = &NO_REQUESTS;
  }
  *at = (size_t)(s.p - s.start);
  return err;
}

static const char RESULT[] = "{\"cols\":[],\"rows\":[],\"affected_row_count\":1,\"last_insert_rowid\":null,"
                             "\"replication_index\":null}";

static struct buf answer_body; /* scratch for a pipeline's answer, reused */
static unsigned long long batons;

/* The answer to reqs: one result per request, in order. */
static void write_results(struct buf *b, bool has_close) {
  b->len = 0;
  if (has_close) {
    buf_adds(b, "{\"baton\":null,\"base_url\":null,\"results\":[");
  } else {
    char t[96];
    /* A fresh baton, so the client's next pipeline on this stream carries one; nothing is behind it. */
    int n = snprintf(t, sizeof t, "{\"baton\":\"n%llu\",\"base_url\":null,\"results\":[", ++batons);
    buf_add(b, t, (size_t)n);
  }
  for (size_t i = 0; i < nreqs; i++) {
    const struct req *q = &reqs[i];
    if (i)
      buf_adds(b, ",");
    switch (q->kind) {
    case K_PLAIN:
      buf_adds(b, "{\"type\":\"ok\",\"response\":{\"type\":\"");
      buf_adds(b, q->type);
      buf_adds(b, "\"}}");
      break;
    case K_EXECUTE:
      buf_adds(b, "{\"type\":\"ok\",\"response\":{\"type\":\"execute\",\"result\":");
      buf_adds(b, RESULT);
      buf_adds(b, "}}");
      break;
    case K_BATCH:
      buf_adds(b, "{\"type\":\"ok\",\"response\":{\"type\":\"batch\",\"result\":{\"step_results\":[");
      for (size_t j = 0; j < q->steps; j++) {
        if (j)
          buf_adds(b, ",");
        buf_add(b, RESULT, sizeof RESULT - 1);
      }
      buf_adds(b, "],\"step_errors\":[");
      for (size_t j = 0; j < q->steps; j++)
        buf_adds(b, j ? ",null" : "null");
      buf_adds(b, "]}}}");
      break;
    case K_NO_STEPS:
      buf_adds(
          b, "{\"type\":\"error\",\"error\":{\"message\":\"batch without steps\",\"code\":\"PROTO_ERROR\"}}");
      break;
    case K_UNSUPPORTED:
      buf_adds(b, "{\"type\":\"error\",\"error\":{\"message\":\"unsupported\",\"code\":\"UNSUPPORTED\"}}");
      break;
    }
  }
  buf_adds(b, "]}");
}

/* ---- connections ------------------------------------------------------------------------------------- */

struct conn {
  int fd;
  uint32_t events;    /* what epoll watches: EPOLLIN, or EPOLLOUT while an answer is pending */
  bool sent_continue; /* "100 Continue" sent for the request being read */
  bool close_after;   /* close once the output is out (an error, Connection: close, HTTP/1.0) */
  bool peer_eof;      /* the client shut its side: answer what came, then close */
  bool draining;      /* closing answer out, our side shut: discard input until the client closes */
  size_t drained;
  struct buf in, out;
  size_t out_off; /* out's bytes before this are sent */
  struct conn *prev, *next;
};

static int ep = -1;
static struct conn *conns;         /* all open connections, freed on the way out */
static int listen_tag, signal_tag; /* their addresses mark the two other descriptors in epoll */

_Noreturn static void die(const char *what) {
  fprintf(stderr, "hrana_null: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void watch(struct conn *c, uint32_t events) {
  if (c->events == events)
    return;
  struct epoll_event ev = {.events = events, .data.ptr = c};
  if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
    die("epoll_ctl");
  c->events = events;
}

static void conn_close(struct conn *c) {
  close(c->fd); /* also leaves the epoll set: the descriptor is never duplicated */
  if (c->prev)
    c->prev->next = c->next;
  else
    conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  free(c->in.p);
  free(c->out.p);
  free(c);
}

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 431: return "Request Header Fields Too Large";
  default: return "Error";
  }
}

static void answer(struct conn *c, int status, const char *body, size_t n) {
  char head[192];
  int hn = snprintf(head, sizeof head,
                    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                    "Connection: %s\r\n\r\n",
                    status, reason(status), n, c->close_after ? "close" : "keep-alive");
  buf_add(&c->out, head, (size_t)hn);
  buf_add(&c->out, body, n);
}

/* msg and code are ours: nothing in them needs escaping. */
static void answer_error(struct conn *c, int status, const char *code, const char *msg) {
  char body[256];
  int n = snprintf(body, sizeof body, "{\"message\":\"%s\",\"code\":\"%s\"}", msg, code);
  answer(c, status, body, n < (int)sizeof body ? (size_t)n : sizeof body - 1);
}

/* An error that ends the connection: what follows it in the input is not read. */
static size_t refuse(struct conn *c, int status, const char *code, const char *msg, size_t n) {
  c->close_after = true;
  answer_error(c, status, code, msg);
  return n;
}

static void pipeline(struct conn *c, const char *body, size_t n) {
  bool has_close;
  size_t at;
  const struct perr *err = read_pipeline(body, n, &has_close, &at);
  if (err) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s (at byte %zu)", err->msg, at);
    answer_error(c, 400, err->code, msg);
    return;
  }
  write_results(&answer_body, has_close);
  answer(c, 200, answer_body.p, answer_body.len);
}

/* Comma-separated header value v contains tok (ASCII case ignored). */
static bool has_token(const char *v, size_t n, const char *tok) {
  const char *e = v + n;
  while (v < e) {
    const char *comma = memchr(v, ',', (size_t)(e - v));
    const char *a = v, *b = comma ? comma : e;
    while (a < b && (*a == ' ' || *a == '\t'))
      a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
      b--;
    if (is_ci(a, (size_t)(b - a), tok))
      return true;
    v = comma ? comma + 1 : e;
  }
  return false;
}

/* A Content-Length value: digits only. Past MAX_BODY it only has to stay past
 * it, so it cannot overflow. */
static bool parse_length(const char *v, size_t n, size_t *len) {
  size_t x = 0;
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return false;
    if (x <= MAX_BODY)
      x = x * 10 + (size_t)(v[i] - '0');
  }
  *len = x;
  return true;
}

/* Answers the request at p (n bytes of input): the bytes it took, or 0 while
 * it is incomplete. */
static size_t handle_request(struct conn *c, const char *p, size_t n) {
  const char *eoh = memmem(p, n < MAX_HEAD ? n : MAX_HEAD, "\r\n\r\n", 4);
  if (!eoh)
    return n >= MAX_HEAD ? refuse(c, 431, "HEADERS_TOO_LARGE", "request head over 16 KiB", n) : 0;
  size_t head = (size_t)(eoh - p) + 4;
  const char *line_end = memmem(p, head, "\r\n", 2); /* found: eoh is one */
  const char *method = p;
  const char *sp1 = memchr(p, ' ', (size_t)(line_end - p));
  if (!sp1 || sp1 == p)
    return refuse(c, 400, "HTTP_PARSE", "malformed request line", n);
  const char *target = sp1 + 1;
  const char *sp2 = memchr(target, ' ', (size_t)(line_end - target));
  if (!sp2 || sp2 == target)
    return refuse(c, 400, "HTTP_PARSE", "malformed request line", n);
  const char *version = sp2 + 1;
  bool keep;
  if (is(version, (size_t)(line_end - version), "HTTP/1.1"))
    keep = true;
  else if (is(version, (size_t)(line_end - version), "HTTP/1.0"))
    keep = false; /* unless it asks for keep-alive */
  else
    return refuse(c, 400, "HTTP_PARSE", "not HTTP/1.x", n);

  bool chunked = false, expect = false, have_len = false;
  size_t len = 0;
  /* Header lines run from after the request line to eoh's first CRLF, each ending in CRLF. */
  for (const char *l = line_end + 2; l < eoh + 2;) {
    const char *e = memmem(l, (size_t)(eoh + 2 - l), "\r\n", 2);
    const char *colon = memchr(l, ':', (size_t)(e - l));
    if (!colon || colon == l || *l == ' ' || *l == '\t')
      return refuse(c, 400, "HTTP_PARSE", "malformed header", n);
    const char *v = colon + 1, *ve = e;
    while (v < ve && (*v == ' ' || *v == '\t'))
      v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
      ve--;
    size_t nl = (size_t)(colon - l), vl = (size_t)(ve - v);
    if (is_ci(l, nl, "content-length")) {
      size_t x;
      if (!parse_length(v, vl, &x))
        return refuse(c, 400, "HTTP_PARSE", "malformed Content-Length", n);
      if (have_len && x != len)
        return refuse(c, 400, "HTTP_PARSE", "conflicting Content-Length", n);
      have_len = true;
      len = x;
    } else if (is_ci(l, nl, "transfer-encoding")) {
      chunked = true; /* any coding: the body's end could not be found without decoding it */
    } else if (is_ci(l, nl, "connection")) {
      if (has_token(v, vl, "close"))
        keep = false;
      else if (has_token(v, vl, "keep-alive"))
        keep = true;
    } else if (is_ci(l, nl, "expect")) {
      expect = is_ci(v, vl, "100-continue");
    }
    l = e + 2;
  }
  if (chunked)
    return refuse(c, 411, "LENGTH_REQUIRED", "Transfer-Encoding is not supported: send Content-Length", n);
  if (len > MAX_BODY)
    return refuse(c, 413, "BODY_TOO_LARGE", "request body over 1 MiB", n);
  if (n - head < len) {
    /* curl and others wait for this before sending a large body. */
    if (expect && !c->sent_continue) {
      buf_adds(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
      c->sent_continue = true;
    }
    return 0;
  }
  c->sent_continue = false;
  c->close_after = !keep;

  const char *body = p + head;
  size_t mlen = (size_t)(sp1 - method), tlen = (size_t)(sp2 - target);
  const char *query = memchr(target, '?', tlen);
  if (query)
    tlen = (size_t)(query - target);
  if (is(method, mlen, "GET") && (is(target, tlen, "/v2") || is(target, tlen, "/v3")))
    answer(c, 200, "", 0);
  else if (is(method, mlen, "POST") && (is(target, tlen, "/v2/pipeline") || is(target, tlen, "/v3/pipeline")))
    pipeline(c, body, len);
  else
    answer_error(c, 404, "NOT_FOUND", "no such endpoint");
  return head + len;
}

/* Answers every complete request in the input (pipelining), keeps the rest. */
static void conn_process(struct conn *c) {
  size_t off = 0;
  while (!c->close_after && off < c->in.len) {
    size_t used = handle_request(c, c->in.p + off, c->in.len - off);
    if (used == 0)
      break;
    off += used;
  }
  if (c->close_after)
    off = c->in.len; /* nothing after a closing answer is answered */
  memmove(c->in.p, c->in.p + off, c->in.len - off);
  c->in.len -= off;
  buf_trim(&c->in);
}

/* Sends what is pending; then watches for input again, or closes. */
static void conn_flush(struct conn *c) {
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) { /* EWOULDBLOCK is EAGAIN on Linux */
      watch(c, EPOLLOUT);                  /* and not EPOLLIN: no more input until the client reads */
      return;
    } else {
      conn_close(c);
      return;
    }
  }
  c->out.len = c->out_off = 0;
  buf_trim(&c->out);
  if (c->peer_eof) {
    conn_close(c);
    return;
  }
  if (c->close_after && !c->draining) {
    /* Closing with unread input would reset the connection, and the reset can
     * destroy the answer before the client reads it: shut our side and
     * discard input until the client closes. */
    shutdown(c->fd, SHUT_WR);
    c->draining = true;
  }
  watch(c, EPOLLIN);
}

static void conn_read(struct conn *c) {
  if (c->draining) {
    static char sink[16384];
    ssize_t n = read(c->fd, sink, sizeof sink);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return;
    if (n > 0 && (c->drained += (size_t)n) <= MAX_DRAIN)
      return;
    conn_close(c);
    return;
  }
  buf_reserve(&c->in, READ_CHUNK);
  ssize_t n = read(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len);
  if (n > 0) {
    c->in.len += (size_t)n;
  } else if (n == 0) {
    c->peer_eof = true; /* an incomplete request left in the input is dropped with the connection */
  } else if (errno == EAGAIN || errno == EINTR) {
    return;
  } else {
    conn_close(c);
    return;
  }
  conn_process(c);
  conn_flush(c);
}

static void conn_event(struct conn *c, uint32_t events) {
  if (events & EPOLLERR)
    conn_close(c);
  else if (c->events & EPOLLIN)
    conn_read(c); /* EPOLLIN or EPOLLHUP: the read says which */
  else
    conn_flush(c);
}

static void accept_all(int lfd) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno != EAGAIN)
        fprintf(stderr, "hrana_null: accept: %s\n", strerror(errno));
      return;
    }
    /* Each answer is one send: do not let Nagle hold it for the client's ACK. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
      fputs("hrana_null: out of memory\n", stderr);
      exit(1);
    }
    c->fd = fd;
    c->events = EPOLLIN;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
      die("epoll_ctl");
    c->next = conns;
    if (conns)
      conns->prev = c;
    conns = c;
  }
}

/* ---- main -------------------------------------------------------------------------------------------- */

_Noreturn static void usage(FILE *f, int status) {
  fputs("usage: hrana_null --listen 127.0.0.1:PORT\n"
        "  a null Hrana server (bench/hrana.js's arm N): answers POST /v2/pipeline and\n"
        "  /v3/pipeline with canned results and runs no SQL; GET /v2 and /v3 answer 200.\n"
        "  PORT 0: the kernel picks. Prints \"listening ADDR:PORT\" once listening;\n"
        "  SIGTERM or SIGINT: exit 0.\n",
        f);
  exit(status);
}

static int listen_on(const char *spec) {
  char host[64];
  const char *colon = strrchr(spec, ':');
  if (!colon || (size_t)(colon - spec) >= sizeof host)
    usage(stderr, 2);
  memcpy(host, spec, (size_t)(colon - spec));
  host[colon - spec] = '\0';
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  if (colon[1] == '\0' || *end != '\0' || errno != 0 || port < 0 || port > 65535 ||
      inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
    fprintf(stderr, "hrana_null: --listen %s: not IPV4:PORT\n", spec);
    exit(2);
  }
  sa.sin_port = htons((uint16_t)port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    /* bench/hrana.js looks for "in use" here and tries the next port */
    fprintf(stderr, "hrana_null: bind %s: %s\n", spec, strerror(errno));
    exit(1);
  }
  if (listen(fd, SOMAXCONN) != 0)
    die("listen");
  socklen_t sl = sizeof sa;
  if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
    die("getsockname");
  char addr[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
  printf("listening %s:%u\n", addr, (unsigned)ntohs(sa.sin_port));
  fflush(stdout);
  return fd;
}

int main(int argc, char **argv) {
  const char *spec = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      usage(stdout, 0);
    else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
      spec = argv[++i];
    else
      usage(stderr, 2);
  }
  if (!spec)
    usage(stderr, 2);

  /* The signals are read from a signalfd in the loop, so they are blocked first. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
    die("sigprocmask");
  signal(SIGPIPE, SIG_IGN); /* send uses MSG_NOSIGNAL; this covers a closed stdout */
  int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0)
    die("signalfd");

  int lfd = listen_on(spec);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0)
    die("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_tag};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
    die("epoll_ctl");
  ev.data.ptr = &signal_tag;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) != 0)
    die("epoll_ctl");

  struct epoll_event evs[64];
  bool running = true;
  while (running) {
    int n = epoll_wait(ep, evs, (int)(sizeof evs / sizeof evs[0]), -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n && running; i++) {
      if (evs[i].data.ptr == &listen_tag) {
        accept_all(lfd);
      } else if (evs[i].data.ptr == &signal_tag) {
        struct signalfd_siginfo si;
        if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
          running = false;
      } else {
        /* Each descriptor is reported once per epoll_wait, so one closed
         * here is not met again in this batch. */
        conn_event(evs[i].data.ptr, evs[i].events);
      }
    }
  }

  while (conns)
    conn_close(conns);
  free(reqs);
  free(answer_body.p);
  close(ep);
  close(lfd);
  close(sfd);
  return 0;
}
