/*
 * libFuzzer harness: sql/split.c against the rule it replaced
 * (test/split_ref.h: sqlite3_complete at each ';'). Every input must give
 * the same statements, the same "ended at its own ';'" and the same
 * bounded counts both ways; nothing may read past the text (ASan). An
 * input whose first byte is even is the text itself (the rest of it);
 * odd, each further byte picks a piece of split_alphabet, so that the
 * keywords and quotes that move sqlite3_complete's machine come often
 * (from raw bytes alone the fuzzer seldom spells CREATE ... TRIGGER).
 * `make fuzz` runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "split_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[256], *text;
  size_t n = 0;
  if (size < 1 || size > 4096)
    return 0;               /* the oracle is quadratic */
  text = malloc(size * 32); /* exactly the text's bytes are read (ASan) */
  if (text == NULL)
    abort();
  for (size_t i = 1; i < size; i++) {
    if (data[0] & 1) {
      const struct split_token *t = &split_alphabet[data[i] % SPLIT_ALPHABET_N];
      memcpy(text + n, t->s, t->n);
      n += t->n;
    } else {
      text[n++] = (char)data[i];
    }
  }
  text = realloc(text, n > 0 ? n : 1);
  if (text == NULL)
    abort();
  if (!split_ref_same(text, n, why, sizeof why)) {
    fprintf(stderr, "split differs from sqlite3_complete: %s\n", why);
    abort();
  }
  free(text);
  return 0;
}
