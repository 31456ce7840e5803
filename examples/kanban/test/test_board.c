/*
 * The kanban model's commands and reads (examples/kanban/board.h), on a
 * real lith handle and a file in the scratch directory.
 *
 * What must hold, and how it is shown:
 *   - order: random moves within and across lists (and to KB_END) against a
 *     model kept in the test; after every few moves the board read back has
 *     exactly the model's order, positions strictly increasing per list;
 *     inserting repeatedly between the same two cards exhausts the gap and
 *     the list is renumbered (positions multiples of KB_GAP again);
 *   - a stale move (old seen_version) is KB_STALE, says the current version,
 *     and changes nothing (board version, positions, card version);
 *   - an op id replayed returns the original outcome with replayed = 1 and
 *     applies nothing twice (one card created, one version bump), even when
 *     the replay would otherwise be stale; another action under the same op
 *     id is KB_OP_CONFLICT; op ids are per user;
 *   - membership: a non-member gets KB_FORBIDDEN from every board command
 *     and read, and the database does not change;
 *   - archive / restore / rename / edit, bad input, the board version rising
 *     by exactly one per successful command, on_commit receiving the board
 *     ids of committed commands only;
 *   - users and sessions, kb_prune, kb_plain_run on a plain connection;
 *   - many threads moving their own cards at once (scaled by
 *     LITH_TEST_SCALE under sanitizers): all answered OK, order consistent,
 *     board version == number of successful commands.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "board.h"

#define DB "board.db"

static int scaled(int n) {
  const char *s = getenv("LITH_TEST_SCALE");
  int d = s ? atoi(s) : 1;
  if (d < 1)
    d = 1;
  return n / d < 1 ? 1 : n / d;
}

/* ---- fixture: a fresh database, three users, a board of alice and bob --- */

#define MAX_TOPICS 65536

typedef struct fx {
  lith *db;
  int64_t alice, bob, carol; /* carol is on no board of the fixture */
  int64_t board;
  int64_t lists[3];
  pthread_mutex_t mu;
  int64_t topics[MAX_TOPICS];
  int ntopics;
} fx;

static void on_commit(void *ctx, const int64_t *topics, int n) {
  fx *f = ctx;
  pthread_mutex_lock(&f->mu);
  for (int i = 0; i < n && f->ntopics < MAX_TOPICS; i++)
    f->topics[f->ntopics++] = topics[i];
  pthread_mutex_unlock(&f->mu);
}

static int64_t make_user(lith *db, const char *name) {
  kb_user_args u = {.name = name, .pw_hash = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA"};
  assert_int_equal(lith_do(db, kb_create_user, &u), LITH_OK);
  assert_true(u.user_id > 0);
  return u.user_id;
}

static int setup(void **state) {
  unlink(DB);
  unlink(DB "-wal");
  unlink(DB "-shm");
  fx *f = calloc(1, sizeof *f);
  assert_non_null(f);
  pthread_mutex_init(&f->mu, NULL);
  lith_options opt;
  lith_options_default(&opt);
  kb_options_schema(&opt);
  opt.readers = 2;
  opt.on_commit = on_commit;
  opt.on_commit_ctx = f;
  assert_int_equal(lith_open(DB, &opt, &f->db), LITH_OK);
  f->alice = make_user(f->db, "alice");
  f->bob = make_user(f->db, "bob");
  f->carol = make_user(f->db, "carol");
  int64_t users[] = {f->alice, f->bob};
  kb_seed_args s = {.user_ids = users, .n_users = 2, .title = "Team"};
  assert_int_equal(lith_do(f->db, kb_seed_demo, &s), LITH_OK);
  f->board = s.board_id;
  kb_board_query q = {.user_id = f->alice, .board_id = f->board};
  assert_int_equal(lith_read(f->db, kb_read_board, &q), LITH_OK);
  assert_int_equal(q.board->n_lists, 3);
  for (int i = 0; i < 3; i++)
    f->lists[i] = q.board->lists[i].id;
  kb_board_free(q.board);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  assert_int_equal(lith_close(f->db), LITH_OK);
  pthread_mutex_destroy(&f->mu);
  free(f);
  return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static kb_board *load_as(fx *f, int64_t user, int64_t board, int archived) {
  kb_board_query q = {.user_id = user, .board_id = board, .archived = archived};
  assert_int_equal(lith_read(f->db, kb_read_board, &q), LITH_OK);
  assert_non_null(q.board);
  return q.board;
}

static kb_board *load(fx *f) { return load_as(f, f->alice, f->board, 0); }

static int64_t board_version(fx *f, int64_t board) {
  kb_board_version_query q = {.user_id = f->alice, .board_id = board};
  assert_int_equal(lith_read(f->db, kb_read_board_version, &q), LITH_OK);
  return q.version;
}

static const kb_list *find_list(const kb_board *b, int64_t id) {
  for (int i = 0; i < b->n_lists; i++)
    if (b->lists[i].id == id)
      return &b->lists[i];
  return NULL;
}

static const kb_card *find_card(const kb_board *b, int64_t id) {
  for (int i = 0; i < b->n_lists; i++)
    for (int j = 0; j < b->lists[i].n_cards; j++)
      if (b->lists[i].cards[j].id == id)
        return &b->lists[i].cards[j];
  return NULL;
}

/* Every list's non-archived positions strictly increase; no card twice. */
static void assert_consistent(const kb_board *b) {
  int total = 0;
  for (int i = 0; i < b->n_lists; i++) {
    const kb_list *l = &b->lists[i];
    for (int j = 0; j < l->n_cards; j++) {
      assert_int_equal(l->cards[j].list_id, l->id);
      if (j > 0 && !l->cards[j].archived && !l->cards[j - 1].archived)
        assert_true(l->cards[j - 1].pos < l->cards[j].pos);
      total++;
    }
  }
  for (int i = 0; i < b->n_lists; i++)
    for (int j = 0; j < b->lists[i].n_cards; j++) {
      int seen = 0;
      for (int k = 0; k < b->n_lists; k++)
        for (int m = 0; m < b->lists[k].n_cards; m++)
          seen += b->lists[k].cards[m].id == b->lists[i].cards[j].id;
      assert_int_equal(seen, 1);
    }
  (void)total;
}

static void assert_order(const kb_board *b, int64_t list, const int64_t *ids, int n) {
  const kb_list *l = find_list(b, list);
  assert_non_null(l);
  assert_int_equal(l->n_cards, n);
  for (int i = 0; i < n; i++)
    assert_int_equal(l->cards[i].id, ids[i]);
}

static int64_t new_card(fx *f, int64_t list, const char *title, int64_t index) {
  kb_action a = {.user_id = f->alice, .list_id = list, .title = title, .index = index};
  assert_int_equal(lith_do(f->db, kb_create_card, &a), LITH_OK);
  assert_true(a.out.id > 0);
  assert_int_equal(a.out.version, 1);
  return a.out.id;
}

static int64_t new_list(fx *f, int64_t board, const char *title) {
  kb_action a = {.user_id = f->alice, .board_id = board, .title = title};
  assert_int_equal(lith_do(f->db, kb_create_list, &a), LITH_OK);
  return a.out.id;
}

static int move(fx *f, int64_t user, int64_t card, int64_t list, int64_t index, int64_t seen,
                kb_result *out) {
  kb_action a = {.user_id = user, .card_id = card, .list_id = list, .index = index, .seen_version = seen};
  int rc = lith_do(f->db, kb_move_card, &a);
  if (out)
    *out = a.out;
  return rc;
}

static int64_t card_version(fx *f, int64_t card) {
  kb_board *b = load_as(f, f->alice, f->board, 1);
  const kb_card *k = find_card(b, card);
  assert_non_null(k);
  int64_t v = k->version;
  kb_board_free(b);
  return v;
}

/* A fingerprint of everything a board command can change, read with plain
 * SQLite (a second connection; WAL). */
static char *dump(void) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(DB, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(
      sqlite3_prepare_v2(db,
                         "SELECT group_concat(x, ';') FROM ("
                         " SELECT 'b' || id || ',' || title || ',' || version AS x FROM boards"
                         " UNION ALL SELECT 'm' || board_id || ',' || user_id FROM members"
                         " UNION ALL SELECT 'l' || id || ',' || title || ',' || pos || ',' ||"
                         " archived FROM lists"
                         " UNION ALL SELECT 'c' || id || ',' || list_id || ',' || title || ',' ||"
                         " description || ',' || pos || ',' || archived || ',' || version FROM cards"
                         " UNION ALL SELECT 'o' || user_id || ',' || op_id FROM ops"
                         " ORDER BY 1)",
                         -1, &st, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  char *s = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return s;
}

static int64_t query_int(const char *sql) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(DB, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8;
}

/* ---- order ---------------------------------------------------------------- */

/* The model: each list's card ids in order. */
typedef struct model {
  int64_t ids[3][64];
  int n[3];
} model;

static void model_remove(model *m, int64_t card, int *list, int *at) {
  for (int l = 0; l < 3; l++)
    for (int i = 0; i < m->n[l]; i++)
      if (m->ids[l][i] == card) {
        *list = l;
        *at = i;
        memmove(&m->ids[l][i], &m->ids[l][i + 1], (size_t)(m->n[l] - i - 1) * sizeof(int64_t));
        m->n[l]--;
        return;
      }
  fail_msg("card %lld not in the model", (long long)card);
}

static void test_moves_keep_order(void **state) {
  fx *f = *state;
  /* A fresh board: three empty lists, 24 cards dealt into them. */
  kb_action nb = {.user_id = f->alice, .title = "Order"};
  assert_int_equal(lith_do(f->db, kb_create_board, &nb), LITH_OK);
  int64_t board = nb.out.board_id;
  int64_t lists[3];
  model m = {0};
  for (int l = 0; l < 3; l++)
    lists[l] = new_list(f, board, l == 0 ? "A" : l == 1 ? "B" : "C");
  int64_t version[1024] = {0};
  int64_t all[24];
  for (int i = 0; i < 24; i++) {
    char title[32];
    snprintf(title, sizeof title, "card %d", i);
    int l = i % 3;
    all[i] = new_card(f, lists[l], title, KB_END);
    m.ids[l][m.n[l]++] = all[i];
    version[all[i] % 1024] = 1;
  }
  unsigned seed = 12345;
  int moves = scaled(600);
  for (int k = 0; k < moves; k++) {
    int64_t card = all[rnd(&seed) % 24];
    int from, at;
    model_remove(&m, card, &from, &at);
    int to = (int)(rnd(&seed) % 3);
    /* Mostly close to where the card was or the ends, to hit the edges. */
    int64_t index;
    unsigned how = rnd(&seed) % 5;
    if (how == 0)
      index = 0;
    else if (how == 1)
      index = KB_END;
    else if (how == 2)
      index = m.n[to];
    else
      index = (int64_t)(rnd(&seed) % (unsigned)(m.n[to] + 1));
    kb_result out;
    assert_int_equal(move(f, f->alice, card, lists[to], index, version[card % 1024], &out), LITH_OK);
    assert_int_equal(out.version, version[card % 1024] + 1);
    version[card % 1024] = out.version;
    int64_t landed = index == KB_END ? m.n[to] : index;
    assert_int_equal(out.index, landed);
    memmove(&m.ids[to][landed + 1], &m.ids[to][landed], (size_t)(m.n[to] - landed) * sizeof(int64_t));
    m.ids[to][landed] = card;
    m.n[to]++;
    if (k % 7 == 0 || k == moves - 1) {
      kb_board *b = load_as(f, f->alice, board, 0);
      assert_consistent(b);
      for (int l = 0; l < 3; l++)
        assert_order(b, lists[l], m.ids[l], m.n[l]);
      kb_board_free(b);
    }
  }
  /* Board version: 1 (create) + 3 lists + 24 cards + the moves. */
  assert_int_equal(board_version(f, board), 1 + 3 + 24 + moves);
}

static void test_gap_exhausted_renumbers(void **state) {
  fx *f = *state;
  int64_t list = new_list(f, f->board, "Gaps");
  int64_t a = new_card(f, list, "a", KB_END);
  int64_t z = new_card(f, list, "z", KB_END);
  /* Keep inserting right after a: the gap after it halves every time. */
  int64_t ids[40];
  int n = 0;
  for (int i = 0; i < 30; i++) {
    char t[16];
    snprintf(t, sizeof t, "x%d", i);
    ids[n++] = new_card(f, list, t, 1);
  }
  /* Expected order: a, x29, x28, ..., x0, z. */
  int64_t want[40];
  int w = 0;
  want[w++] = a;
  for (int i = n - 1; i >= 0; i--)
    want[w++] = ids[i];
  want[w++] = z;
  kb_board *b = load(f);
  assert_consistent(b);
  assert_order(b, list, want, w);
  kb_board_free(b);
  /* 1024 halves at most 10 times: a renumber happened, positions are
   * multiples of KB_GAP again for all but the last few inserts. */
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM cards WHERE list_id = %lld AND pos %% %d = 0 AND archived = 0",
           (long long)list, KB_GAP);
  assert_true(query_int(sql) >= 20);
  /* Now moves, cross-list into the same crowded spot. */
  int64_t other = f->lists[0];
  kb_board *b2 = load(f);
  const kb_list *src = find_list(b2, other);
  int ncards = src->n_cards;
  int64_t moved[16];
  int64_t vers[16];
  for (int i = 0; i < ncards && i < 16; i++) {
    moved[i] = src->cards[i].id;
    vers[i] = src->cards[i].version;
  }
  kb_board_free(b2);
  for (int i = 0; i < ncards && i < 16; i++)
    assert_int_equal(move(f, f->alice, moved[i], list, 1, vers[i], NULL), LITH_OK);
  b = load(f);
  assert_consistent(b);
  const kb_list *l = find_list(b, list);
  assert_int_equal(l->n_cards, w + ncards);
  assert_int_equal(l->cards[0].id, a);
  for (int i = 0; i < ncards; i++)
    assert_int_equal(l->cards[1 + i].id, moved[ncards - 1 - i]);
  assert_int_equal(l->cards[l->n_cards - 1].id, z);
  assert_int_equal(find_list(b, other)->n_cards, 0);
  kb_board_free(b);
}

static void test_move_to_same_place_keeps_position(void **state) {
  fx *f = *state;
  kb_board *b = load(f);
  const kb_list *l = find_list(b, f->lists[0]);
  assert_true(l->n_cards >= 2);
  int64_t card = l->cards[1].id, pos = l->cards[1].pos, v = l->cards[1].version;
  kb_board_free(b);
  kb_result out;
  assert_int_equal(move(f, f->alice, card, f->lists[0], 1, v, &out), LITH_OK);
  assert_int_equal(out.version, v + 1);
  assert_int_equal(out.index, 1);
  b = load(f);
  assert_int_equal(find_card(b, card)->pos, pos);
  assert_int_equal(find_list(b, f->lists[0])->cards[1].id, card);
  kb_board_free(b);
}

/* ---- stale moves ------------------------------------------------------------ */

static void test_stale_move_refused(void **state) {
  fx *f = *state;
  kb_board *b = load(f);
  int64_t card = find_list(b, f->lists[0])->cards[0].id;
  kb_board_free(b);
  /* bob moves it; alice still has version 1. */
  kb_result out;
  assert_int_equal(move(f, f->bob, card, f->lists[1], 0, 1, &out), LITH_OK);
  assert_int_equal(out.version, 2);
  char *before = dump();
  int64_t bv = board_version(f, f->board);
  int ntopics = f->ntopics;
  assert_int_equal(move(f, f->alice, card, f->lists[2], 0, 1, &out), KB_STALE);
  assert_int_equal(out.version, 2);
  assert_non_null(strstr(lith_errmsg(f->db), "moved meanwhile"));
  char *after = dump();
  assert_string_equal(before, after);
  assert_int_equal(board_version(f, f->board), bv);
  assert_int_equal(f->ntopics, ntopics);
  /* With the version it was told, the move goes through. */
  assert_int_equal(move(f, f->alice, card, f->lists[2], 0, out.version, &out), LITH_OK);
  assert_int_equal(out.version, 3);
  free(before);
  free(after);
}

/* ---- op ids ------------------------------------------------------------------ */

static void test_replayed_op_applied_once(void **state) {
  fx *f = *state;
  kb_action c1 = {
      .user_id = f->alice, .op_id = "op-create-1", .list_id = f->lists[1], .title = "once", .index = 0};
  assert_int_equal(lith_do(f->db, kb_create_card, &c1), LITH_OK);
  assert_int_equal(c1.out.replayed, 0);
  int64_t bv = board_version(f, f->board);
  kb_action c2 = c1;
  memset(&c2.out, 0, sizeof c2.out);
  assert_int_equal(lith_do(f->db, kb_create_card, &c2), LITH_OK);
  assert_int_equal(c2.out.replayed, 1);
  assert_int_equal(c2.out.id, c1.out.id);
  assert_int_equal(c2.out.board_version, c1.out.board_version);
  assert_int_equal(c2.out.index, c1.out.index);
  assert_int_equal(board_version(f, f->board), bv);
  assert_int_equal(query_int("SELECT count(*) FROM cards WHERE title = 'once'"), 1);

  /* A move replayed: same outcome, one version bump, even though the
   * replay's seen_version is stale by then. */
  int ntopics = f->ntopics;
  kb_action m1 = {.user_id = f->alice,
                  .op_id = "op-move-1",
                  .card_id = c1.out.id,
                  .list_id = f->lists[2],
                  .index = KB_END,
                  .seen_version = 1};
  assert_int_equal(lith_do(f->db, kb_move_card, &m1), LITH_OK);
  assert_int_equal(m1.out.version, 2);
  assert_int_equal(f->ntopics, ntopics + 1);
  char *before = dump();
  kb_action m2 = m1;
  assert_int_equal(lith_do(f->db, kb_move_card, &m2), LITH_OK);
  assert_int_equal(m2.out.replayed, 1);
  assert_int_equal(m2.out.version, 2);
  assert_int_equal(m2.out.board_version, m1.out.board_version);
  assert_int_equal(m2.out.index, m1.out.index);
  assert_int_equal(m2.out.board_id, f->board);
  char *after = dump();
  assert_string_equal(before, after);
  assert_int_equal(card_version(f, c1.out.id), 2);
  assert_int_equal(f->ntopics, ntopics + 1); /* a replay touches nothing */

  /* The same op id for another action: refused, nothing changes. */
  kb_action e = {.user_id = f->alice, .op_id = "op-move-1", .card_id = c1.out.id, .title = "other"};
  assert_int_equal(lith_do(f->db, kb_edit_card, &e), KB_OP_CONFLICT);
  char *after2 = dump();
  assert_string_equal(before, after2);

  /* Op ids are per user: bob's "op-move-1" is his own. */
  kb_action m3 = {.user_id = f->bob,
                  .op_id = "op-move-1",
                  .card_id = c1.out.id,
                  .list_id = f->lists[0],
                  .index = 0,
                  .seen_version = 2};
  assert_int_equal(lith_do(f->db, kb_move_card, &m3), LITH_OK);
  assert_int_equal(m3.out.replayed, 0);
  assert_int_equal(m3.out.version, 3);

  /* The same op id with other content (another title, another target):
   * refused, never "replayed" with the new content dropped. */
  char *before3 = dump();
  kb_action c3 = c1;
  memset(&c3.out, 0, sizeof c3.out);
  c3.title = "twice";
  assert_int_equal(lith_do(f->db, kb_create_card, &c3), KB_OP_CONFLICT);
  kb_action m4 = m1;
  memset(&m4.out, 0, sizeof m4.out);
  m4.list_id = f->lists[0];
  assert_int_equal(lith_do(f->db, kb_move_card, &m4), KB_OP_CONFLICT);
  /* ... or through another board's URL */
  kb_action m5 = m1;
  memset(&m5.out, 0, sizeof m5.out);
  m5.board_id = f->board + 1000;
  assert_int_equal(lith_do(f->db, kb_move_card, &m5), KB_OP_CONFLICT);
  char *after3 = dump();
  assert_string_equal(before3, after3);
  free(before3);
  free(after3);

  /* A replay checks membership as the action would: alice, removed from the
   * board, cannot learn its outcome by replaying. */
  char sql[160];
  snprintf(sql, sizeof sql, "DELETE FROM members WHERE board_id = %lld AND user_id = %lld",
           (long long)f->board, (long long)f->alice);
  assert_int_equal(lith_do(f->db, lith_cmd_sql, sql), LITH_OK);
  kb_action m6 = m1;
  memset(&m6.out, 0, sizeof m6.out);
  assert_int_equal(lith_do(f->db, kb_move_card, &m6), KB_FORBIDDEN);
  assert_int_equal(m6.out.replayed, 0);
  snprintf(sql, sizeof sql, "INSERT INTO members(board_id, user_id, added_ms) VALUES (%lld, %lld, 0)",
           (long long)f->board, (long long)f->alice);
  assert_int_equal(lith_do(f->db, lith_cmd_sql, sql), LITH_OK);

  /* A failed action records nothing: a retry is evaluated afresh. */
  kb_action s1 = {.user_id = f->alice,
                  .op_id = "op-stale",
                  .card_id = c1.out.id,
                  .list_id = f->lists[1],
                  .index = 0,
                  .seen_version = 1};
  assert_int_equal(lith_do(f->db, kb_move_card, &s1), KB_STALE);
  s1.seen_version = 3;
  assert_int_equal(lith_do(f->db, kb_move_card, &s1), LITH_OK);
  assert_int_equal(s1.out.replayed, 0);
  free(before);
  free(after);
  free(after2);
}

/* ---- membership ------------------------------------------------------------- */

static void test_membership_enforced(void **state) {
  fx *f = *state;
  kb_board *b = load(f);
  int64_t card = find_list(b, f->lists[0])->cards[0].id;
  int64_t v = find_list(b, f->lists[0])->cards[0].version;
  kb_board_free(b);
  char *before = dump();
  int ntopics = f->ntopics;
  int64_t carol = f->carol;
  kb_action acts[] = {
      {.user_id = carol, .op_id = "c1", .board_id = f->board, .title = "mine now"},
      {.user_id = carol, .op_id = "c2", .board_id = f->board, .name = "carol"},
      {.user_id = carol, .op_id = "c3", .board_id = f->board, .title = "list"},
      {.user_id = carol, .op_id = "c4", .list_id = f->lists[0], .title = "renamed"},
      {.user_id = carol, .op_id = "c5", .list_id = f->lists[0], .archived = 1},
      {.user_id = carol, .op_id = "c6", .list_id = f->lists[0], .title = "card", .index = 0},
      {.user_id = carol, .op_id = "c7", .card_id = card, .title = "edited"},
      {.user_id = carol, .op_id = "c8", .card_id = card, .archived = 1},
      {.user_id = carol,
       .op_id = "c9",
       .card_id = card,
       .list_id = f->lists[1],
       .index = 0,
       .seen_version = v},
  };
  lith_command cmds[] = {kb_rename_board, kb_add_member, kb_create_list,  kb_rename_list, kb_archive_list,
                         kb_create_card,  kb_edit_card,  kb_archive_card, kb_move_card};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    int rc = lith_do(f->db, cmds[i], &acts[i]);
    if (rc != KB_FORBIDDEN)
      fail_msg("command %zu: %s (%s)", i, kb_errstr(rc), lith_errmsg(f->db));
  }
  char *after = dump();
  assert_string_equal(before, after);
  assert_int_equal(f->ntopics, ntopics);
  /* Reads too. */
  kb_board_query q = {.user_id = carol, .board_id = f->board};
  assert_int_equal(lith_read(f->db, kb_read_board, &q), KB_FORBIDDEN);
  assert_null(q.board);
  kb_board_version_query vq = {.user_id = carol, .board_id = f->board};
  assert_int_equal(lith_read(f->db, kb_read_board_version, &vq), KB_FORBIDDEN);
  kb_boards_query bq = {.user_id = carol};
  assert_int_equal(lith_read(f->db, kb_read_boards, &bq), LITH_OK);
  assert_int_equal(bq.n_boards, 0);
  q.board_id = 999999;
  assert_int_equal(lith_read(f->db, kb_read_board, &q), KB_NOT_FOUND);

  /* Once added by a member, carol may act; bob's boards list has it. */
  kb_action add = {.user_id = f->bob, .op_id = "b1", .board_id = f->board, .name = "carol"};
  assert_int_equal(lith_do(f->db, kb_add_member, &add), LITH_OK);
  assert_int_equal(add.out.id, carol);
  assert_int_equal(
      lith_do(f->db, kb_add_member, &(kb_action){.user_id = f->bob, .board_id = f->board, .name = "carol"}),
      KB_EXISTS);
  assert_int_equal(
      lith_do(f->db, kb_add_member, &(kb_action){.user_id = f->bob, .board_id = f->board, .name = "nobody"}),
      KB_NO_USER);
  assert_string_equal(lith_errmsg(f->db), "no user named nobody"); /* not "no board" */
  assert_string_equal(kb_errstr(KB_NO_USER), "KB_NO_USER");
  /* a missing board is still KB_NOT_FOUND, whoever is named */
  assert_int_equal(
      lith_do(f->db, kb_add_member, &(kb_action){.user_id = f->bob, .board_id = 999999, .name = "nobody"}),
      KB_NOT_FOUND);
  acts[8].op_id = "c10";
  assert_int_equal(lith_do(f->db, kb_move_card, &acts[8]), LITH_OK);
  assert_int_equal(lith_read(f->db, kb_read_boards, &bq), LITH_OK);
  assert_int_equal(bq.n_boards, 1);
  assert_int_equal(bq.boards[0].id, f->board);
  assert_string_equal(bq.boards[0].title, "Team");
  kb_boards_free(bq.boards, bq.n_boards);

  /* A member cannot move a card onto another board's list. */
  kb_action nb = {.user_id = f->alice, .title = "Elsewhere"};
  assert_int_equal(lith_do(f->db, kb_create_board, &nb), LITH_OK);
  int64_t far = new_list(f, nb.out.board_id, "far");
  assert_int_equal(move(f, f->alice, card, far, 0, v + 1, NULL), KB_BAD_INPUT);
  /* A list or card command naming a board finds only what is on it. */
  char *before2 = dump();
  kb_action wrong = {.user_id = f->alice, .board_id = nb.out.board_id, .card_id = card, .title = "scoped"};
  assert_int_equal(lith_do(f->db, kb_edit_card, &wrong), KB_NOT_FOUND);
  kb_action wrong2 = {
      .user_id = f->alice, .board_id = nb.out.board_id, .list_id = f->lists[0], .title = "scoped"};
  assert_int_equal(lith_do(f->db, kb_rename_list, &wrong2), KB_NOT_FOUND);
  kb_action wrong3 = {.user_id = f->alice, .board_id = f->board, .list_id = far, .title = "x"};
  assert_int_equal(lith_do(f->db, kb_create_card, &wrong3), KB_NOT_FOUND);
  kb_action wrong4 = {.user_id = f->carol,
                      .board_id = nb.out.board_id,
                      .card_id = card,
                      .list_id = far,
                      .seen_version = v + 1};
  assert_int_equal(lith_do(f->db, kb_move_card, &wrong4), KB_NOT_FOUND);
  char *after3 = dump();
  assert_string_equal(before2, after3);
  free(before2);
  free(after3);
  wrong.board_id = f->board;
  assert_int_equal(lith_do(f->db, kb_edit_card, &wrong), LITH_OK);
  /* And bob, not a member of that board, cannot even see its list. */
  assert_int_equal(
      lith_do(f->db, kb_create_card, &(kb_action){.user_id = f->bob, .list_id = far, .title = "x"}),
      KB_FORBIDDEN);
  free(before);
  free(after);
}

/* ---- archive, rename, edit ------------------------------------------------- */

static void test_archive_rename_edit(void **state) {
  fx *f = *state;
  int64_t list = new_list(f, f->board, "Misc");
  int64_t c[4];
  for (int i = 0; i < 4; i++)
    c[i] = new_card(f, list, "card", KB_END);
  int64_t bv = board_version(f, f->board);

  /* Rename the list, edit a card (title only, description only). */
  kb_action rl = {.user_id = f->bob, .list_id = list, .title = "Renamed"};
  assert_int_equal(lith_do(f->db, kb_rename_list, &rl), LITH_OK);
  kb_action e1 = {.user_id = f->bob, .card_id = c[1], .title = "New title"};
  assert_int_equal(lith_do(f->db, kb_edit_card, &e1), LITH_OK);
  assert_int_equal(e1.out.version, 1); /* an edit is not a move */
  kb_action e2 = {.user_id = f->bob, .card_id = c[1], .description = "line 1\nline 2\ttab"};
  assert_int_equal(lith_do(f->db, kb_edit_card, &e2), LITH_OK);
  kb_action rb = {.user_id = f->alice, .board_id = f->board, .title = "Team 2"};
  assert_int_equal(lith_do(f->db, kb_rename_board, &rb), LITH_OK);
  kb_board *b = load(f);
  assert_string_equal(b->title, "Team 2");
  assert_string_equal(find_list(b, list)->title, "Renamed");
  assert_string_equal(find_card(b, c[1])->title, "New title");
  assert_string_equal(find_card(b, c[1])->description, "line 1\nline 2\ttab");
  kb_board_free(b);

  /* Archive c[1]: gone from the default read, indexes skip it. */
  kb_action ac = {.user_id = f->alice, .card_id = c[1], .archived = 1};
  assert_int_equal(lith_do(f->db, kb_archive_card, &ac), LITH_OK);
  assert_int_equal(ac.out.version, 2);
  b = load(f);
  int64_t want1[] = {c[0], c[2], c[3]};
  assert_order(b, list, want1, 3);
  kb_board_free(b);
  b = load_as(f, f->alice, f->board, 1);
  assert_int_equal(find_list(b, list)->n_cards, 4);
  assert_true(find_card(b, c[1])->archived);
  kb_board_free(b);
  /* An archived card cannot move; index counts only live cards. */
  assert_int_equal(move(f, f->alice, c[1], list, 0, 2, NULL), KB_BAD_INPUT);
  assert_int_equal(move(f, f->alice, c[0], list, 3, 1, NULL), KB_BAD_INPUT);
  assert_int_equal(move(f, f->alice, c[0], list, 2, 1, NULL), LITH_OK);
  /* Restore: to the end. */
  ac.archived = 0;
  assert_int_equal(lith_do(f->db, kb_archive_card, &ac), LITH_OK);
  assert_int_equal(ac.out.version, 3);
  b = load(f);
  int64_t want2[] = {c[2], c[3], c[0], c[1]};
  assert_order(b, list, want2, 4);
  assert_consistent(b);
  kb_board_free(b);

  /* Archive the list: hidden, closed to new cards and moves; restore: last. */
  kb_action al = {.user_id = f->alice, .list_id = list, .archived = 1};
  assert_int_equal(lith_do(f->db, kb_archive_list, &al), LITH_OK);
  b = load(f);
  assert_null(find_list(b, list));
  assert_int_equal(b->n_lists, 3);
  kb_board_free(b);
  assert_int_equal(
      lith_do(f->db, kb_create_card, &(kb_action){.user_id = f->alice, .list_id = list, .title = "x"}),
      KB_BAD_INPUT);
  b = load(f);
  int64_t any = find_list(b, f->lists[0])->cards[0].id;
  int64_t anyv = find_list(b, f->lists[0])->cards[0].version;
  kb_board_free(b);
  assert_int_equal(move(f, f->alice, any, list, 0, anyv, NULL), KB_BAD_INPUT);
  al.archived = 0;
  assert_int_equal(lith_do(f->db, kb_archive_list, &al), LITH_OK);
  b = load(f);
  assert_int_equal(b->n_lists, 4);
  assert_int_equal(b->lists[3].id, list);
  assert_int_equal(b->lists[3].n_cards, 4);
  kb_board_free(b);
  /* 9 successful commands since bv. */
  assert_int_equal(board_version(f, f->board), bv + 9);
}

/* ---- bad input ---------------------------------------------------------------- */

static void test_bad_input(void **state) {
  fx *f = *state;
  char *before = dump();
  char big[KB_TITLE_MAX + 2];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  const char *bad_titles[] = {NULL,
                              "",
                              "   ",
                              big,
                              "a\x01"
                              "b",
                              "\xC3\x28",
                              "\xED\xA0\x80"};
  for (size_t i = 0; i < sizeof bad_titles / sizeof bad_titles[0]; i++) {
    kb_action a = {.user_id = f->alice, .list_id = f->lists[0], .title = bad_titles[i]};
    assert_int_equal(lith_do(f->db, kb_create_card, &a), KB_BAD_INPUT);
    kb_action l = {.user_id = f->alice, .board_id = f->board, .title = bad_titles[i]};
    assert_int_equal(lith_do(f->db, kb_create_list, &l), KB_BAD_INPUT);
  }
  kb_action ok = {.user_id = f->alice, .list_id = f->lists[0], .title = "Grüße ✓ 𝄞", .index = KB_END};
  big[KB_TITLE_MAX] = '\0';
  kb_action ok2 = {.user_id = f->alice, .list_id = f->lists[0], .title = big, .index = KB_END};
  kb_board *b = load(f);
  int n = find_list(b, f->lists[0])->n_cards;
  int64_t card = find_list(b, f->lists[0])->cards[0].id;
  kb_board_free(b);
  assert_int_equal(
      lith_do(f->db, kb_create_card,
              &(kb_action){.user_id = f->alice, .list_id = f->lists[0], .title = "t", .index = n + 1}),
      KB_BAD_INPUT);
  assert_int_equal(
      lith_do(f->db, kb_create_card,
              &(kb_action){.user_id = f->alice, .list_id = f->lists[0], .title = "t", .index = -2}),
      KB_BAD_INPUT);
  assert_int_equal(move(f, f->alice, card, f->lists[1], 999, 1, NULL), KB_BAD_INPUT);
  assert_int_equal(move(f, f->alice, card, f->lists[1], -5, 1, NULL), KB_BAD_INPUT);
  assert_int_equal(move(f, f->alice, 424242, f->lists[1], 0, 1, NULL), KB_NOT_FOUND);
  assert_int_equal(move(f, f->alice, card, 424242, 0, 1, NULL), KB_NOT_FOUND);
  assert_int_equal(lith_do(f->db, kb_edit_card, &(kb_action){.user_id = f->alice, .card_id = card}),
                   KB_BAD_INPUT);
  char desc[KB_DESC_MAX + 2];
  memset(desc, 'd', sizeof desc - 1);
  desc[sizeof desc - 1] = '\0';
  assert_int_equal(
      lith_do(f->db, kb_edit_card, &(kb_action){.user_id = f->alice, .card_id = card, .description = desc}),
      KB_BAD_INPUT);
  char op[KB_OP_ID_MAX + 2];
  memset(op, 'o', sizeof op - 1);
  op[sizeof op - 1] = '\0';
  assert_int_equal(lith_do(f->db, kb_edit_card,
                           &(kb_action){.user_id = f->alice, .op_id = op, .card_id = card, .title = "t"}),
                   KB_BAD_INPUT);
  assert_int_equal(
      lith_do(f->db, kb_edit_card,
              &(kb_action){.user_id = f->alice, .op_id = "has space", .card_id = card, .title = "t"}),
      KB_BAD_INPUT);
  assert_int_equal(
      lith_do(f->db, kb_archive_card, &(kb_action){.user_id = f->alice, .card_id = card, .archived = 2}),
      KB_BAD_INPUT);
  char *after = dump();
  assert_string_equal(before, after);
  assert_int_equal(lith_do(f->db, kb_create_card, &ok), LITH_OK);
  assert_int_equal(lith_do(f->db, kb_create_card, &ok2), LITH_OK);
  b = load(f);
  assert_string_equal(find_card(b, ok.out.id)->title, "Grüße ✓ 𝄞");
  kb_board_free(b);
  assert_string_equal(kb_errstr(KB_STALE), "KB_STALE");
  assert_string_equal(kb_errstr(LITH_BUSY), lith_errstr(LITH_BUSY));
  free(before);
  free(after);
}

/* ---- versions and on_commit ------------------------------------------------- */

static void test_board_version_and_on_commit(void **state) {
  fx *f = *state;
  kb_action nb = {.user_id = f->bob, .title = "Second"};
  assert_int_equal(lith_do(f->db, kb_create_board, &nb), LITH_OK);
  assert_int_equal(nb.out.board_version, 1);
  int64_t b2 = nb.out.board_id;
  pthread_mutex_lock(&f->mu);
  f->ntopics = 0;
  pthread_mutex_unlock(&f->mu);

  int64_t v0 = board_version(f, f->board);
  int64_t card = new_card(f, f->lists[0], "v", 0);
  assert_int_equal(board_version(f, f->board), v0 + 1);
  kb_result out;
  assert_int_equal(move(f, f->alice, card, f->lists[1], 0, 1, &out), LITH_OK);
  assert_int_equal(out.board_version, v0 + 2);
  assert_int_equal(board_version(f, f->board), v0 + 2);
  assert_int_equal(move(f, f->alice, card, f->lists[1], 0, 1, NULL), KB_STALE);
  assert_int_equal(board_version(f, f->board), v0 + 2);
  /* The other board's version is its own. */
  kb_action l = {.user_id = f->bob, .board_id = b2, .title = "x"};
  assert_int_equal(lith_do(f->db, kb_create_list, &l), LITH_OK);
  assert_int_equal(l.out.board_version, 2);
  assert_int_equal(board_version(f, f->board), v0 + 2);
  /* User and session commands touch no board. */
  kb_session_args s = {.user_id = f->alice, .token_hash = "abc123", .expires_ms = kb_now_ms() + 60000};
  assert_int_equal(lith_do(f->db, kb_create_session, &s), LITH_OK);

  pthread_mutex_lock(&f->mu);
  assert_int_equal(f->ntopics, 3);
  assert_int_equal(f->topics[0], f->board);
  assert_int_equal(f->topics[1], f->board);
  assert_int_equal(f->topics[2], b2);
  pthread_mutex_unlock(&f->mu);
}

/* ---- users and sessions ------------------------------------------------------- */

static void test_users_and_sessions(void **state) {
  fx *f = *state;
  kb_user_args dup = {.name = "alice", .pw_hash = "h"};
  assert_int_equal(lith_do(f->db, kb_create_user, &dup), KB_EXISTS);
  kb_user_args bad = {.name = "no spaces", .pw_hash = "h"};
  assert_int_equal(lith_do(f->db, kb_create_user, &bad), KB_BAD_INPUT);
  bad.name = "ok";
  bad.pw_hash = "";
  assert_int_equal(lith_do(f->db, kb_create_user, &bad), KB_BAD_INPUT);

  kb_user_query uq = {.name = "bob"};
  assert_int_equal(lith_read(f->db, kb_read_user, &uq), LITH_OK);
  assert_int_equal(uq.user_id, f->bob);
  assert_string_equal(uq.pw_hash, "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA");
  uq.name = "nobody";
  assert_int_equal(lith_read(f->db, kb_read_user, &uq), KB_NOT_FOUND);

  int64_t now = kb_now_ms();
  kb_session_args s1 = {.user_id = f->bob, .token_hash = "t-live", .expires_ms = now + 3600000};
  kb_session_args s2 = {.user_id = f->bob, .token_hash = "t-old", .expires_ms = now - 1};
  assert_int_equal(lith_do(f->db, kb_create_session, &s1), LITH_OK);
  assert_int_equal(lith_do(f->db, kb_create_session, &s2), LITH_OK);
  assert_int_equal(lith_do(f->db, kb_create_session, &s1), KB_EXISTS);
  kb_session_args s3 = {.user_id = 777, .token_hash = "t-x", .expires_ms = now + 1000};
  assert_int_equal(lith_do(f->db, kb_create_session, &s3), KB_NOT_FOUND);

  kb_session_query sq = {.token_hash = "t-live"};
  assert_int_equal(lith_read(f->db, kb_read_session, &sq), LITH_OK);
  assert_int_equal(sq.user_id, f->bob);
  assert_int_equal(sq.expires_ms, now + 3600000);
  assert_string_equal(sq.name, "bob");
  sq.token_hash = "t-old";
  assert_int_equal(lith_read(f->db, kb_read_session, &sq), KB_NOT_FOUND);
  assert_int_equal(sq.user_id, 0);
  sq.token_hash = "t-none";
  assert_int_equal(lith_read(f->db, kb_read_session, &sq), KB_NOT_FOUND);

  /* Prune: the expired session and ops older than the cutoff go. */
  kb_action op = {.user_id = f->alice, .op_id = "old-op", .board_id = f->board, .title = "T"};
  assert_int_equal(lith_do(f->db, kb_rename_board, &op), LITH_OK);
  kb_prune_args p = {.ops_before_ms = kb_now_ms() + 1};
  assert_int_equal(lith_do(f->db, kb_prune, &p), LITH_OK);
  assert_int_equal(p.sessions, 1);
  assert_int_equal(p.ops, 1);
  assert_int_equal(query_int("SELECT count(*) FROM sessions"), 1);

  kb_session_args out = {.token_hash = "t-live"};
  assert_int_equal(lith_do(f->db, kb_delete_session, &out), LITH_OK);
  sq.token_hash = "t-live";
  assert_int_equal(lith_read(f->db, kb_read_session, &sq), KB_NOT_FOUND);
  assert_int_equal(lith_do(f->db, kb_delete_session, &out), LITH_OK);
}

/* ---- the same code on a plain connection -------------------------------------- */

static void test_plain_connection(void **state) {
  fx *f = *state;
  kb_board *b = load(f);
  int64_t card = find_list(b, f->lists[0])->cards[0].id;
  kb_board_free(b);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(DB, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  kb_plain *p;
  assert_int_equal(kb_plain_open(db, &p), LITH_OK);
  assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  kb_action a = {.user_id = f->alice,
                 .op_id = "plain-1",
                 .card_id = card,
                 .list_id = f->lists[2],
                 .index = 0,
                 .seen_version = 1};
  assert_int_equal(kb_plain_run(p, kb_move_card, &a), LITH_OK);
  assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(a.out.version, 2);
  kb_action stale = a;
  stale.op_id = "plain-2";
  assert_int_equal(kb_plain_run(p, kb_move_card, &stale), KB_STALE);
  assert_non_null(strstr(kb_plain_errmsg(p), "moved meanwhile"));
  assert_int_equal(kb_plain_run(p, lith_cmd_sql, &a), LITH_MISUSE);
  kb_plain_close(p);
  sqlite3_close(db);
  b = load(f);
  assert_int_equal(find_list(b, f->lists[2])->cards[0].id, card);
  assert_int_equal(find_card(b, card)->version, 2);
  kb_board_free(b);
}

/* ---- many producers ------------------------------------------------------------- */

typedef struct mover {
  fx *f;
  int64_t user;
  int64_t lists[2];
  int64_t cards[4];
  int64_t version[4];
  int at[4]; /* 0 or 1: which of the two lists */
  int n;
  int ok, bad;
  unsigned seed;
} mover;

static void *mover_main(void *arg) {
  mover *m = arg;
  for (int i = 0; i < m->n; i++) {
    int k = (int)(rnd(&m->seed) % 4);
    int to = 1 - m->at[k];
    char op[40];
    snprintf(op, sizeof op, "u%lld-%d", (long long)m->user, i);
    kb_action a = {.user_id = m->user,
                   .op_id = op,
                   .card_id = m->cards[k],
                   .list_id = m->lists[to],
                   .index = (int64_t)(rnd(&m->seed) % 3),
                   .seen_version = m->version[k]};
    /* Index among the target's other cards: at most the number there. */
    int there = 0;
    for (int j = 0; j < 4; j++)
      there += m->at[j] == to;
    if (a.index > there)
      a.index = there;
    int rc = lith_do(m->f->db, kb_move_card, &a);
    if (rc == LITH_OK && a.out.version == m->version[k] + 1) {
      m->ok++;
      m->version[k] = a.out.version;
      m->at[k] = to;
    } else {
      m->bad++;
    }
  }
  return NULL;
}

static void test_many_movers(void **state) {
  fx *f = *state;
  enum { P = 16 };
  static mover ms[P];
  pthread_t th[P];
  kb_action nb = {.user_id = f->alice, .title = "Crowd"};
  assert_int_equal(lith_do(f->db, kb_create_board, &nb), LITH_OK);
  int64_t board = nb.out.board_id;
  int commands = 1;
  for (int p = 0; p < P; p++) {
    char name[16];
    snprintf(name, sizeof name, "mover%d", p);
    mover *m = &ms[p];
    memset(m, 0, sizeof *m);
    m->f = f;
    m->user = make_user(f->db, name);
    kb_action add = {.user_id = f->alice, .board_id = board, .name = name};
    assert_int_equal(lith_do(f->db, kb_add_member, &add), LITH_OK);
    for (int l = 0; l < 2; l++)
      m->lists[l] = new_list(f, board, "own");
    for (int k = 0; k < 4; k++) {
      m->cards[k] = new_card(f, m->lists[0], "c", KB_END);
      m->version[k] = 1;
    }
    commands += 1 + 2 + 4;
    m->n = scaled(300);
    m->seed = (unsigned)p * 7919u + 1;
  }
  for (int p = 0; p < P; p++)
    assert_int_equal(pthread_create(&th[p], NULL, mover_main, &ms[p]), 0);
  int ok = 0;
  for (int p = 0; p < P; p++) {
    pthread_join(th[p], NULL);
    assert_int_equal(ms[p].bad, 0);
    ok += ms[p].ok;
  }
  kb_board *b = load_as(f, f->alice, board, 0);
  assert_consistent(b);
  for (int p = 0; p < P; p++)
    for (int k = 0; k < 4; k++) {
      const kb_card *c = find_card(b, ms[p].cards[k]);
      assert_non_null(c);
      assert_int_equal(c->list_id, ms[p].lists[ms[p].at[k]]);
      assert_int_equal(c->version, ms[p].version[k]);
    }
  assert_int_equal(b->version, commands + ok);
  kb_board_free(b);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM ops WHERE op_id LIKE 'u%%'");
  assert_int_equal(query_int(sql), ok);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_moves_keep_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gap_exhausted_renumbers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_move_to_same_place_keeps_position, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stale_move_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replayed_op_applied_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_membership_enforced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_archive_rename_edit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_board_version_and_on_commit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_users_and_sessions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plain_connection, setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_movers, setup, teardown),
  };
  return cmocka_run_group_tests_name("examples/kanban/board", tests, NULL, NULL);
}
