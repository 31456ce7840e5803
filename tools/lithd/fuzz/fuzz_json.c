/*
 * libFuzzer harness: lithd's JSON reader (json.c) on arbitrary bytes. Every
 * input must either parse, with a tree whose every node is walked, or fail
 * with a position inside the input; nothing may crash, read past the input
 * or leak (ASan + UBSan). `make fuzz` runs it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const lj_value *v) {
  size_t n = 1;
  if (v->type == LJ_ARRAY)
    for (size_t i = 0; i < v->n; i++)
      n += walk(v->u.items[i]);
  else if (v->type == LJ_OBJECT)
    for (size_t i = 0; i < v->n; i++)
      n += strlen(v->u.members[i].key) <= v->u.members[i].keylen ? walk(v->u.members[i].value) : 0;
  else if (v->type == LJ_STRING && v->u.s[v->n] != '\0')
    abort(); /* strings are NUL-terminated after their bytes */
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lithd_arena a = {0};
  lj_value *root = NULL;
  lj_error err;
  if (lj_parse(&a, (const char *)data, size, &root, &err) == 0) {
    if (root == NULL)
      abort();
    walk(root);
  } else if (err.line < 1 || err.column < 1) {
    abort();
  }
  lithd_arena_free(&a);
  return 0;
}
