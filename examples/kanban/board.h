/*
 * board.h — the kanban example's model: users, sessions, boards, members,
 * lists and cards, on lith.
 *
 * Why it looks like this:
 *   - Every write is a lith command (int f(lith_tx *, void *arg)), so the
 *     HTTP server submits it with lith_uv_submit and answers after the
 *     commit, and bench/kanban runs the very same function with lith_do.
 *     Nothing here ever writes outside a command.
 *   - Every board action takes one argument type, kb_action: the inputs a
 *     request carries (acting user, operation id, ids, texts) and the
 *     outputs the command writes (kb_result). A server can parse any form
 *     into one kb_action and pick the command by route.
 *   - The acting user is an argument of every board action and membership
 *     is checked inside the command, in the same transaction as the change:
 *     no check-then-act race with a member being removed.
 *   - Operation ids make retries safe: a successful action records
 *     (user, op id) and its outcome in the `ops` table in the same
 *     savepoint; the same op id again returns that outcome (replayed = 1)
 *     without applying anything twice. A failed action records nothing
 *     (its savepoint is rolled back), so its retry is evaluated afresh.
 *   - A card's move version is bumped by every move; a move carries the
 *     version its user saw, and a stale one is refused (KB_STALE) instead
 *     of silently overwriting someone else's move.
 *   - A board's version is bumped by every change to it, and every command
 *     that changes a board calls lith_tx_touch(tx, board_id): the server's
 *     on_commit hook receives exactly the boards that changed, with board
 *     ids as lith topics.
 *   - Order is integer positions with gaps (KB_GAP apart): a move writes one
 *     card row; only when two neighbours have no integer between them is the
 *     target list renumbered (one statement).
 *   - Reads run inside lith_read on a read-only connection (one snapshot)
 *     and return malloc'd structures the caller frees.
 *   - Secrets never reach this layer: the server stores a password hash
 *     string it computed (e.g. libsodium's argon2id string) and looks
 *     sessions up by a hash of the token (e.g. SHA-256 hex). This API never
 *     sees a password or a raw token.
 *
 * Result codes: lith's (LITH_OK, LITH_NOMEM, LITH_ERROR, LITH_BUSY, ...) and
 * the domain codes KB_* below (LITH_USER + n). A failing command changes
 * nothing (lith rolls back its savepoint); its message is in
 * lith_errmsg() after lith_do, or req.errmsg after lith_submit/lith_uv.
 *
 * Strings: UTF-8. Every `const char *` input is the caller's, read only while
 * the command runs — and a command may run more than once (lith.h), so keep
 * it valid and unchanged until lith_do returns or the request's callback
 * ran. Times are wall-clock milliseconds since the Unix epoch.
 *
 * Threads: commands run on lith's writer thread, readers on lith's read
 * pool; none keeps state between calls, so any number may be in flight.
 */
#ifndef KB_BOARD_H
#define KB_BOARD_H

#include <stdint.h>

#include <sqlite3.h>

#include "lith.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Result codes -------------------------------------------------------- */

enum {
  KB_NOT_FOUND = LITH_USER + 1,   /* no such user, session, board, list or card */
  KB_FORBIDDEN = LITH_USER + 2,   /* the acting user is not a member of the board */
  KB_STALE = LITH_USER + 3,       /* a move carried an old move version; nothing changed,
                                     kb_result.version holds the card's current one */
  KB_BAD_INPUT = LITH_USER + 4,   /* empty or too long text, bad characters, index out of
                                     range, archived target, a card to another board, ... */
  KB_EXISTS = LITH_USER + 5,      /* a user name or member that already exists */
  KB_OP_CONFLICT = LITH_USER + 6, /* an op id reused by the same user for another action */
  KB_NO_USER = LITH_USER + 7      /* the user an action names (a member to add) does not
                                     exist: not KB_NOT_FOUND, which is about the board, list
                                     or card the action is on */
};

/* The name of a result code (KB_* or lith's): a static string, never NULL. */
const char *kb_errstr(int rc);

/* ---- Limits ---------------------------------------------------------------- */

#define KB_NAME_MAX 32  /* user name: 1..32 bytes of [A-Za-z0-9_.-] */
#define KB_HASH_MAX 255 /* password hash string, token hash: 1..255 printable ASCII */
#define KB_TITLE_MAX \
  200                     /* board, list and card titles: 1..200 bytes, not blank, no
                              control characters */
#define KB_DESC_MAX 10000 /* card description: 0..10000 bytes (newlines and tabs allowed) */
#define KB_OP_ID_MAX 64   /* operation id: 1..64 bytes of printable ASCII */
#define KB_GAP 1024       /* distance between neighbouring positions after a renumber */
#define KB_END (-1)       /* kb_action.index: after the last card */

/* ---- Schema ------------------------------------------------------------------ */

/* The schema as lith migrations (lith_options.migrations): static strings.
 * Steps are only ever appended. */
extern const char *const kb_migrations[];
extern const int kb_n_migrations;

/* Set opt->migrations and opt->n_migrations to the above (keeps the rest). */
void kb_options_schema(lith_options *opt);

/* Wall-clock now, ms since the epoch (what commands record). */
int64_t kb_now_ms(void);

/* ---- Users and sessions (commands) -------------------------------------------- */

typedef struct kb_user_args {
  const char *name;    /* in: user name (KB_NAME_MAX) */
  const char *pw_hash; /* in: the password hash string the server computed (KB_HASH_MAX) */
  int64_t user_id;     /* out: the new user's id */
} kb_user_args;

/* Create a user. KB_EXISTS if the name is taken, KB_BAD_INPUT for a bad name
 * or hash. Touches no board. */
int kb_create_user(lith_tx *tx, void *arg /* kb_user_args */);

typedef struct kb_session_args {
  int64_t user_id;        /* in (kb_create_session): the signed-in user */
  const char *token_hash; /* in: hash of the session token (KB_HASH_MAX) */
  int64_t expires_ms;     /* in (kb_create_session): when it stops being valid */
} kb_session_args;

/* Store a session. KB_NOT_FOUND if the user does not exist, KB_EXISTS if the
 * token hash is already stored. */
int kb_create_session(lith_tx *tx, void *arg /* kb_session_args */);

/* Delete a session by token hash (sign-out); LITH_OK even if it was gone. */
int kb_delete_session(lith_tx *tx, void *arg /* kb_session_args */);

typedef struct kb_prune_args {
  int64_t now_ms;        /* in: sessions expired before this are deleted (0: kb_now_ms()) */
  int64_t ops_before_ms; /* in: op records older than this are deleted (0: none) */
  int64_t sessions;      /* out: sessions deleted */
  int64_t ops;           /* out: op records deleted */
} kb_prune_args;

/* Housekeeping: delete expired sessions and old op records (an op id
 * replayed after its record was pruned is applied again). */
int kb_prune(lith_tx *tx, void *arg /* kb_prune_args */);

/* ---- Board actions (commands) ---------------------------------------------- */

/* What an action did. Written by the command on every run; on a replay
 * (replayed = 1) it is the original run's outcome, e.g. the id it created
 * and the board version right after it. */
typedef struct kb_result {
  int64_t board_id;      /* the board changed */
  int64_t board_version; /* its version after the change */
  int64_t id;            /* the board, list, card or user the action created or changed */
  int64_t version;       /* card commands: the card's move version after the action
                            (on KB_STALE: its current version) */
  int64_t index;         /* kb_move_card, kb_create_card: the card's index among the
                            list's non-archived cards after the action */
  int replayed;          /* 1: op_id had been applied already; nothing changed now */
} kb_result;

/* One board action. Which inputs a command reads is listed with it; the
 * others are ignored. Zero-initialise, fill, submit, read `out`. */
typedef struct kb_action {
  int64_t user_id;   /* acting user; must be a member of the board */
  const char *op_id; /* client-generated operation id (KB_OP_ID_MAX), unique per
                              user: the same id again with the same content and
                              access replays the first outcome (out.replayed), with
                              other content it is KB_OP_CONFLICT; NULL: no replay
                              protection (seeding, tests) —
                              the HTTP server should always pass one. Make it begin
                              with a fixed-width time, e.g. in JS
                              Date.now().toString(36).padStart(9, '0') + '-' + random:
                              ops is keyed (op_id, user_id), and time-ordered ids are
                              appended at the index's right edge (random ids dirty
                              one page per move: 2.5x the WAL per commit). */
  int64_t board_id;  /* board commands: the board. List and card commands: 0, or
                              the board the list/card must be on (else KB_NOT_FOUND,
                              nothing changes): a server whose URLs name the board
                              passes it and needs no check of its own */
  int64_t list_id;
  int64_t card_id;
  const char *title;       /* NULL: keep (kb_edit_card) */
  const char *description; /* NULL: keep (kb_edit_card) */
  const char *name;        /* kb_add_member: the user name to add */
  int64_t index;           /* kb_move_card, kb_create_card: target index, 0-based among
                              the target list's non-archived cards without the card
                              itself, 0..n, or KB_END */
  int64_t seen_version;    /* kb_move_card: the card's move version the user saw */
  int archived;            /* kb_archive_list, kb_archive_card: 1 archive, 0 restore */
  kb_result out;           /* outputs */
} kb_action;

/* Create a board titled `title`; user_id becomes its first member.
 * out.id = out.board_id = the board. */
int kb_create_board(lith_tx *tx, void *arg);

/* Rename board `board_id` to `title`. */
int kb_rename_board(lith_tx *tx, void *arg);

/* Add the user called `name` to board `board_id` (user_id must be a member).
 * out.id = the added user's id. KB_NO_USER: no user has that name (the
 * message: "no user named NAME"); KB_NOT_FOUND: no such board; KB_EXISTS:
 * already a member. */
int kb_add_member(lith_tx *tx, void *arg);

/* Create a list titled `title` at the right end of board `board_id`.
 * out.id = the list. */
int kb_create_list(lith_tx *tx, void *arg);

/* Rename list `list_id` to `title`. */
int kb_rename_list(lith_tx *tx, void *arg);

/* Archive (archived = 1) or restore (0) list `list_id`; its cards keep their
 * places and are hidden with it. A restored list goes to the right end. */
int kb_archive_list(lith_tx *tx, void *arg);

/* Create a card in list `list_id` (not archived) with `title` and
 * `description` (NULL: empty) at `index` (KB_END or 0..n). out.id = the card,
 * out.version = 1. */
int kb_create_card(lith_tx *tx, void *arg);

/* Set card `card_id`'s title and/or description (NULL keeps a field; both
 * NULL is KB_BAD_INPUT). The move version is unchanged. */
int kb_edit_card(lith_tx *tx, void *arg);

/* Archive (1) or restore (0) card `card_id`. A restored card goes to the end
 * of its list. Bumps its move version (it left or joined the order). */
int kb_archive_card(lith_tx *tx, void *arg);

/* Move card `card_id` to list `list_id` (of the same board, not archived) at
 * `index` among that list's non-archived cards other than the card (0..n or
 * KB_END), if its move version is still `seen_version`; else KB_STALE and
 * nothing changes. The card must not be archived. Renumbers the target list
 * when the neighbours leave no room. out.version = the new move version,
 * out.index = the index it landed at. Moving a card to where it already is
 * still counts as a move (the version is bumped). */
int kb_move_card(lith_tx *tx, void *arg);

/* ---- Seed ------------------------------------------------------------------- */

typedef struct kb_seed_args {
  const int64_t *user_ids; /* in: the members (first = creator); caller's array */
  int n_users;             /* in: at least 1 */
  const char *title;       /* in: board title; NULL: "Demo board" */
  int64_t board_id;        /* out */
} kb_seed_args;

/* Create a demo board with three lists (To do, Doing, Done) and a few cards,
 * every given user a member. */
int kb_seed_demo(lith_tx *tx, void *arg /* kb_seed_args */);

/* ---- Reads (run with lith_read) -------------------------------------------- */

typedef struct kb_card {
  int64_t id;
  int64_t list_id;
  int64_t pos;     /* position in its list (the order; gaps mean nothing) */
  int64_t version; /* move version: pass it as seen_version to kb_move_card */
  int archived;
  char *title;
  char *description;
} kb_card;

typedef struct kb_list {
  int64_t id;
  int64_t pos;
  int archived;
  char *title;
  kb_card *cards; /* in order (position, then id) */
  int n_cards;
} kb_list;

typedef struct kb_member {
  int64_t user_id;
  char *name;
} kb_member;

typedef struct kb_board {
  int64_t id;
  int64_t version;
  char *title;
  kb_member *members; /* by name */
  int n_members;
  kb_list *lists; /* in order */
  int n_lists;
} kb_board;

/* Free a board from kb_read_board and everything in it (NULL is fine). */
void kb_board_free(kb_board *b);

typedef struct kb_board_query {
  int64_t user_id;  /* in: the reader; must be a member */
  int64_t board_id; /* in */
  int archived;     /* in: 1 also loads archived lists and cards */
  kb_board *board;  /* out: on LITH_OK, the caller's; free with kb_board_free */
} kb_board_query;

/* Load a whole board in one snapshot: lists in order, each with its cards in
 * order, versions, members. KB_NOT_FOUND (no such board), KB_FORBIDDEN (not a
 * member), LITH_NOMEM. */
int kb_read_board(lith_rx *rx, void *arg /* kb_board_query */);

typedef struct kb_board_version_query {
  int64_t user_id;  /* in: must be a member */
  int64_t board_id; /* in */
  int64_t version;  /* out */
} kb_board_version_query;

/* Only a board's version (cheap; e.g. for a server-sent event). */
int kb_read_board_version(lith_rx *rx, void *arg /* kb_board_version_query */);

typedef struct kb_board_summary {
  int64_t id;
  int64_t version;
  char *title;
} kb_board_summary;

typedef struct kb_boards_query {
  int64_t user_id;          /* in */
  kb_board_summary *boards; /* out: the boards user_id is a member of, by title then id;
                               the caller's, free with kb_boards_free (NULL if none) */
  int n_boards;             /* out */
} kb_boards_query;

int kb_read_boards(lith_rx *rx, void *arg /* kb_boards_query */);

/* Free kb_boards_query.boards (n entries; NULL is fine). */
void kb_boards_free(kb_board_summary *boards, int n);

typedef struct kb_user_query {
  const char *name;              /* in */
  int64_t user_id;               /* out */
  char pw_hash[KB_HASH_MAX + 1]; /* out: the stored hash string, for the server to verify */
} kb_user_query;

/* Sign-in lookup by name. KB_NOT_FOUND if no such user. */
int kb_read_user(lith_rx *rx, void *arg /* kb_user_query */);

typedef struct kb_session_query {
  const char *token_hash;     /* in */
  int64_t now_ms;             /* in: 0 for kb_now_ms() */
  int64_t user_id;            /* out */
  int64_t expires_ms;         /* out */
  char name[KB_NAME_MAX + 1]; /* out: the user's name */
} kb_session_query;

/* Session lookup by token hash. KB_NOT_FOUND if unknown or expired. */
int kb_read_session(lith_rx *rx, void *arg /* kb_session_query */);

/* ---- Outside lith (benchmark baselines, tools) ----------------------------- */

/* The same command code on a plain SQLite connection that the caller owns
 * and opened on a database with this schema: kb_plain_run(p, kb_move_card,
 * &a) runs kb_move_card's body with its statements prepared on `db` (cached
 * in p). The caller brackets it with its own BEGIN IMMEDIATE ... COMMIT; on
 * an error the caller rolls back. lith_tx_touch is not called. Used by
 * bench/kanban's per-connection baseline. `db` stays the caller's and must
 * outlive p; kb_plain_close finalizes p's statements and frees it. */
typedef struct kb_plain kb_plain;
int kb_plain_open(sqlite3 *db, kb_plain **out);
int kb_plain_run(kb_plain *p, lith_command cmd, void *arg);
const char *kb_plain_errmsg(const kb_plain *p); /* last error's message, owned by p */
void kb_plain_close(kb_plain *p);

#ifdef __cplusplus
}
#endif

#endif /* KB_BOARD_H */
