/*
 * libFuzzer harness: a board action as the kanban server reads it from a
 * client — the path under /boards/ (srv_parse_id, then srv_action_path)
 * and the JSON body (srv_action_json: "op" and the action's members).
 *
 * Input: "ID/ACTION-PATH\nBODY" (the path as after "/boards/"; an empty
 * first line is POST /boards, creating a board). Without a line break the
 * input is all path. The body is copied to a buffer of exactly its length.
 *
 * Oracles: a path gives an action only with a positive id; an accepted
 * body gives the action what its command needs (op id of 1..64 printable
 * ASCII bytes, the required texts, ids and indexes in their ranges, texts
 * without NUL), and a refused one a message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, int required) {
  if (s == NULL) {
    if (required)
      abort();
    return;
  }
  (void)strlen(s); /* inside the parsed body (ASan checks) */
}

static void check_action(const char *w, const kb_action *a) {
  size_t i, n = strlen(a->op_id);
  if (n == 0 || n > KB_OP_ID_MAX)
    abort();
  for (i = 0; i < n; i++)
    if (a->op_id[i] < 0x21 || a->op_id[i] > 0x7e)
      abort();
  if (strcmp(w, "create_board") == 0 || strcmp(w, "rename_board") == 0 || strcmp(w, "create_list") == 0 ||
      strcmp(w, "rename_list") == 0) {
    check_text(a->title, 1);
  } else if (strcmp(w, "add_member") == 0) {
    check_text(a->name, 1);
  } else if (strcmp(w, "archive_list") == 0 || strcmp(w, "archive_card") == 0) {
    if (a->archived != 0 && a->archived != 1)
      abort();
  } else if (strcmp(w, "create_card") == 0) {
    check_text(a->title, 1);
    check_text(a->description, 0);
    if (a->list_id < 1 || a->list_id > ((int64_t)1 << 53))
      abort();
    if (a->index < KB_END || a->index > INT32_MAX)
      abort();
  } else if (strcmp(w, "edit_card") == 0) {
    check_text(a->title, 0);
    check_text(a->description, 0);
    if (a->title == NULL && a->description == NULL)
      abort();
  } else if (strcmp(w, "move_card") == 0) {
    if (a->list_id < 1 || a->list_id > ((int64_t)1 << 53))
      abort();
    if (a->index < KB_END || a->index > INT32_MAX || a->seen_version < 0)
      abort();
  } else {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  size_t plen = nl != NULL ? (size_t)(nl - data) : size;
  size_t blen = nl != NULL ? size - plen - 1 : 0;
  char *path = malloc(plen + 1), *body = malloc(blen > 0 ? blen : 1);
  const char *what = NULL, *p = path;
  kb_action a;
  json_t *root = NULL;
  char msg[128];
  int64_t board = 0;

  if (path == NULL || body == NULL)
    abort();
  memcpy(path, data, plen);
  path[plen] = '\0'; /* the HTTP layer's paths are C strings */
  if (blen > 0)
    memcpy(body, nl + 1, blen);
  memset(&a, 0, sizeof a);

  if (plen == 0) {
    what = "create_board";
  } else if (!srv_parse_id(&p, &board) || srv_action_path(p, &what, &a) != 0) {
    goto out; /* 404 */
  } else if (board < 1 || what == NULL) {
    abort();
  }
  msg[0] = '\0';
  if (srv_action_json(body, blen, what, &root, &a, msg, sizeof msg) == 0)
    check_action(what, &a);
  else if (msg[0] == '\0')
    abort();
  json_decref(root);
out:
  free(path);
  free(body);
  return 0;
}
