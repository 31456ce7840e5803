/*
 * libFuzzer harness: a FILES body (DUMP's answer) as a node may send it,
 * through dqlite/wire.c's lith__dq_files_next, the decoder lith__dq_dump
 * streams a dump through.
 *
 * The input: one byte (the piece size, 1 to 256), one byte (how many bytes
 * the header announces beyond what follows, 0 to 255: a node that stops
 * early), then the body. The body is fed in pieces of that size, each a
 * malloc'd copy of exactly its bytes (ASan sees a read past it), and fed
 * again whole in one piece.
 *
 * Oracle, besides the sanitizers: both feedings reach the same outcome
 * (DONE, PROTO, or waiting for bytes that never come) with the same files
 * (names, sizes, bytes); a piece's used bytes never exceed it; DATA points
 * inside what was used of its piece; a file's DATA adds up to its size,
 * never past it; no file index reaches the count; a name is a string
 * within LITH_DQ_FILE_NAME_MAX; DONE leaves `left` bytes the body still
 * holds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
  if (!cond)
    abort();
}

/* What one feeding saw: the outcome and a digest of the files. */
typedef struct seen {
  int rc; /* LITH_DQ_OK with done, LITH_DQ_PROTO, or -1: bytes ran out */
  int done;
  uint64_t nfiles, bytes, hash;
} seen;

static void mix(seen *s, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    s->hash = (s->hash ^ b[i]) * 1099511628211ULL;
}

static void feed(const uint8_t *body, size_t n, uint64_t announced, size_t piece, seen *s) {
  lith__dq_files f;
  size_t off = 0;
  uint64_t got = 0; /* the current file's bytes so far */
  memset(s, 0, sizeof *s);
  s->hash = 1469598103934665603ULL;
  lith__dq_files_init(&f, announced);
  for (;;) {
    size_t k = n - off < piece ? n - off : piece, used, len;
    const uint8_t *d;
    int ev;
    uint8_t *chunk = malloc(k ? k : 1);
    if (chunk == NULL)
      abort();
    memcpy(chunk, body + off, k);
    s->rc = lith__dq_files_next(&f, chunk, k, &used, &ev, &d, &len);
    check(used <= k);
    if (s->rc == LITH_DQ_OK && ev == LITH_DQ_FILES_DATA) {
      check(len > 0 && d >= chunk && d + len <= chunk + used);
      check(got + len <= f.size);
      got += len;
      s->bytes += len;
      mix(s, d, len);
    }
    free(chunk);
    off += used;
    if (s->rc != LITH_DQ_OK)
      return;
    switch (ev) {
    case LITH_DQ_FILES_BEGIN:
      check(f.index < f.count && f.index == s->nfiles);
      check(memchr(f.name, 0, LITH_DQ_FILE_NAME_MAX) != NULL);
      mix(s, f.name, strlen(f.name) + 1);
      mix(s, &f.size, sizeof f.size);
      s->nfiles++;
      got = 0;
      break;
    case LITH_DQ_FILES_END: check(got == f.size); break;
    case LITH_DQ_FILES_DONE:
      check(s->nfiles == f.count);
      check(f.left <= announced && off + f.left == announced);
      s->done = 1;
      return;
    case LITH_DQ_FILES_NEED:
      check(used == k);
      if (off == n) {
        s->rc = -1;
        return;
      }
      break;
    default: check(ev == LITH_DQ_FILES_DATA);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  seen a, b;
  if (size < 2)
    return 0;
  size_t piece = (size_t)data[0] + 1;
  uint64_t announced = (uint64_t)(size - 2) + data[1];
  feed(data + 2, size - 2, announced, piece, &a);
  feed(data + 2, size - 2, announced, size, &b);
  check(a.rc == b.rc && a.done == b.done && a.nfiles == b.nfiles && a.bytes == b.bytes && a.hash == b.hash);
  return 0;
}
