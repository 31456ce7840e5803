/*
 * libFuzzer harness: what `lith` reads from lithd. The input's bytes are
 * the server's answer; client.c reads it (status line, headers, 1xx,
 * Content-Length, chunked or to-the-end bodies) and main.c decodes the JSON
 * and prints it (results, pairs, health, backup, errors; --json too).
 *
 * Input: byte 0 says how the answer arrives: bits 0-4 the size of each of
 * the first reads (0: as much as the reader asks for), bit 5 the
 * connection is reset at the end instead of closed, bit 6 a HEAD request,
 * bit 7 with a token (the wording of a 401). The rest is what the server
 * sends. client.c reads it through lithc_response_read_from, one source
 * call per receive: the split points are the input's own, so a run is
 * deterministic, client.c's refills (a line or a chunk size cut in two)
 * are reached, and no socket costs a system call per read.
 *
 * Oracle, besides the sanitizers: the same bytes read in small pieces and
 * in one read give the same outcome (code, message, status, headers,
 * body), and a failed read leaves the response empty.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* main.c, with its main renamed and its messages to stderr sent to
 * /dev/null: printed at thousands of inputs a second they would drown the
 * fuzzer's own output (stdout is reopened on /dev/null at start). */
static FILE *fuzz_null;
#undef stderr
#define stderr fuzz_null
#define main lith_cli_main
int lith_cli_main(int argc, char **argv);
#include "../main.c" /* tools/lith/main.c (not lithd's) */
#undef main
#undef stderr
#define stderr stderr

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SPLITS_MAX 64 /* reads of `piece` bytes; then as much as asked */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_null = fopen("/dev/null", "w");
  if (fuzz_null == NULL || freopen("/dev/null", "w", stdout) == NULL)
    abort();
  return 0;
}

/* The server's side: the input's bytes, cut as byte 0 says. */
struct source {
  const uint8_t *p;
  size_t n, off;
  size_t piece; /* 0: no cuts */
  int reads;
  int reset; /* end with ECONNRESET rather than the end of the stream */
};

static ssize_t source_read(void *ctx, char *buf, size_t want) {
  struct source *s = ctx;
  size_t k = s->n - s->off;
  if (k == 0) {
    if (!s->reset)
      return 0;
    errno = ECONNRESET;
    return -1;
  }
  if (k > want)
    k = want;
  if (s->piece > 0 && s->reads < SPLITS_MAX && k > s->piece)
    k = s->piece;
  memcpy(buf, s->p + s->off, k);
  s->off += k;
  s->reads++;
  return (ssize_t)k;
}

struct outcome {
  int rc;
  char err[512];
  lithc_response r;
};

static void read_as(const uint8_t *p, size_t n, size_t piece, int reset, const char *method,
                    struct outcome *o) {
  struct source src = {p, n, 0, piece, 0, reset};
  o->err[0] = '\0';
  o->rc = lithc_response_read_from(source_read, &src, method, "fuzz", &o->r, o->err, sizeof o->err);
}

/* What lithc_response_read promises about one outcome. */
static void check_one(const struct outcome *o) {
  const lithc_response *r = &o->r;
  size_t i;
  if (o->rc != LITHC_OK) {
    static const lithc_response empty;
    if (o->err[0] == '\0' || memcmp(r, &empty, sizeof empty) != 0)
      abort();
    return;
  }
  if (r->status < 200 || r->status > 999 || r->body == NULL || r->body[r->body_len] != '\0' ||
      r->head == NULL)
    abort();
  for (i = 0; i < r->n_headers; i++) {
    const lithc_header *h = &r->headers[i];
    size_t hl = strlen(r->head);
    if (h->name < r->head || h->name + h->name_len > r->head + hl || h->value < r->head ||
        h->value + h->value_len > r->head + hl || h->name_len == 0)
      abort();
  }
}

static int same(const struct outcome *a, const struct outcome *b) {
  size_t i;
  if (a->rc != b->rc || strcmp(a->err, b->err) != 0)
    return 0;
  if (a->rc != LITHC_OK)
    return 1;
  if (a->r.status != b->r.status || a->r.body_len != b->r.body_len ||
      memcmp(a->r.body, b->r.body, a->r.body_len) != 0 || a->r.n_headers != b->r.n_headers ||
      strcmp(a->r.head, b->r.head) != 0)
    return 0;
  for (i = 0; i < a->r.n_headers; i++)
    if (a->r.headers[i].name - a->r.head != b->r.headers[i].name - b->r.head ||
        a->r.headers[i].value - a->r.head != b->r.headers[i].value - b->r.head ||
        a->r.headers[i].name_len != b->r.headers[i].name_len ||
        a->r.headers[i].value_len != b->r.headers[i].value_len)
      return 0;
  return 1;
}

/* main.c's handling of an answer, as each command would see it. */
static void decode(const lithc_response *r, const char *method, int with_token) {
  static const printer printers[] = {print_results, print_pairs, print_health, print_backup, print_batch};
  struct cli cli;
  size_t i;
  int status;
  memset(&cli, 0, sizeof cli);
  cli.token = with_token ? (char *)"t0ken" : NULL;
  for (i = 0; i < sizeof printers / sizeof printers[0]; i++) {
    status = handle_answer(&cli, method, "/v1/do", r, printers[i]);
    if (status != EXIT_DONE && status != EXIT_SERVER && status != EXIT_NO_ANSWER)
      abort();
  }
  cli.json = 1;
  status = handle_answer(&cli, method, "/v1/query", r, print_results);
  if (status != EXIT_DONE && status != EXIT_SERVER && status != EXIT_NO_ANSWER)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct outcome split, whole;
  size_t piece;
  int reset;
  const char *method;
  if (size < 1)
    return 0;
  piece = data[0] & 0x1f;
  reset = (data[0] & 0x20) != 0;
  method = data[0] & 0x40 ? "HEAD" : "GET";
  memset(&split, 0, sizeof split);
  memset(&whole, 0, sizeof whole);

  read_as(data + 1, size - 1, piece, reset, method, &split);
  check_one(&split);
  if (piece > 0) {
    read_as(data + 1, size - 1, 0, reset, method, &whole);
    check_one(&whole);
    if (!same(&split, &whole))
      abort(); /* the cuts changed the outcome */
    lithc_response_free(&whole.r);
  }
  if (split.rc == LITHC_OK)
    decode(&split.r, method, data[0] & 0x80);
  lithc_response_free(&split.r);
  return 0;
}
