/*
 * libFuzzer harness: the kanban model (board.c, board_read.c) applying
 * sequences of actions against a real lith database, then the board read
 * back and rendered (web_page.c) as the server would send it.
 *
 * Per input: one lith command empties the tables, creates alice, bob and
 * carol (ids 1-3), and runs each decoded action in a savepoint of its own
 * (lith_tx_savepoint: as if each were its own command, a failed one undoes
 * itself); it commits, and one lith_read loads every board as a member.
 * Emptying tables makes ids start at 1 again, so a run does not depend on
 * the inputs before it. The database is a file in /dev/shm (WAL needs a
 * file), made at start and removed at exit (or by the next run).
 *
 * Input: actions, each an opcode byte and its operands (see decode): small
 * numbers for users, boards, lists, cards, indexes and versions, so that
 * they name rows that exist; op ids from a set of 16, so that replays and
 * conflicts happen; texts as a length byte and bytes (0xff: none; 0xfc,
 * 0xfd, 0xfe: the next byte 200, 201 or 10001 times, around the limits).
 *
 * Besides board actions: users, sessions (create, delete; pruned when
 * expired) and demo boards (kb_seed_demo).
 *
 * Oracles, besides the sanitizers:
 *   - every action ends in LITH_OK or one of the model's refusals (KB_*),
 *     never an SQLite error (a constraint the model failed to check);
 *   - a session's creation and deletion end exactly as predicted (bad
 *     token hash, no such user, exists already), and reading it back at
 *     a fixed time finds the live, unexpired ones with their user;
 *   - a board's version grows by exactly one per applied action (1 after
 *     its creation), as the database and out.board_version both say;
 *   - a card placed (created, moved, restored) is at out.index among its
 *     list's live cards, which never share a position;
 *   - the same op id again from the same user with the same content is a
 *     replay with the first outcome; with other content it is refused;
 *   - what kb_read_board (and _version, kb_read_boards, kb_read_user)
 *     returns agrees with the versions and users, and the board renders:
 *     web_board_json parses back, and no text adds a '<' to the page
 *     (check.h).
 */
#include <dirent.h>
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "board.h"
#include "check.h"
#include "lith.h"
#include "web_page.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ACTIONS 48
#define MAX_BOARDS 64
#define N_USERS 3
#define PW_HASH "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA"

enum {
  A_CREATE_USER,
  A_CREATE_BOARD,
  A_RENAME_BOARD,
  A_ADD_MEMBER,
  A_CREATE_LIST,
  A_RENAME_LIST,
  A_ARCHIVE_LIST,
  A_CREATE_CARD,
  A_EDIT_CARD,
  A_ARCHIVE_CARD,
  A_MOVE_CARD,
  A_PRUNE,
  A_CREATE_SESSION,
  A_DELETE_SESSION,
  A_SEED,
  N_KINDS
};

static const lith_command COMMANDS[N_KINDS] = {NULL,
                                               kb_create_board,
                                               kb_rename_board,
                                               kb_add_member,
                                               kb_create_list,
                                               kb_rename_list,
                                               kb_archive_list,
                                               kb_create_card,
                                               kb_edit_card,
                                               kb_archive_card,
                                               kb_move_card,
                                               NULL,
                                               NULL,
                                               NULL,
                                               NULL};

/* One decoded action: its inputs (texts malloc'd) and what it gave. */
typedef struct action {
  int kind;
  int op; /* 0: no op id, else "opN" */
  char op_id[8];
  char *texts[3]; /* title, description, name: owned */
  kb_action a;    /* inputs; out after the run */
  int rc;
  int was_archived;      /* A_ARCHIVE_CARD: the card was archived before */
  int64_t expires;       /* A_CREATE_SESSION */
  int64_t seed_users[4]; /* A_SEED */
  int n_seed;
} action;

/* A session the actions created, as the harness expects it to be. */
typedef struct session {
  const char *token_hash;
  int64_t user_id, expires_ms;
  int live; /* not deleted or pruned since */
} session;

typedef struct run {
  action acts[MAX_ACTIONS];
  int n;
  int64_t version[MAX_BOARDS + 1]; /* each board's version, as the actions say */
  int64_t n_boards;
  int ops_pruned;  /* op records before this action index are gone */
  int64_t n_users; /* users 1..n_users exist */
  const char *user_name[N_USERS + MAX_ACTIONS + 1];
  session sessions[MAX_ACTIONS];
  int n_sessions;
} run;

static lith *db;
static sem_t done; /* posted when a submitted run is over */
static char dir[64], path[96];

/* Remove dir `d`'s database files and d itself. */
static void remove_db_dir(const char *d) {
  static const char *const files[] = {"board.db", "board.db-wal", "board.db-shm"};
  char p[128];
  size_t i;
  for (i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", d, files[i]);
    unlink(p);
  }
  rmdir(d);
}

static void cleanup(void) {
  if (db != NULL)
    lith_close(db);
  db = NULL;
  remove_db_dir(dir);
}

/* libFuzzer leaves with _Exit after a crash or a time limit, so the
 * database dir of a run is often left behind: each dir is named by its
 * process, and a run removes those whose process is gone. */
static void remove_stale(const char *parent) {
  DIR *d = opendir(parent);
  struct dirent *e;
  if (d == NULL)
    return;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long pid;
    char p[128];
    if (strncmp(e->d_name, "kanban-fuzz-", 12) != 0)
      continue;
    pid = strtol(e->d_name + 12, &end, 10);
    if (*end != '\0' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
    remove_db_dir(p);
  }
  closedir(d);
}

/* A smaller quarantine than ASan's 256 MB: SQLite allocates and frees
 * thousands of blocks per input, and cycling through 256 MB of fresh pages
 * made page faults a third of the time. Freed memory still waits 16 MB of
 * allocations before reuse. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "quarantine_size_mb=16"; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *parent = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  lith_options opt;
  (void)argc;
  (void)argv;
  remove_stale(parent);
  snprintf(dir, sizeof dir, "%s/kanban-fuzz-%ld", parent, (long)getpid());
  snprintf(path, sizeof path, "%s/board.db", dir);
  remove_db_dir(dir); /* an earlier process's, with our pid */
  if (mkdir(dir, 0700) != 0)
    abort();
  lith_options_default(&opt);
  kb_options_schema(&opt);
  opt.readers = 1;
  if (sem_init(&done, 0, 0) != 0 || lith_open(path, &opt, &db) != LITH_OK)
    abort();
  atexit(cleanup);
  return 0;
}

/* ---- Decoding ------------------------------------------------------------------ */

typedef struct reader {
  const uint8_t *p, *end;
} reader;

static int byte(reader *r) { return r->p < r->end ? *r->p++ : 0; }

static char *text(reader *r) {
  int len = byte(r);
  size_t n;
  char *s;
  if (len == 0xff)
    return NULL;
  if (len >= 0xfc) { /* the next byte, repeated up to or past a limit */
    int c = byte(r);
    n = len == 0xfc ? KB_TITLE_MAX : len == 0xfd ? KB_TITLE_MAX + 1 : KB_DESC_MAX + 1;
    s = malloc(n + 1);
    if (s == NULL)
      abort();
    memset(s, c == 0 ? 'a' : c, n);
  } else {
    n = (size_t)len;
    if (n > (size_t)(r->end - r->p))
      n = (size_t)(r->end - r->p);
    s = malloc(n + 1);
    if (s == NULL)
      abort();
    memcpy(s, r->p, n);
    r->p += n;
    n = strnlen(s, n); /* a C string ends at a NUL: as a parsed body would */
  }
  s[n] = '\0';
  return s;
}

static int64_t user(reader *r) {
  int u = byte(r) % (N_USERS + 1);
  return u < N_USERS ? u + 1 : 42; /* 42: nobody */
}

static int64_t small_id(reader *r, int mod) { return byte(r) % mod; }

static int64_t index_of(reader *r) {
  int b = byte(r);
  return b == 0xff ? KB_END : b == 0xfe ? -5 : b % 12;
}

static void decode(run *rn, const uint8_t *data, size_t size) {
  reader r = {data, data + size};
  while (r.p < r.end && rn->n < MAX_ACTIONS) {
    action *x = &rn->acts[rn->n++];
    kb_action *a = &x->a;
    memset(x, 0, sizeof *x);
    x->kind = byte(&r) % N_KINDS;
    switch (x->kind) {
    case A_CREATE_USER: x->texts[2] = text(&r); continue;
    case A_PRUNE: continue;
    case A_CREATE_SESSION:
      a->user_id = user(&r);
      x->expires = byte(&r) % 4 * 1000; /* read at 1500: half are expired */
      x->texts[0] = text(&r);
      continue;
    case A_DELETE_SESSION: x->texts[0] = text(&r); continue;
    case A_SEED:
      x->n_seed = 1 + byte(&r) % 4;
      for (int k = 0; k < x->n_seed; k++)
        x->seed_users[k] = user(&r);
      x->texts[0] = text(&r);
      continue;
    default: break;
    }
    a->user_id = user(&r);
    x->op = byte(&r) % 17;
    if (x->op > 0) {
      snprintf(x->op_id, sizeof x->op_id, "op%d", x->op);
      a->op_id = x->op_id;
    }
    if (x->kind != A_CREATE_BOARD)
      a->board_id = small_id(&r, 6);
    switch (x->kind) {
    case A_CREATE_BOARD:
    case A_RENAME_BOARD:
    case A_CREATE_LIST: x->texts[0] = text(&r); break;
    case A_ADD_MEMBER: x->texts[2] = text(&r); break;
    case A_RENAME_LIST:
      a->list_id = small_id(&r, 16);
      x->texts[0] = text(&r);
      break;
    case A_ARCHIVE_LIST:
      a->list_id = small_id(&r, 16);
      a->archived = byte(&r) % 3;
      break;
    case A_CREATE_CARD:
      a->list_id = small_id(&r, 16);
      a->index = index_of(&r);
      x->texts[0] = text(&r);
      x->texts[1] = text(&r);
      break;
    case A_EDIT_CARD:
      a->card_id = small_id(&r, 24);
      x->texts[0] = text(&r);
      x->texts[1] = text(&r);
      break;
    case A_ARCHIVE_CARD:
      a->card_id = small_id(&r, 24);
      a->archived = byte(&r) % 3;
      break;
    default: /* A_MOVE_CARD */
      a->card_id = small_id(&r, 24);
      a->list_id = small_id(&r, 16);
      a->index = index_of(&r);
      a->seen_version = small_id(&r, 8);
      break;
    }
    a->title = x->texts[0];
    a->description = x->texts[1];
    a->name = x->texts[2];
  }
}

static void free_run(run *rn) {
  int i, k;
  for (i = 0; i < rn->n; i++)
    for (k = 0; k < 3; k++)
      free(rn->acts[i].texts[k]);
}

/* ---- The command: every action, each checked -------------------------------- */

static int str_eq(const char *a, const char *b) {
  return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* Same kind and inputs (the op id and user aside): what op_fp covers. */
static int same_content(const action *x, const action *y) {
  const kb_action *a = &x->a, *b = &y->a;
  return x->kind == y->kind && a->board_id == b->board_id && a->list_id == b->list_id &&
         a->card_id == b->card_id && a->index == b->index && a->seen_version == b->seen_version &&
         a->archived == b->archived && str_eq(a->title, b->title) && str_eq(a->description, b->description) &&
         str_eq(a->name, b->name);
}

/* The first earlier action of this user and op id that was applied (and not
 * pruned since), or NULL. */
static const action *recorded(const run *rn, int i) {
  const action *x = &rn->acts[i];
  int k;
  if (x->op == 0)
    return NULL;
  for (k = rn->ops_pruned; k < i; k++) {
    const action *y = &rn->acts[k];
    if (y->op == x->op && y->a.user_id == x->a.user_id && y->rc == LITH_OK && !y->a.out.replayed &&
        COMMANDS[y->kind] != NULL)
      return y;
  }
  return NULL;
}

static int64_t one_int(lith_tx *tx, const char *sql, int64_t a1) {
  int64_t v = -1;
  if (lith_tx_int64(tx, &v, sql, "I", a1) != LITH_OK)
    abort();
  return v;
}

/* A placed card: at out.index among its list's live cards, no two of which
 * share a position; at the index asked for if `asked` (a restore asks for
 * none: the end). */
static void check_place(lith_tx *tx, const kb_action *a, int asked) {
  int64_t rank = one_int(tx,
                         "SELECT count(*) FROM cards c, cards me WHERE me.id = ?1 AND"
                         " c.list_id = me.list_id AND c.archived = 0 AND c.id <> me.id AND"
                         " (c.pos < me.pos OR (c.pos = me.pos AND c.id < me.id))",
                         a->out.id);
  int64_t dups = one_int(tx,
                         "SELECT count(*) FROM (SELECT pos FROM cards WHERE archived = 0 AND"
                         " list_id = (SELECT list_id FROM cards WHERE id = ?1)"
                         " GROUP BY pos HAVING count(*) > 1)",
                         a->out.id);
  if (rank != a->out.index || dups != 0)
    abort();
  if (asked && a->index != KB_END && a->out.index != a->index)
    abort();
  if (one_int(tx, "SELECT version FROM cards WHERE id = ?1", a->out.id) != a->out.version)
    abort();
}

static void check_action(run *rn, int i, lith_tx *tx) {
  action *x = &rn->acts[i];
  const kb_action *a = &x->a;
  const action *first = recorded(rn, i);
  int rc = x->rc;

  if (rc != LITH_OK && rc != KB_NOT_FOUND && rc != KB_FORBIDDEN && rc != KB_STALE && rc != KB_BAD_INPUT &&
      rc != KB_EXISTS && rc != KB_OP_CONFLICT && rc != KB_NO_USER) {
    fprintf(stderr, "action %d (kind %d): %s\n", i, x->kind, kb_errstr(rc));
    abort();
  }
  if (first != NULL && same_content(first, x)) { /* must be a replay of the first */
    if (rc != LITH_OK || !a->out.replayed || a->out.id != first->a.out.id ||
        a->out.board_id != first->a.out.board_id || a->out.board_version != first->a.out.board_version ||
        a->out.version != first->a.out.version || a->out.index != first->a.out.index)
      abort();
    return;
  }
  if (first != NULL && rc != KB_OP_CONFLICT && rc != KB_BAD_INPUT)
    abort(); /* reused id */
  if (rc != LITH_OK)
    return;
  if (a->out.replayed)
    abort(); /* a replay of nothing recorded */

  /* Applied: the board's version went up by one. */
  if (a->out.board_id < 1 || a->out.board_id > MAX_BOARDS)
    abort();
  if (x->kind == A_CREATE_BOARD) {
    if (a->out.board_id != ++rn->n_boards || a->out.board_version != 1)
      abort();
  } else if (a->out.board_version != rn->version[a->out.board_id] + 1) {
    abort();
  }
  rn->version[a->out.board_id] = a->out.board_version;
  if (one_int(tx, "SELECT version FROM boards WHERE id = ?1", a->out.board_id) != a->out.board_version)
    abort();
  /* out.index is promised for creates and moves; a restore places the
   * card the same way (at the end). */
  if (x->kind == A_CREATE_CARD || x->kind == A_MOVE_CARD)
    check_place(tx, a, 1);
  else if (x->kind == A_ARCHIVE_CARD && a->archived == 0 && x->was_archived)
    check_place(tx, a, 0);
}

/* 1..KB_HASH_MAX bytes of printable ASCII without spaces (board.c's
 * check_token, restated). */
static int token_ok(const char *s) {
  size_t n = s != NULL ? strlen(s) : 0, i;
  if (n == 0 || n > KB_HASH_MAX)
    return 0;
  for (i = 0; i < n; i++)
    if (s[i] < 0x21 || s[i] > 0x7e)
      return 0;
  return 1;
}

static session *live_session(run *rn, const char *token_hash) {
  int k;
  for (k = 0; k < rn->n_sessions; k++)
    if (rn->sessions[k].live && strcmp(rn->sessions[k].token_hash, token_hash) == 0)
      return &rn->sessions[k];
  return NULL;
}

/* Create or delete a session: the outcome is fully predictable. */
static void session_action(run *rn, action *x, lith_tx *tx) {
  const char *t = x->texts[0];
  int valid = token_ok(t), want;
  kb_session_args sa = {.user_id = x->a.user_id, .token_hash = t, .expires_ms = x->expires};
  if (x->kind == A_DELETE_SESSION) {
    x->rc = lith_tx_savepoint(tx, kb_delete_session, &sa);
    if (x->rc != (valid ? LITH_OK : KB_BAD_INPUT))
      abort();
    for (session *s; valid && (s = live_session(rn, t)) != NULL;)
      s->live = 0;
    return;
  }
  want = !valid                                           ? KB_BAD_INPUT
         : x->a.user_id < 1 || x->a.user_id > rn->n_users ? KB_NOT_FOUND
         : live_session(rn, t) != NULL                    ? KB_EXISTS
                                                          : LITH_OK;
  x->rc = lith_tx_savepoint(tx, kb_create_session, &sa);
  if (x->rc != want)
    abort();
  if (x->rc == LITH_OK) {
    session *s = &rn->sessions[rn->n_sessions++];
    s->token_hash = t;
    s->user_id = x->a.user_id;
    s->expires_ms = x->expires;
    s->live = 1;
  }
}

static int run_actions(lith_tx *tx, void *arg) {
  static const char *const names[N_USERS] = {"alice", "bob", "carol"};
  static const char *const empty[] = {"DELETE FROM ops",   "DELETE FROM sessions", "DELETE FROM cards",
                                      "DELETE FROM lists", "DELETE FROM members",  "DELETE FROM boards",
                                      "DELETE FROM users"};
  run *rn = arg;
  int i;

  /* lith may run a command again: start from scratch each time */
  rn->n_boards = 0;
  rn->ops_pruned = 0;
  rn->n_sessions = 0;
  rn->n_users = N_USERS;
  memset(rn->version, 0, sizeof rn->version);
  for (i = 0; i < (int)(sizeof empty / sizeof empty[0]); i++) /* cached: no parse per input */
    if (lith_tx_exec(tx, empty[i], "") != LITH_OK)
      abort();
  for (i = 0; i < N_USERS; i++) {
    kb_user_args u = {.name = names[i], .pw_hash = PW_HASH};
    if (kb_create_user(tx, &u) != LITH_OK || u.user_id != i + 1)
      abort();
    rn->user_name[i + 1] = names[i];
  }
  for (i = 0; i < rn->n; i++) {
    action *x = &rn->acts[i];
    if (x->kind == A_CREATE_USER) {
      kb_user_args u = {.name = x->texts[2], .pw_hash = PW_HASH};
      x->rc = lith_tx_savepoint(tx, kb_create_user, &u);
      if (x->rc != LITH_OK && x->rc != KB_BAD_INPUT && x->rc != KB_EXISTS)
        abort();
      if (x->rc == LITH_OK) {
        if (u.user_id != ++rn->n_users)
          abort();
        rn->user_name[u.user_id] = x->texts[2];
      }
    } else if (x->kind == A_PRUNE) {
      kb_prune_args p = {.now_ms = 1, .ops_before_ms = INT64_MAX};
      int64_t gone = 0;
      int k;
      x->rc = lith_tx_savepoint(tx, kb_prune, &p);
      if (x->rc != LITH_OK)
        abort();
      rn->ops_pruned = i + 1;
      for (k = 0; k < rn->n_sessions; k++) /* expired at 1: those made to expire at 0 */
        if (rn->sessions[k].live && rn->sessions[k].expires_ms <= 1) {
          rn->sessions[k].live = 0;
          gone++;
        }
      if (p.sessions != gone)
        abort();
    } else if (x->kind == A_CREATE_SESSION || x->kind == A_DELETE_SESSION) {
      session_action(rn, x, tx);
    } else if (x->kind == A_SEED) {
      kb_seed_args sd = {.user_ids = x->seed_users, .n_users = x->n_seed, .title = x->texts[0]};
      x->rc = lith_tx_savepoint(tx, kb_seed_demo, &sd);
      if (x->rc != LITH_OK && x->rc != KB_NOT_FOUND && x->rc != KB_EXISTS && x->rc != KB_BAD_INPUT)
        abort();
      if (x->rc == LITH_OK) { /* a board, 3 lists and 6 cards: version 10 */
        if (sd.board_id != ++rn->n_boards || sd.board_id > MAX_BOARDS)
          abort();
        rn->version[sd.board_id] = one_int(tx, "SELECT version FROM boards WHERE id = ?1", sd.board_id);
        if (rn->version[sd.board_id] != 10)
          abort();
      }
    } else {
      if (x->kind == A_ARCHIVE_CARD)
        x->was_archived =
            one_int(tx, "SELECT coalesce(max(archived), 0) FROM cards WHERE id = ?1", x->a.card_id) == 1;
      x->rc = lith_tx_savepoint(tx, COMMANDS[x->kind], &x->a);
      check_action(rn, i, tx);
    }
  }
  return LITH_OK;
}

/* ---- The read and the pages --------------------------------------------------- */

/* b with every text as "x" (descriptions kept empty when empty: a card's
 * badge depends on it); the arrays are copies, the strings static. */
static kb_board *plain_copy(const kb_board *b) {
  kb_board *c = malloc(sizeof *c);
  int i, j;
  if (c == NULL)
    abort();
  *c = *b;
  c->title = (char *)"x";
  c->members = calloc((size_t)b->n_members + 1, sizeof *c->members);
  c->lists = calloc((size_t)b->n_lists + 1, sizeof *c->lists);
  if (c->members == NULL || c->lists == NULL)
    abort();
  for (i = 0; i < b->n_members; i++) {
    c->members[i] = b->members[i];
    c->members[i].name = (char *)"x";
  }
  for (i = 0; i < b->n_lists; i++) {
    kb_list *l = &c->lists[i];
    *l = b->lists[i];
    l->title = (char *)"x";
    l->cards = calloc((size_t)l->n_cards + 1, sizeof *l->cards);
    if (l->cards == NULL)
      abort();
    for (j = 0; j < l->n_cards; j++) {
      l->cards[j] = b->lists[i].cards[j];
      l->cards[j].title = (char *)"x";
      l->cards[j].description = (char *)(b->lists[i].cards[j].description[0] != '\0' ? "x" : "");
    }
  }
  return c;
}

static void free_copy(kb_board *c) {
  int i;
  for (i = 0; i < c->n_lists; i++)
    free(c->lists[i].cards);
  free(c->lists);
  free(c->members);
  free(c);
}

static void check_pages(const kb_board *b, int64_t me) {
  web_viewer v = {me, "alice"};
  char *json = web_board_json(b, me);
  json_t *root;
  json_error_t err;
  kb_board *plain;
  char *page, *plain_page;
  size_t live = 0;
  int i;

  if (json == NULL)
    abort(); /* every text passed the model's UTF-8 check */
  root = json_loads(json, 0, &err);
  for (i = 0; i < b->n_lists; i++)
    live += !b->lists[i].archived;
  if (root == NULL || json_array_size(json_object_get(root, "lists")) != live ||
      strcmp(json_string_value(json_object_get(root, "title")), b->title) != 0)
    abort();
  json_decref(root);
  free(json);

  plain = plain_copy(b);
  page = web_page_board(&v, b);
  plain_page = web_page_board(&v, plain);
  if (page == NULL || plain_page == NULL || count_lt(page) != count_lt(plain_page))
    abort();
  free(page);
  free(plain_page);
  free_copy(plain);
}

/* Every board, read (live, then with the archived) and rendered as its
 * first member among alice, bob and carol; the others are refused or see
 * the same. */
static int read_all(lith_rx *rx, void *arg) {
  run *rn = arg;
  int64_t b, u;
  int i, j, k;

  for (b = 1; b <= rn->n_boards; b++) {
    int read = 0;
    for (u = 1; u <= N_USERS && !read; u++)
      for (k = 0; k < 2; k++) {
        kb_board_query q = {.user_id = u, .board_id = b, .archived = k};
        int rc = kb_read_board(rx, &q);
        if (rc == KB_FORBIDDEN && k == 0)
          break;
        if (rc != LITH_OK || q.board == NULL || q.board->version != rn->version[b])
          abort();
        for (i = 0; i < q.board->n_lists; i++) {
          const kb_list *l = &q.board->lists[i];
          if (!k && l->archived)
            abort();
          for (j = 0; j < l->n_cards; j++)
            if (l->cards[j].list_id != l->id || (!k && l->cards[j].archived))
              abort();
        }
        if (k == 0) {
          kb_board_version_query vq = {.user_id = u, .board_id = b};
          check_pages(q.board, u);
          if (kb_read_board_version(rx, &vq) != LITH_OK || vq.version != rn->version[b])
            abort();
        }
        kb_board_free(q.board);
        read = 1;
      }
    if (!read)
      abort(); /* its creator is one of them, and stays a member */
  }
  for (u = 1; u <= rn->n_users; u++) {
    kb_user_query q = {.name = rn->user_name[u]};
    if (kb_read_user(rx, &q) != LITH_OK || q.user_id != u || strcmp(q.pw_hash, PW_HASH) != 0)
      abort();
  }
  for (i = 0; i < rn->n_sessions; i++) { /* a token's last record says what it is */
    const session *s = &rn->sessions[i];
    kb_session_query q = {.token_hash = s->token_hash, .now_ms = 1500};
    int rc = kb_read_session(rx, &q);
    for (j = i + 1; j < rn->n_sessions; j++)
      if (strcmp(rn->sessions[j].token_hash, s->token_hash) == 0)
        break;
    if (j < rn->n_sessions)
      continue;
    if (s->live && s->expires_ms > 1500) {
      if (rc != LITH_OK || q.user_id != s->user_id || strcmp(q.name, rn->user_name[s->user_id]) != 0)
        abort();
    } else if (rc != KB_NOT_FOUND) {
      abort();
    }
  }
  for (u = 1; u <= N_USERS; u++) {
    kb_boards_query q = {.user_id = u};
    if (kb_read_boards(rx, &q) != LITH_OK)
      abort();
    for (i = 0; i < q.n_boards; i++)
      if (q.boards[i].id < 1 || q.boards[i].id > rn->n_boards ||
          q.boards[i].version != rn->version[q.boards[i].id])
        abort();
    kb_boards_free(q.boards, q.n_boards);
  }
  return LITH_OK;
}

static void on_done(lith_request *req) {
  (void)req;
  sem_post(&done);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run *rn = calloc(1, sizeof *rn);
  lith_request req;
  if (rn == NULL)
    abort();
  decode(rn, data, size);
  /* lith_submit and a semaphore, not lith_do: lith_do spins while the
   * writer works, a core the writer (and the other fuzzers) then lack. */
  memset(&req, 0, sizeof req);
  req.fn = run_actions;
  req.arg = rn;
  req.done = on_done;
  if (lith_submit(db, &req) != LITH_OK)
    abort();
  while (sem_wait(&done) != 0) {
  }
  if (req.rc != LITH_OK)
    abort();
  if (lith_read(db, read_all, rn) != LITH_OK)
    abort();
  free_run(rn);
  free(rn);
  return 0;
}
