/*
 * board_read.c — the kanban model's reads, run with lith_read.
 *
 * Each read is one lith_read callback, so it sees one snapshot: a board
 * loaded here is exactly the board after some batch, never half a move.
 * Results are copied into malloc'd structures (the statements' memory is
 * lith's and gone after the callback), built so that kb_board_free can free
 * a half-built board: every array is calloc'd or grown with its count kept
 * exact, and every string pointer starts NULL.
 *
 * Membership is checked in the same snapshot as the data it guards.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "board.h"

#define SQL_BOARD                                                                     \
  "SELECT title, version, EXISTS(SELECT 1 FROM members m WHERE m.board_id = b.id AND" \
  " m.user_id = ?2) FROM boards b WHERE b.id = ?1"
#define SQL_MEMBERS                                                                           \
  "SELECT u.id, u.name FROM members m JOIN users u ON u.id = m.user_id WHERE m.board_id = ?1" \
  " ORDER BY u.name"
#define SQL_LISTS                                                                     \
  "SELECT id, pos, archived, title FROM lists WHERE board_id = ?1 AND archived <= ?2" \
  " ORDER BY pos, id"
#define SQL_CARDS                                                                           \
  "SELECT id, pos, version, archived, title, description FROM cards WHERE list_id = ?1 AND" \
  " archived = 0 ORDER BY pos, id"
#define SQL_CARDS_ALL                                                                   \
  "SELECT id, pos, version, archived, title, description FROM cards WHERE list_id = ?1" \
  " ORDER BY archived, pos, id"
#define SQL_BOARDS                                                                    \
  "SELECT b.id, b.version, b.title FROM members m JOIN boards b ON b.id = m.board_id" \
  " WHERE m.user_id = ?1 ORDER BY b.title, b.id"
#define SQL_USER "SELECT id, pw_hash FROM users WHERE name = ?1"
#define SQL_SESSION                                                                         \
  "SELECT s.user_id, s.expires_ms, u.name FROM sessions s JOIN users u ON u.id = s.user_id" \
  " WHERE s.token_hash = ?1"

/* A copy of column i's text ("" for NULL); NULL only when out of memory. */
static char *dup_col(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  size_t n = (size_t)sqlite3_column_bytes(st, i);
  char *s = malloc(n + 1);
  if (!s)
    return NULL;
  if (t)
    memcpy(s, t, n);
  s[n] = '\0';
  return s;
}

/* Make room for one more element in *arr (n used, *cap allocated); the new
 * slot is zeroed. */
static int grow(void **arr, int n, int *cap, size_t size) {
  if (n < *cap) {
    memset((char *)*arr + (size_t)n * size, 0, size);
    return LITH_OK;
  }
  int ncap = *cap ? *cap * 2 : 8;
  void *p = realloc(*arr, (size_t)ncap * size);
  if (!p)
    return LITH_NOMEM;
  *arr = p;
  *cap = ncap;
  memset((char *)p + (size_t)n * size, 0, size);
  return LITH_OK;
}

static int step_rc(int src) {
  return src == SQLITE_DONE || src == SQLITE_ROW ? LITH_OK : lith_from_sqlite(src);
}

/* An empty statement from the cache, or NULL (*rc set). */
static sqlite3_stmt *stmt(lith_rx *rx, const char *sql, int *rc) {
  sqlite3_stmt *st = lith_rx_stmt(rx, sql);
  if (!st)
    *rc = LITH_ERROR;
  return st;
}

/* Board access in this snapshot: title and version into b. */
static int load_head(lith_rx *rx, int64_t board, int64_t user, kb_board *b) {
  int rc = LITH_OK;
  sqlite3_stmt *st = stmt(rx, SQL_BOARD, &rc);
  if (!st)
    return rc;
  sqlite3_bind_int64(st, 1, board);
  sqlite3_bind_int64(st, 2, user);
  int src = sqlite3_step(st);
  if (src != SQLITE_ROW) {
    rc = step_rc(src);
    sqlite3_reset(st);
    return rc != LITH_OK ? rc : KB_NOT_FOUND;
  }
  if (!sqlite3_column_int(st, 2)) {
    sqlite3_reset(st);
    return KB_FORBIDDEN;
  }
  if (b) {
    b->id = board;
    b->version = sqlite3_column_int64(st, 1);
    b->title = dup_col(st, 0);
    if (!b->title)
      rc = LITH_NOMEM;
  }
  sqlite3_reset(st);
  return rc;
}

static int load_members(lith_rx *rx, kb_board *b) {
  int rc = LITH_OK, cap = 0, src;
  sqlite3_stmt *st = stmt(rx, SQL_MEMBERS, &rc);
  if (!st)
    return rc;
  sqlite3_bind_int64(st, 1, b->id);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = grow((void **)&b->members, b->n_members, &cap, sizeof *b->members)) != LITH_OK)
      goto done;
    kb_member *m = &b->members[b->n_members++];
    m->user_id = sqlite3_column_int64(st, 0);
    if (!(m->name = dup_col(st, 1))) {
      rc = LITH_NOMEM;
      goto done;
    }
  }
  rc = step_rc(src);
done:
  sqlite3_reset(st);
  return rc;
}

static int load_cards(lith_rx *rx, kb_list *l, int archived) {
  int rc = LITH_OK, cap = 0, src;
  sqlite3_stmt *st = stmt(rx, archived ? SQL_CARDS_ALL : SQL_CARDS, &rc);
  if (!st)
    return rc;
  sqlite3_bind_int64(st, 1, l->id);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = grow((void **)&l->cards, l->n_cards, &cap, sizeof *l->cards)) != LITH_OK)
      goto done;
    kb_card *k = &l->cards[l->n_cards++];
    k->id = sqlite3_column_int64(st, 0);
    k->list_id = l->id;
    k->pos = sqlite3_column_int64(st, 1);
    k->version = sqlite3_column_int64(st, 2);
    k->archived = sqlite3_column_int(st, 3);
    k->title = dup_col(st, 4);
    k->description = dup_col(st, 5);
    if (!k->title || !k->description) {
      rc = LITH_NOMEM;
      goto done;
    }
  }
  rc = step_rc(src);
done:
  sqlite3_reset(st);
  return rc;
}

static int load_lists(lith_rx *rx, kb_board *b, int archived) {
  int rc = LITH_OK, cap = 0, src;
  sqlite3_stmt *st = stmt(rx, SQL_LISTS, &rc);
  if (!st)
    return rc;
  sqlite3_bind_int64(st, 1, b->id);
  sqlite3_bind_int(st, 2, archived ? 1 : 0);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = grow((void **)&b->lists, b->n_lists, &cap, sizeof *b->lists)) != LITH_OK)
      goto done;
    kb_list *l = &b->lists[b->n_lists++];
    l->id = sqlite3_column_int64(st, 0);
    l->pos = sqlite3_column_int64(st, 1);
    l->archived = sqlite3_column_int(st, 2);
    if (!(l->title = dup_col(st, 3))) {
      rc = LITH_NOMEM;
      goto done;
    }
  }
  rc = step_rc(src);
done:
  sqlite3_reset(st);
  if (rc != LITH_OK)
    return rc;
  /* The cards statement is another cached statement: the lists one is done. */
  for (int i = 0; i < b->n_lists; i++)
    if ((rc = load_cards(rx, &b->lists[i], archived)) != LITH_OK)
      return rc;
  return LITH_OK;
}

int kb_read_board(lith_rx *rx, void *arg) {
  kb_board_query *q = arg;
  if (!q)
    return LITH_MISUSE;
  q->board = NULL;
  kb_board *b = calloc(1, sizeof *b);
  if (!b)
    return LITH_NOMEM;
  int rc = load_head(rx, q->board_id, q->user_id, b);
  if (rc != LITH_OK)
    goto fail;
  if ((rc = load_members(rx, b)) != LITH_OK)
    goto fail;
  if ((rc = load_lists(rx, b, q->archived)) != LITH_OK)
    goto fail;
  q->board = b;
  return LITH_OK;
fail:
  kb_board_free(b);
  return rc;
}

void kb_board_free(kb_board *b) {
  if (!b)
    return;
  for (int i = 0; i < b->n_members; i++)
    free(b->members[i].name);
  free(b->members);
  for (int i = 0; i < b->n_lists; i++) {
    kb_list *l = &b->lists[i];
    for (int j = 0; j < l->n_cards; j++) {
      free(l->cards[j].title);
      free(l->cards[j].description);
    }
    free(l->cards);
    free(l->title);
  }
  free(b->lists);
  free(b->title);
  free(b);
}

int kb_read_board_version(lith_rx *rx, void *arg) {
  kb_board_version_query *q = arg;
  if (!q)
    return LITH_MISUSE;
  q->version = 0;
  kb_board b = {0};
  int rc = load_head(rx, q->board_id, q->user_id, &b);
  if (rc == LITH_OK)
    q->version = b.version;
  free(b.title);
  return rc;
}

int kb_read_boards(lith_rx *rx, void *arg) {
  kb_boards_query *q = arg;
  if (!q)
    return LITH_MISUSE;
  q->boards = NULL;
  q->n_boards = 0;
  kb_board_summary *v = NULL;
  int n = 0, cap = 0, rc = LITH_OK, src;
  sqlite3_stmt *st = stmt(rx, SQL_BOARDS, &rc);
  if (!st)
    return rc;
  sqlite3_bind_int64(st, 1, q->user_id);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = grow((void **)&v, n, &cap, sizeof *v)) != LITH_OK)
      goto fail;
    kb_board_summary *s = &v[n++];
    s->id = sqlite3_column_int64(st, 0);
    s->version = sqlite3_column_int64(st, 1);
    if (!(s->title = dup_col(st, 2))) {
      rc = LITH_NOMEM;
      goto fail;
    }
  }
  if ((rc = step_rc(src)) != LITH_OK)
    goto fail;
  sqlite3_reset(st);
  q->boards = v;
  q->n_boards = n;
  return LITH_OK;
fail:
  sqlite3_reset(st);
  kb_boards_free(v, n);
  return rc;
}

void kb_boards_free(kb_board_summary *boards, int n) {
  if (!boards)
    return;
  for (int i = 0; i < n; i++)
    free(boards[i].title);
  free(boards);
}

/* Copy column i's text into buf (size cap) if it fits. */
static int copy_col(sqlite3_stmt *st, int i, char *buf, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, i);
  size_t n = (size_t)sqlite3_column_bytes(st, i);
  if (!t || n >= cap)
    return LITH_ERROR;
  memcpy(buf, t, n);
  buf[n] = '\0';
  return LITH_OK;
}

int kb_read_user(lith_rx *rx, void *arg) {
  kb_user_query *q = arg;
  if (!q || !q->name)
    return LITH_MISUSE;
  q->user_id = 0;
  q->pw_hash[0] = '\0';
  int rc = LITH_OK;
  sqlite3_stmt *st = stmt(rx, SQL_USER, &rc);
  if (!st)
    return rc;
  sqlite3_bind_text(st, 1, q->name, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    q->user_id = sqlite3_column_int64(st, 0);
    rc = copy_col(st, 1, q->pw_hash, sizeof q->pw_hash);
  } else {
    rc = step_rc(src);
    if (rc == LITH_OK)
      rc = KB_NOT_FOUND;
  }
  sqlite3_reset(st);
  return rc;
}

int kb_read_session(lith_rx *rx, void *arg) {
  kb_session_query *q = arg;
  if (!q || !q->token_hash)
    return LITH_MISUSE;
  q->user_id = q->expires_ms = 0;
  q->name[0] = '\0';
  int64_t now = q->now_ms ? q->now_ms : kb_now_ms();
  int rc = LITH_OK;
  sqlite3_stmt *st = stmt(rx, SQL_SESSION, &rc);
  if (!st)
    return rc;
  sqlite3_bind_text(st, 1, q->token_hash, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW && sqlite3_column_int64(st, 1) > now) {
    q->user_id = sqlite3_column_int64(st, 0);
    q->expires_ms = sqlite3_column_int64(st, 1);
    rc = copy_col(st, 2, q->name, sizeof q->name);
  } else if (src == SQLITE_ROW) {
    rc = KB_NOT_FOUND; /* expired */
  } else {
    rc = step_rc(src);
    if (rc == LITH_OK)
      rc = KB_NOT_FOUND;
  }
  sqlite3_reset(st);
  if (rc != LITH_OK)
    q->user_id = q->expires_ms = 0;
  return rc;
}
