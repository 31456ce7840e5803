/*
 * board.c — the kanban model's commands (writer thread) and the plain-
 * connection runner; the reads are in board_read.c.
 *
 * Every command body is written once, against a small context (kb_ctx)
 * that gets its statements either from lith's statement cache (the public
 * lith_command wrappers: the server and bench/kanban's writer arm) or from
 * a per-connection cache (kb_plain: bench/kanban's per-connection baseline).
 * So the baseline runs exactly the statements the writer runs; only the
 * transaction around them differs.
 *
 * The shape of a board action (see board.h for the why):
 *   1. validate the inputs (nothing read yet: KB_BAD_INPUT is cheap);
 *   2. the op id: if (user, op id) is recorded, return its outcome;
 *   3. one lookup of the object with the membership check folded in;
 *   4. the change itself;
 *   5. bump the board version (RETURNING it), touch the board, record the op.
 * An error anywhere returns at once: lith rolls the command's savepoint back,
 * so a command never needs to undo its own partial work.
 *
 * The statements are a table indexed by an enum, so a move costs six
 * cached statements: op lookup, card + membership + target list,
 * neighbours, the card update, the board bump, the op record.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "board.h"

/* ---- the statements -------------------------------------------------------- */

enum {
  Q_OP_GET,
  Q_OP_PUT,
  Q_USER_BY_ID,
  Q_USER_BY_NAME,
  Q_USER_PUT,
  Q_SESSION_PUT,
  Q_SESSION_DEL,
  Q_PRUNE_SESSIONS,
  Q_PRUNE_OPS,
  Q_BOARD_ACCESS,
  Q_BOARD_PUT,
  Q_BOARD_TITLE,
  Q_BOARD_BUMP,
  Q_MEMBER_PUT,
  Q_LIST_ACCESS,
  Q_LIST_END,
  Q_LIST_PUT,
  Q_LIST_TITLE,
  Q_LIST_ARCHIVE,
  Q_CARD_ACCESS,
  Q_MOVE_ACCESS,
  Q_NEIGHBOURS,
  Q_TAIL,
  Q_RENUMBER,
  Q_CARD_PUT,
  Q_CARD_MOVE,
  Q_CARD_EDIT,
  Q_CARD_ARCHIVE,
  N_Q
};

static const char *const SQL[N_Q] = {
    [Q_OP_GET] = "SELECT kind, board_id, obj_id, version, board_version, idx, fp FROM ops"
                 " WHERE user_id = ?1 AND op_id = ?2",
    [Q_OP_PUT] = "INSERT INTO ops(user_id, op_id, kind, board_id, obj_id, version, board_version,"
                 " idx, created_ms, fp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [Q_USER_BY_ID] = "SELECT id FROM users WHERE id = ?1",
    [Q_USER_BY_NAME] = "SELECT id FROM users WHERE name = ?1",
    [Q_USER_PUT] = "INSERT INTO users(name, pw_hash, created_ms) VALUES (?1, ?2, ?3)"
                   " ON CONFLICT(name) DO NOTHING RETURNING id",
    [Q_SESSION_PUT] = "INSERT INTO sessions(token_hash, user_id, created_ms, expires_ms)"
                      " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(token_hash) DO NOTHING RETURNING 1",
    [Q_SESSION_DEL] = "DELETE FROM sessions WHERE token_hash = ?1",
    [Q_PRUNE_SESSIONS] = "DELETE FROM sessions WHERE expires_ms <= ?1",
    [Q_PRUNE_OPS] = "DELETE FROM ops WHERE created_ms < ?1",
    [Q_BOARD_ACCESS] = "SELECT EXISTS(SELECT 1 FROM members m WHERE m.board_id = b.id AND"
                       " m.user_id = ?2) FROM boards b WHERE b.id = ?1",
    [Q_BOARD_PUT] = "INSERT INTO boards(title, version, created_by, created_ms)"
                    " VALUES (?1, 0, ?2, ?3) RETURNING id",
    [Q_BOARD_TITLE] = "UPDATE boards SET title = ?2 WHERE id = ?1",
    [Q_BOARD_BUMP] = "UPDATE boards SET version = version + 1 WHERE id = ?1 RETURNING version",
    [Q_MEMBER_PUT] = "INSERT INTO members(board_id, user_id, added_ms) VALUES (?1, ?2, ?3)"
                     " ON CONFLICT DO NOTHING RETURNING 1",
    [Q_LIST_ACCESS] = "SELECT l.board_id, l.archived, l.pos, EXISTS(SELECT 1 FROM members m"
                      " WHERE m.board_id = l.board_id AND m.user_id = ?2) FROM lists l"
                      " WHERE l.id = ?1",
    [Q_LIST_END] = "SELECT coalesce(max(pos), 0) + ?2 FROM lists WHERE board_id = ?1",
    [Q_LIST_PUT] = "INSERT INTO lists(board_id, title, pos) VALUES (?1, ?2, ?3) RETURNING id",
    [Q_LIST_TITLE] = "UPDATE lists SET title = ?2 WHERE id = ?1",
    [Q_LIST_ARCHIVE] = "UPDATE lists SET archived = ?2, pos = ?3 WHERE id = ?1",
    [Q_CARD_ACCESS] = "SELECT c.board_id, c.list_id, c.pos, c.version, c.archived,"
                      " EXISTS(SELECT 1 FROM members m WHERE m.board_id = c.board_id AND"
                      " m.user_id = ?2) FROM cards c WHERE c.id = ?1",
    /* The card, the mover's membership and the target list in one lookup. */
    [Q_MOVE_ACCESS] = "SELECT c.board_id, c.list_id, c.pos, c.version, c.archived,"
                      " EXISTS(SELECT 1 FROM members m WHERE m.board_id = c.board_id AND"
                      " m.user_id = ?2), l.board_id, l.archived FROM cards c"
                      " LEFT JOIN lists l ON l.id = ?3 WHERE c.id = ?1",
    [Q_NEIGHBOURS] = "SELECT pos FROM cards WHERE list_id = ?1 AND archived = 0 AND id <> ?2"
                     " ORDER BY pos, id LIMIT ?3 OFFSET ?4",
    [Q_TAIL] = "SELECT count(*), max(pos) FROM cards WHERE list_id = ?1 AND archived = 0"
               " AND id <> ?2",
    /* Positions (rank + 1) * gap, leaving rank `index` free for the card. */
    [Q_RENUMBER] = "WITH r AS (SELECT id, row_number() OVER (ORDER BY pos, id) AS rn FROM cards"
                   " WHERE list_id = ?1 AND archived = 0 AND id <> ?2)"
                   " UPDATE cards SET pos = (r.rn + (r.rn > ?3)) * ?4 FROM r WHERE cards.id = r.id",
    [Q_CARD_PUT] = "INSERT INTO cards(board_id, list_id, title, description, pos, version,"
                   " created_by, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?7)"
                   " RETURNING id",
    [Q_CARD_MOVE] = "UPDATE cards SET list_id = ?2, pos = ?3, version = version + 1,"
                    " updated_ms = ?4 WHERE id = ?1",
    [Q_CARD_EDIT] = "UPDATE cards SET title = coalesce(?2, title), description ="
                    " coalesce(?3, description), updated_ms = ?4 WHERE id = ?1",
    [Q_CARD_ARCHIVE] = "UPDATE cards SET archived = ?2, pos = ?3, version = version + 1,"
                       " updated_ms = ?4 WHERE id = ?1",
};

/* What an op record says the action was: a reused op id must name the same. */
enum {
  KIND_CREATE_BOARD = 1,
  KIND_RENAME_BOARD,
  KIND_ADD_MEMBER,
  KIND_CREATE_LIST,
  KIND_RENAME_LIST,
  KIND_ARCHIVE_LIST,
  KIND_CREATE_CARD,
  KIND_EDIT_CARD,
  KIND_ARCHIVE_CARD,
  KIND_MOVE_CARD
};

/* ---- the context: lith's transaction or a plain connection ---------------- */

struct kb_plain {
  sqlite3 *db;
  sqlite3_stmt *st[N_Q];
  char errmsg[LITH_ERRMSG_MAX];
};

typedef struct kb_ctx {
  lith_tx *tx;     /* under lith, or */
  kb_plain *plain; /* on a plain connection */
} kb_ctx;

static sqlite3 *ctx_db(const kb_ctx *c) { return c->tx ? lith_tx_db(c->tx) : c->plain->db; }

static int failv(kb_ctx *c, int rc, const char *fmt, va_list ap) {
  char msg[LITH_ERRMSG_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (c->tx)
    return lith_tx_error(c->tx, rc, "%s", msg);
  memcpy(c->plain->errmsg, msg, sizeof msg);
  return rc;
}

/* Set the command's message and return rc. */
__attribute__((format(printf, 3, 4))) static int fail(kb_ctx *c, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rc = failv(c, rc, fmt, ap);
  va_end(ap);
  return rc;
}

/* An SQLite error as a lith code, with SQLite's message. */
static int fail_sqlite(kb_ctx *c, int src) {
  return fail(c, lith_from_sqlite(src), "%s", sqlite3_errmsg(ctx_db(c)));
}

static void touch(kb_ctx *c, int64_t board) {
  if (c->tx)
    lith_tx_touch(c->tx, board);
}

/* Bind "I" int64_t, "i" int, "s" text (NULL binds NULL). */
static int bindv(sqlite3_stmt *st, const char *types, va_list ap) {
  for (int i = 1; *types; types++, i++) {
    int src = SQLITE_MISUSE;
    if (*types == 'I') {
      src = sqlite3_bind_int64(st, i, va_arg(ap, int64_t));
    } else if (*types == 'i') {
      src = sqlite3_bind_int(st, i, va_arg(ap, int));
    } else if (*types == 's') {
      const char *s = va_arg(ap, const char *);
      src = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
    }
    if (src != SQLITE_OK)
      return src;
  }
  return SQLITE_OK;
}

/* Statement q, cached, reset, bound: ready to step; NULL with *rc set. */
static sqlite3_stmt *q_bind(kb_ctx *c, int q, int *rc, const char *types, ...) {
  sqlite3_stmt *st;
  if (c->tx) {
    st = lith_tx_stmt(c->tx, SQL[q]);
    if (!st) {
      *rc = lith_tx_rc(c->tx);
      return NULL;
    }
  } else {
    st = c->plain->st[q];
    if (!st) {
      int src = sqlite3_prepare_v3(c->plain->db, SQL[q], -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
      if (src != SQLITE_OK) {
        *rc = fail_sqlite(c, src);
        return NULL;
      }
      c->plain->st[q] = st;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }
  va_list ap;
  va_start(ap, types);
  int src = bindv(st, types, ap);
  va_end(ap);
  if (src != SQLITE_OK) {
    *rc = fail_sqlite(c, src);
    sqlite3_reset(st);
    return NULL;
  }
  return st;
}

/* After stepping: reset st; src is the last step's code (ROW or DONE are
 * fine). Returns LITH_OK or the error. */
static int q_end(kb_ctx *c, sqlite3_stmt *st, int src) {
  if (src == SQLITE_ROW || src == SQLITE_DONE) {
    sqlite3_reset(st);
    return LITH_OK;
  }
  int rc = fail_sqlite(c, src);
  sqlite3_reset(st);
  return rc;
}

/* Step st once: *found = 1 and *out = column 0 if it gave a row (out may be
 * NULL). Resets st. */
static int q_first(kb_ctx *c, sqlite3_stmt *st, int64_t *out, int *found) {
  int src = sqlite3_step(st);
  *found = src == SQLITE_ROW;
  if (*found && out)
    *out = sqlite3_column_int64(st, 0);
  return q_end(c, st, src);
}

/* Run st to completion. */
static int q_run(kb_ctx *c, sqlite3_stmt *st) {
  int src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW)
    ;
  return q_end(c, st, src);
}

/* ---- input checks ------------------------------------------------------------ */

/* Bytes of a valid UTF-8 sequence at s (n bytes left), or 0. */
static int utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80)
    return 1;
  int len;
  unsigned cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if ((size_t)len > n)
    return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

/* Text of at most `max` bytes, valid UTF-8, no control characters but (if
 * multiline) newline, carriage return and tab; if `required`, not empty and
 * not only spaces. */
static int check_text(kb_ctx *c, const char *what, const char *s, size_t max, int required, int multiline) {
  if (!s)
    return required ? fail(c, KB_BAD_INPUT, "%s is missing", what) : LITH_OK;
  size_t n = strlen(s);
  if (n > max)
    return fail(c, KB_BAD_INPUT, "%s is too long (%zu bytes, at most %zu)", what, n, max);
  int blank = 1;
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    int len = utf8_seq(u + i, n - i);
    if (len == 0)
      return fail(c, KB_BAD_INPUT, "%s is not valid UTF-8", what);
    if (len == 1) {
      unsigned ch = u[i];
      int ok_ctl = multiline && (ch == '\n' || ch == '\r' || ch == '\t');
      if ((ch < 0x20 || ch == 0x7F) && !ok_ctl)
        return fail(c, KB_BAD_INPUT, "%s contains a control character", what);
      if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t')
        blank = 0;
    } else {
      blank = 0;
    }
    i += (size_t)len;
  }
  if (required && blank)
    return fail(c, KB_BAD_INPUT, "%s is empty", what);
  return LITH_OK;
}

/* 1..max bytes of printable ASCII without spaces (op ids, hashes). */
static int check_token(kb_ctx *c, const char *what, const char *s, size_t max) {
  if (!s || !*s)
    return fail(c, KB_BAD_INPUT, "%s is missing", what);
  size_t n = 0;
  for (; s[n]; n++) {
    if (n >= max)
      return fail(c, KB_BAD_INPUT, "%s is too long (at most %zu bytes)", what, max);
    if (s[n] < 0x21 || s[n] > 0x7E)
      return fail(c, KB_BAD_INPUT, "%s may hold only printable ASCII without spaces", what);
  }
  return LITH_OK;
}

static int check_name(kb_ctx *c, const char *s) {
  if (!s || !*s)
    return fail(c, KB_BAD_INPUT, "the user name is missing");
  size_t n = 0;
  for (; s[n]; n++) {
    char ch = s[n];
    if (n >= KB_NAME_MAX)
      return fail(c, KB_BAD_INPUT, "the user name is too long (at most %d bytes)", KB_NAME_MAX);
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
          ch == '.' || ch == '-'))
      return fail(c, KB_BAD_INPUT, "a user name may hold only letters, digits, '_', '.' and '-'");
  }
  return LITH_OK;
}

/* ---- op ids -------------------------------------------------------------------- */

static int board_access(kb_ctx *c, int64_t board, int64_t user);

/* What the client asked, as 64 bits (FNV-1a over the kind and every input
 * field but the op id): a replay must ask the same, or it is another
 * action under a used id. Never 0 (0 marks records older than the column). */
static int64_t op_fp(const kb_action *a, int kind) {
  uint64_t h = 1469598103934665603ULL;
  const int64_t nums[] = {kind, a->board_id, a->list_id, a->card_id, a->index, a->seen_version, a->archived};
  const unsigned char *b = (const unsigned char *)nums;
  for (size_t i = 0; i < sizeof nums; i++)
    h = (h ^ b[i]) * 1099511628211ULL;
  const char *texts[] = {a->title, a->description, a->name};
  for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
    h = (h ^ (texts[t] ? 1u : 2u)) * 1099511628211ULL; /* NULL and "" differ */
    for (const unsigned char *p = (const unsigned char *)texts[t]; p && *p; p++)
      h = (h ^ *p) * 1099511628211ULL;
    h = (h ^ 0xffu) * 1099511628211ULL; /* a separator: ("ab","") != ("a","b") */
  }
  return h == 0 ? 1 : (int64_t)h;
}

/* If a->op_id was applied by a->user_id: fill a->out from its record and set
 * *done. KB_OP_CONFLICT if the id was used for another action (another kind,
 * or other content: a replay never drops new content silently); the
 * membership check runs before a replay answers, as it would for the
 * action. */
static int op_replay(kb_ctx *c, kb_action *a, int kind, int *done) {
  *done = 0;
  memset(&a->out, 0, sizeof a->out);
  if (!a->op_id)
    return LITH_OK;
  int rc = check_token(c, "the operation id", a->op_id, KB_OP_ID_MAX);
  if (rc != LITH_OK)
    return rc;
  sqlite3_stmt *st = q_bind(c, Q_OP_GET, &rc, "Is", a->user_id, a->op_id);
  if (!st)
    return rc;
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    int was = sqlite3_column_int(st, 0);
    a->out.board_id = sqlite3_column_int64(st, 1);
    a->out.id = sqlite3_column_int64(st, 2);
    a->out.version = sqlite3_column_int64(st, 3);
    a->out.board_version = sqlite3_column_int64(st, 4);
    a->out.index = sqlite3_column_int64(st, 5);
    int64_t fp = sqlite3_column_int64(st, 6);
    a->out.replayed = 1;
    sqlite3_reset(st);
    if (was != kind || (fp != 0 && fp != op_fp(a, kind))) {
      memset(&a->out, 0, sizeof a->out);
      return fail(c, KB_OP_CONFLICT, "operation id %s was used for another action", a->op_id);
    }
    if ((rc = board_access(c, a->out.board_id, a->user_id)) != LITH_OK) {
      memset(&a->out, 0, sizeof a->out);
      return rc;
    }
    *done = 1;
    return LITH_OK;
  }
  return q_end(c, st, src);
}

/* The common end of a board action: bump the board's version, touch the
 * board, record the op id with the outcome. */
static int finish(kb_ctx *c, kb_action *a, int kind) {
  int rc, found;
  sqlite3_stmt *st = q_bind(c, Q_BOARD_BUMP, &rc, "I", a->out.board_id);
  if (!st)
    return rc;
  rc = q_first(c, st, &a->out.board_version, &found);
  if (rc != LITH_OK)
    return rc;
  if (!found)
    return fail(c, KB_NOT_FOUND, "board %lld is gone", (long long)a->out.board_id);
  touch(c, a->out.board_id);
  if (!a->op_id)
    return LITH_OK;
  st = q_bind(c, Q_OP_PUT, &rc, "IsiIIIIIII", a->user_id, a->op_id, kind, a->out.board_id, a->out.id,
              a->out.version, a->out.board_version, a->out.index, kb_now_ms(), op_fp(a, kind));
  return st ? q_run(c, st) : rc;
}

/* ---- access checks ------------------------------------------------------------- */

static int board_access(kb_ctx *c, int64_t board, int64_t user) {
  int rc, found;
  int64_t member = 0;
  sqlite3_stmt *st = q_bind(c, Q_BOARD_ACCESS, &rc, "II", board, user);
  if (!st)
    return rc;
  rc = q_first(c, st, &member, &found);
  if (rc != LITH_OK)
    return rc;
  if (!found)
    return fail(c, KB_NOT_FOUND, "no board %lld", (long long)board);
  if (!member)
    return fail(c, KB_FORBIDDEN, "not a member of board %lld", (long long)board);
  return LITH_OK;
}

typedef struct list_row {
  int64_t board_id, pos;
  int archived;
} list_row;

/* a->list_id's row with the membership check; a->board_id, if set, is the
 * board the list must be on (else KB_NOT_FOUND, before membership: a URL
 * naming the wrong board learns nothing). */
static int list_access(kb_ctx *c, const kb_action *a, list_row *out) {
  int rc;
  sqlite3_stmt *st = q_bind(c, Q_LIST_ACCESS, &rc, "II", a->list_id, a->user_id);
  if (!st)
    return rc;
  int src = sqlite3_step(st);
  if (src != SQLITE_ROW) {
    rc = q_end(c, st, src);
    return rc != LITH_OK ? rc : fail(c, KB_NOT_FOUND, "no list %lld", (long long)a->list_id);
  }
  out->board_id = sqlite3_column_int64(st, 0);
  out->archived = sqlite3_column_int(st, 1);
  out->pos = sqlite3_column_int64(st, 2);
  int member = sqlite3_column_int(st, 3);
  sqlite3_reset(st);
  if (a->board_id && a->board_id != out->board_id)
    return fail(c, KB_NOT_FOUND, "no list %lld on board %lld", (long long)a->list_id, (long long)a->board_id);
  if (!member)
    return fail(c, KB_FORBIDDEN, "not a member of board %lld", (long long)out->board_id);
  return LITH_OK;
}

typedef struct card_row {
  int64_t board_id, list_id, pos, version;
  int archived;
} card_row;

/* a->card_id's row (into out) with the membership check, and if `target`
 * is given, the row of list a->list_id too (board 0: there is none), in one
 * statement. a->board_id as in list_access. */
static int card_access(kb_ctx *c, const kb_action *a, card_row *out, list_row *target) {
  int rc;
  sqlite3_stmt *st = target ? q_bind(c, Q_MOVE_ACCESS, &rc, "III", a->card_id, a->user_id, a->list_id)
                            : q_bind(c, Q_CARD_ACCESS, &rc, "II", a->card_id, a->user_id);
  if (!st)
    return rc;
  int src = sqlite3_step(st);
  if (src != SQLITE_ROW) {
    rc = q_end(c, st, src);
    return rc != LITH_OK ? rc : fail(c, KB_NOT_FOUND, "no card %lld", (long long)a->card_id);
  }
  out->board_id = sqlite3_column_int64(st, 0);
  out->list_id = sqlite3_column_int64(st, 1);
  out->pos = sqlite3_column_int64(st, 2);
  out->version = sqlite3_column_int64(st, 3);
  out->archived = sqlite3_column_int(st, 4);
  int member = sqlite3_column_int(st, 5);
  if (target) {
    target->board_id = sqlite3_column_int64(st, 6); /* NULL (no list) reads as 0 */
    target->archived = sqlite3_column_int(st, 7);
    target->pos = 0;
  }
  sqlite3_reset(st);
  if (a->board_id && a->board_id != out->board_id)
    return fail(c, KB_NOT_FOUND, "no card %lld on board %lld", (long long)a->card_id, (long long)a->board_id);
  if (!member)
    return fail(c, KB_FORBIDDEN, "not a member of board %lld", (long long)out->board_id);
  return LITH_OK;
}

/* ---- positions ----------------------------------------------------------------- */

/* Where card `card` (0: a new card) goes in `list` at `index` (KB_END or
 * 0..n) among the list's other non-archived cards: *pos, and *idx the index
 * it lands at. `cur` is the card's current position if it is in `list`
 * already (has_cur), kept when it is already at that index. Renumbers the
 * list when the neighbours leave no integer between them. */
static int place(kb_ctx *c, int64_t list, int64_t card, int64_t index, int has_cur, int64_t cur, int64_t *pos,
                 int64_t *idx) {
  int rc;
  int64_t prev = 0, next = 0;
  int has_prev = 0, has_next = 0;
  if (index == KB_END) {
    sqlite3_stmt *st = q_bind(c, Q_TAIL, &rc, "II", list, card);
    if (!st)
      return rc;
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
      *idx = sqlite3_column_int64(st, 0);
      has_prev = sqlite3_column_type(st, 1) != SQLITE_NULL;
      prev = sqlite3_column_int64(st, 1);
    }
    rc = q_end(c, st, src);
    if (rc != LITH_OK)
      return rc;
  } else if (index < 0) {
    return fail(c, KB_BAD_INPUT, "index %lld is out of range", (long long)index);
  } else {
    *idx = index;
    sqlite3_stmt *st = q_bind(c, Q_NEIGHBOURS, &rc, "IIII", list, card, (int64_t)(index ? 2 : 1),
                              index ? index - 1 : (int64_t)0);
    if (!st)
      return rc;
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
      if (index) {
        has_prev = 1;
        prev = sqlite3_column_int64(st, 0);
        src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
          has_next = 1;
          next = sqlite3_column_int64(st, 0);
        }
      } else {
        has_next = 1;
        next = sqlite3_column_int64(st, 0);
      }
    }
    rc = q_end(c, st, src);
    if (rc != LITH_OK)
      return rc;
    if (index && !has_prev)
      return fail(c, KB_BAD_INPUT, "index %lld is out of range", (long long)index);
  }
  /* Already there: keep the position (a no-op move does not eat gaps). */
  if (has_cur && (!has_prev || cur > prev) && (!has_next || cur < next)) {
    *pos = cur;
    return LITH_OK;
  }
  if (!has_prev && !has_next) {
    *pos = KB_GAP;
    return LITH_OK;
  }
  if (has_prev && !has_next && prev <= INT64_MAX / 2) {
    *pos = prev + KB_GAP;
    return LITH_OK;
  }
  if (!has_prev && has_next && next >= INT64_MIN / 2) {
    *pos = next - KB_GAP;
    return LITH_OK;
  }
  if (has_prev && has_next && next - prev >= 2) {
    *pos = prev + (next - prev) / 2;
    return LITH_OK;
  }
  /* No room: ranks 0..idx-1 and idx+1..n get (rank + 1) * KB_GAP. */
  sqlite3_stmt *st = q_bind(c, Q_RENUMBER, &rc, "IIII", list, card, *idx, (int64_t)KB_GAP);
  if (!st)
    return rc;
  rc = q_run(c, st);
  if (rc != LITH_OK)
    return rc;
  *pos = (*idx + 1) * KB_GAP;
  return LITH_OK;
}

/* ---- users and sessions ------------------------------------------------------ */

static int user_exists(kb_ctx *c, int64_t user) {
  int rc, found;
  sqlite3_stmt *st = q_bind(c, Q_USER_BY_ID, &rc, "I", user);
  if (!st)
    return rc;
  rc = q_first(c, st, NULL, &found);
  if (rc == LITH_OK && !found)
    rc = fail(c, KB_NOT_FOUND, "no user %lld", (long long)user);
  return rc;
}

static int create_user(kb_ctx *c, kb_user_args *u) {
  u->user_id = 0;
  int rc = check_name(c, u->name);
  if (rc == LITH_OK)
    rc = check_token(c, "the password hash", u->pw_hash, KB_HASH_MAX);
  if (rc != LITH_OK)
    return rc;
  int found;
  sqlite3_stmt *st = q_bind(c, Q_USER_PUT, &rc, "ssI", u->name, u->pw_hash, kb_now_ms());
  if (!st)
    return rc;
  rc = q_first(c, st, &u->user_id, &found);
  if (rc == LITH_OK && !found)
    rc = fail(c, KB_EXISTS, "the name %s is taken", u->name);
  return rc;
}

static int create_session(kb_ctx *c, const kb_session_args *s) {
  int rc = check_token(c, "the token hash", s->token_hash, KB_HASH_MAX);
  if (rc == LITH_OK)
    rc = user_exists(c, s->user_id);
  if (rc != LITH_OK)
    return rc;
  int found;
  sqlite3_stmt *st =
      q_bind(c, Q_SESSION_PUT, &rc, "sIII", s->token_hash, s->user_id, kb_now_ms(), s->expires_ms);
  if (!st)
    return rc;
  rc = q_first(c, st, NULL, &found);
  if (rc == LITH_OK && !found)
    rc = fail(c, KB_EXISTS, "that session exists already");
  return rc;
}

static int delete_session(kb_ctx *c, const kb_session_args *s) {
  int rc = check_token(c, "the token hash", s->token_hash, KB_HASH_MAX);
  if (rc != LITH_OK)
    return rc;
  sqlite3_stmt *st = q_bind(c, Q_SESSION_DEL, &rc, "s", s->token_hash);
  return st ? q_run(c, st) : rc;
}

static int prune(kb_ctx *c, kb_prune_args *p) {
  int rc;
  p->sessions = p->ops = 0;
  sqlite3_stmt *st = q_bind(c, Q_PRUNE_SESSIONS, &rc, "I", p->now_ms ? p->now_ms : kb_now_ms());
  if (!st)
    return rc;
  rc = q_run(c, st);
  if (rc != LITH_OK)
    return rc;
  p->sessions = sqlite3_changes64(ctx_db(c));
  if (p->ops_before_ms > 0) {
    st = q_bind(c, Q_PRUNE_OPS, &rc, "I", p->ops_before_ms);
    if (!st)
      return rc;
    rc = q_run(c, st);
    if (rc != LITH_OK)
      return rc;
    p->ops = sqlite3_changes64(ctx_db(c));
  }
  return LITH_OK;
}

/* ---- boards, members, lists --------------------------------------------------- */

static int create_board(kb_ctx *c, kb_action *a) {
  int rc = check_text(c, "the title", a->title, KB_TITLE_MAX, 1, 0);
  int done = 0, found;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_CREATE_BOARD, &done);
  if (rc != LITH_OK || done)
    return rc;
  if ((rc = user_exists(c, a->user_id)) != LITH_OK)
    return rc;
  int64_t now = kb_now_ms();
  sqlite3_stmt *st = q_bind(c, Q_BOARD_PUT, &rc, "sII", a->title, a->user_id, now);
  if (!st)
    return rc;
  if ((rc = q_first(c, st, &a->out.board_id, &found)) != LITH_OK)
    return rc;
  a->out.id = a->out.board_id;
  st = q_bind(c, Q_MEMBER_PUT, &rc, "III", a->out.board_id, a->user_id, now);
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_CREATE_BOARD);
}

static int rename_board(kb_ctx *c, kb_action *a) {
  int rc = check_text(c, "the title", a->title, KB_TITLE_MAX, 1, 0);
  int done = 0;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_RENAME_BOARD, &done);
  if (rc != LITH_OK || done)
    return rc;
  if ((rc = board_access(c, a->board_id, a->user_id)) != LITH_OK)
    return rc;
  a->out.board_id = a->out.id = a->board_id;
  sqlite3_stmt *st = q_bind(c, Q_BOARD_TITLE, &rc, "Is", a->board_id, a->title);
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_RENAME_BOARD);
}

/* Make `member` a member of `board` (the caller checked access). */
static int put_member(kb_ctx *c, int64_t board, int64_t member) {
  int rc, found;
  sqlite3_stmt *st = q_bind(c, Q_MEMBER_PUT, &rc, "III", board, member, kb_now_ms());
  if (!st)
    return rc;
  rc = q_first(c, st, NULL, &found);
  if (rc == LITH_OK && !found)
    rc = fail(c, KB_EXISTS, "user %lld is a member already", (long long)member);
  return rc;
}

static int add_member(kb_ctx *c, kb_action *a) {
  int rc = check_name(c, a->name);
  int done = 0, found;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_ADD_MEMBER, &done);
  if (rc != LITH_OK || done)
    return rc;
  if ((rc = board_access(c, a->board_id, a->user_id)) != LITH_OK)
    return rc;
  a->out.board_id = a->board_id;
  sqlite3_stmt *st = q_bind(c, Q_USER_BY_NAME, &rc, "s", a->name);
  if (!st)
    return rc;
  if ((rc = q_first(c, st, &a->out.id, &found)) != LITH_OK)
    return rc;
  if (!found)
    return fail(c, KB_NO_USER, "no user named %s", a->name);
  if ((rc = put_member(c, a->board_id, a->out.id)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_ADD_MEMBER);
}

static int create_list(kb_ctx *c, kb_action *a) {
  int rc = check_text(c, "the title", a->title, KB_TITLE_MAX, 1, 0);
  int done = 0, found;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_CREATE_LIST, &done);
  if (rc != LITH_OK || done)
    return rc;
  if ((rc = board_access(c, a->board_id, a->user_id)) != LITH_OK)
    return rc;
  a->out.board_id = a->board_id;
  int64_t pos = KB_GAP;
  sqlite3_stmt *st = q_bind(c, Q_LIST_END, &rc, "II", a->board_id, (int64_t)KB_GAP);
  if (!st || (rc = q_first(c, st, &pos, &found)) != LITH_OK)
    return rc;
  st = q_bind(c, Q_LIST_PUT, &rc, "IsI", a->board_id, a->title, pos);
  if (!st || (rc = q_first(c, st, &a->out.id, &found)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_CREATE_LIST);
}

static int rename_list(kb_ctx *c, kb_action *a) {
  int rc = check_text(c, "the title", a->title, KB_TITLE_MAX, 1, 0);
  int done = 0;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_RENAME_LIST, &done);
  if (rc != LITH_OK || done)
    return rc;
  list_row l;
  if ((rc = list_access(c, a, &l)) != LITH_OK)
    return rc;
  a->out.board_id = l.board_id;
  a->out.id = a->list_id;
  sqlite3_stmt *st = q_bind(c, Q_LIST_TITLE, &rc, "Is", a->list_id, a->title);
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_RENAME_LIST);
}

static int archive_list(kb_ctx *c, kb_action *a) {
  if (a->archived != 0 && a->archived != 1)
    return fail(c, KB_BAD_INPUT, "archived must be 0 or 1");
  int done = 0, found;
  int rc = op_replay(c, a, KIND_ARCHIVE_LIST, &done);
  if (rc != LITH_OK || done)
    return rc;
  list_row l;
  if ((rc = list_access(c, a, &l)) != LITH_OK)
    return rc;
  a->out.board_id = l.board_id;
  a->out.id = a->list_id;
  int64_t pos = l.pos;
  if (l.archived && !a->archived) {
    sqlite3_stmt *st = q_bind(c, Q_LIST_END, &rc, "II", l.board_id, (int64_t)KB_GAP);
    if (!st || (rc = q_first(c, st, &pos, &found)) != LITH_OK)
      return rc;
  }
  sqlite3_stmt *st = q_bind(c, Q_LIST_ARCHIVE, &rc, "IiI", a->list_id, a->archived, pos);
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_ARCHIVE_LIST);
}

/* ---- cards ----------------------------------------------------------------------- */

static int create_card(kb_ctx *c, kb_action *a) {
  int rc = check_text(c, "the title", a->title, KB_TITLE_MAX, 1, 0);
  if (rc == LITH_OK)
    rc = check_text(c, "the description", a->description, KB_DESC_MAX, 0, 1);
  int done = 0, found;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_CREATE_CARD, &done);
  if (rc != LITH_OK || done)
    return rc;
  list_row l;
  if ((rc = list_access(c, a, &l)) != LITH_OK)
    return rc;
  if (l.archived)
    return fail(c, KB_BAD_INPUT, "list %lld is archived", (long long)a->list_id);
  a->out.board_id = l.board_id;
  int64_t pos;
  if ((rc = place(c, a->list_id, 0, a->index, 0, 0, &pos, &a->out.index)) != LITH_OK)
    return rc;
  int64_t now = kb_now_ms();
  sqlite3_stmt *st = q_bind(c, Q_CARD_PUT, &rc, "IIssIII", l.board_id, a->list_id, a->title,
                            a->description ? a->description : "", pos, a->user_id, now);
  if (!st || (rc = q_first(c, st, &a->out.id, &found)) != LITH_OK)
    return rc;
  a->out.version = 1;
  return finish(c, a, KIND_CREATE_CARD);
}

static int edit_card(kb_ctx *c, kb_action *a) {
  if (!a->title && !a->description)
    return fail(c, KB_BAD_INPUT, "nothing to change: no title, no description");
  int rc = a->title ? check_text(c, "the title", a->title, KB_TITLE_MAX, 1, 0) : LITH_OK;
  if (rc == LITH_OK)
    rc = check_text(c, "the description", a->description, KB_DESC_MAX, 0, 1);
  int done = 0;
  if (rc == LITH_OK)
    rc = op_replay(c, a, KIND_EDIT_CARD, &done);
  if (rc != LITH_OK || done)
    return rc;
  card_row k;
  if ((rc = card_access(c, a, &k, NULL)) != LITH_OK)
    return rc;
  a->out.board_id = k.board_id;
  a->out.id = a->card_id;
  a->out.version = k.version;
  sqlite3_stmt *st = q_bind(c, Q_CARD_EDIT, &rc, "IssI", a->card_id, a->title, a->description, kb_now_ms());
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  return finish(c, a, KIND_EDIT_CARD);
}

static int archive_card(kb_ctx *c, kb_action *a) {
  if (a->archived != 0 && a->archived != 1)
    return fail(c, KB_BAD_INPUT, "archived must be 0 or 1");
  int done = 0;
  int rc = op_replay(c, a, KIND_ARCHIVE_CARD, &done);
  if (rc != LITH_OK || done)
    return rc;
  card_row k;
  if ((rc = card_access(c, a, &k, NULL)) != LITH_OK)
    return rc;
  a->out.board_id = k.board_id;
  a->out.id = a->card_id;
  int64_t pos = k.pos;
  if (k.archived && !a->archived) {
    if ((rc = place(c, k.list_id, a->card_id, KB_END, 0, 0, &pos, &a->out.index)) != LITH_OK)
      return rc;
  }
  sqlite3_stmt *st = q_bind(c, Q_CARD_ARCHIVE, &rc, "IiII", a->card_id, a->archived, pos, kb_now_ms());
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  a->out.version = k.version + 1;
  return finish(c, a, KIND_ARCHIVE_CARD);
}

static int move_card(kb_ctx *c, kb_action *a) {
  if (a->index < 0 && a->index != KB_END)
    return fail(c, KB_BAD_INPUT, "index %lld is out of range", (long long)a->index);
  int done = 0;
  int rc = op_replay(c, a, KIND_MOVE_CARD, &done);
  if (rc != LITH_OK || done)
    return rc;
  card_row k;
  list_row l;
  if ((rc = card_access(c, a, &k, &l)) != LITH_OK)
    return rc;
  a->out.board_id = k.board_id;
  a->out.id = a->card_id;
  a->out.version = k.version;
  if (k.archived)
    return fail(c, KB_BAD_INPUT, "card %lld is archived", (long long)a->card_id);
  if (k.version != a->seen_version)
    return fail(c, KB_STALE, "card %lld was moved meanwhile (version %lld, the move was made on %lld)",
                (long long)a->card_id, (long long)k.version, (long long)a->seen_version);
  if (l.board_id == 0)
    return fail(c, KB_NOT_FOUND, "no list %lld", (long long)a->list_id);
  if (l.board_id != k.board_id)
    return fail(c, KB_BAD_INPUT, "list %lld is on another board", (long long)a->list_id);
  if (l.archived)
    return fail(c, KB_BAD_INPUT, "list %lld is archived", (long long)a->list_id);
  int64_t pos;
  rc = place(c, a->list_id, a->card_id, a->index, k.list_id == a->list_id, k.pos, &pos, &a->out.index);
  if (rc != LITH_OK)
    return rc;
  sqlite3_stmt *st = q_bind(c, Q_CARD_MOVE, &rc, "IIII", a->card_id, a->list_id, pos, kb_now_ms());
  if (!st || (rc = q_run(c, st)) != LITH_OK)
    return rc;
  a->out.version = k.version + 1;
  return finish(c, a, KIND_MOVE_CARD);
}

/* ---- seed ------------------------------------------------------------------------ */

static int seed_demo(kb_ctx *c, kb_seed_args *s) {
  static const char *const lists[] = {"To do", "Doing", "Done"};
  static const struct {
    int list;
    const char *title, *description;
  } cards[] = {
      {0, "Write the release notes", "What changed since 0.1, in the users' words."},
      {0, "Invite the team", "Add your colleagues as members (their user names)."},
      {0, "Try dragging a card", "Drag this card to another list; every open page sees it."},
      {1, "Benchmark MoveCard", "bench/kanban: 1, 50 and 200 people, synchronous FULL."},
      {1, "Review the schema", ""},
      {2, "Set up the board", "Lists, cards, members."},
  };
  int64_t list_ids[3];
  s->board_id = 0;
  if (!s->user_ids || s->n_users < 1)
    return fail(c, KB_BAD_INPUT, "a demo board needs at least one user");
  kb_action a = {.user_id = s->user_ids[0], .title = s->title ? s->title : "Demo board"};
  int rc = create_board(c, &a);
  if (rc != LITH_OK)
    return rc;
  int64_t board = s->board_id = a.out.board_id;
  for (int i = 1; i < s->n_users; i++) {
    if ((rc = user_exists(c, s->user_ids[i])) != LITH_OK)
      return rc;
    if ((rc = put_member(c, board, s->user_ids[i])) != LITH_OK)
      return rc;
  }
  for (int i = 0; i < 3; i++) {
    kb_action l = {.user_id = s->user_ids[0], .board_id = board, .title = lists[i]};
    if ((rc = create_list(c, &l)) != LITH_OK)
      return rc;
    list_ids[i] = l.out.id;
  }
  for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++) {
    kb_action k = {.user_id = s->user_ids[0],
                   .list_id = list_ids[cards[i].list],
                   .title = cards[i].title,
                   .description = cards[i].description,
                   .index = KB_END};
    if ((rc = create_card(c, &k)) != LITH_OK)
      return rc;
  }
  return LITH_OK;
}

/* ---- the public commands ------------------------------------------------------ */

#define COMMAND(pub, impl, type)                                               \
  static int impl##_any(kb_ctx *c, void *arg) { return impl(c, (type *)arg); } \
  int pub(lith_tx *tx, void *arg) {                                            \
    kb_ctx c = {.tx = tx, .plain = NULL};                                      \
    if (!arg)                                                                  \
      return lith_tx_error(tx, LITH_MISUSE, #pub ": no argument");             \
    return impl(&c, (type *)arg);                                              \
  }

COMMAND(kb_create_user, create_user, kb_user_args)
COMMAND(kb_create_session, create_session, kb_session_args)
COMMAND(kb_delete_session, delete_session, kb_session_args)
COMMAND(kb_prune, prune, kb_prune_args)
COMMAND(kb_create_board, create_board, kb_action)
COMMAND(kb_rename_board, rename_board, kb_action)
COMMAND(kb_add_member, add_member, kb_action)
COMMAND(kb_create_list, create_list, kb_action)
COMMAND(kb_rename_list, rename_list, kb_action)
COMMAND(kb_archive_list, archive_list, kb_action)
COMMAND(kb_create_card, create_card, kb_action)
COMMAND(kb_edit_card, edit_card, kb_action)
COMMAND(kb_archive_card, archive_card, kb_action)
COMMAND(kb_move_card, move_card, kb_action)
COMMAND(kb_seed_demo, seed_demo, kb_seed_args)

static const struct {
  lith_command pub;
  int (*impl)(kb_ctx *c, void *arg);
} COMMANDS[] = {
    {kb_create_user, create_user_any},       {kb_create_session, create_session_any},
    {kb_delete_session, delete_session_any}, {kb_prune, prune_any},
    {kb_create_board, create_board_any},     {kb_rename_board, rename_board_any},
    {kb_add_member, add_member_any},         {kb_create_list, create_list_any},
    {kb_rename_list, rename_list_any},       {kb_archive_list, archive_list_any},
    {kb_create_card, create_card_any},       {kb_edit_card, edit_card_any},
    {kb_archive_card, archive_card_any},     {kb_move_card, move_card_any},
    {kb_seed_demo, seed_demo_any},
};

/* ---- plain connections -------------------------------------------------------- */

int kb_plain_open(sqlite3 *db, kb_plain **out) {
  if (!out)
    return LITH_MISUSE;
  *out = NULL;
  if (!db)
    return LITH_MISUSE;
  kb_plain *p = calloc(1, sizeof *p);
  if (!p)
    return LITH_NOMEM;
  p->db = db;
  *out = p;
  return LITH_OK;
}

int kb_plain_run(kb_plain *p, lith_command cmd, void *arg) {
  if (!p)
    return LITH_MISUSE;
  p->errmsg[0] = '\0';
  kb_ctx c = {.tx = NULL, .plain = p};
  if (!arg)
    return fail(&c, LITH_MISUSE, "kb_plain_run: no argument");
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    if (COMMANDS[i].pub == cmd)
      return COMMANDS[i].impl(&c, arg);
  return fail(&c, LITH_MISUSE, "kb_plain_run: not a kanban command");
}

const char *kb_plain_errmsg(const kb_plain *p) { return p ? p->errmsg : "no kb_plain"; }

void kb_plain_close(kb_plain *p) {
  if (!p)
    return;
  for (int i = 0; i < N_Q; i++)
    sqlite3_finalize(p->st[i]);
  free(p);
}

/* ---- small things --------------------------------------------------------------- */

const char *kb_errstr(int rc) {
  switch (rc) {
  case KB_NOT_FOUND: return "KB_NOT_FOUND";
  case KB_FORBIDDEN: return "KB_FORBIDDEN";
  case KB_STALE: return "KB_STALE";
  case KB_BAD_INPUT: return "KB_BAD_INPUT";
  case KB_EXISTS: return "KB_EXISTS";
  case KB_OP_CONFLICT: return "KB_OP_CONFLICT";
  case KB_NO_USER: return "KB_NO_USER";
  default: return lith_errstr(rc);
  }
}

int64_t kb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
