/*
 * schema.c — the kanban schema as lith migrations.
 *
 * Why these shapes:
 *   - cards carry board_id besides list_id so that one primary-key lookup
 *     of a card gives what the membership check needs; a card never changes
 *     board (kb_move_card refuses it), so the copy cannot drift.
 *   - cards_order (list_id, archived, pos) is the order itself: a list's
 *     visible cards are one range scan, and the neighbours of a move are a
 *     LIMIT 2 OFFSET i-1 into it.
 *   - positions are not UNIQUE: archived cards keep theirs, and a renumber
 *     rewrites a list in one UPDATE whose intermediate states would collide.
 *     The commands keep non-archived positions distinct (tested).
 *   - ops is keyed (op_id, user_id): one user's op ids can neither collide
 *     with nor reveal another user's; WITHOUT ROWID since the key is the row.
 *     op_id first, not user_id: clients make op ids begin with a time
 *     (board.h), so a batch's records land at the right edge of the tree.
 *     Keyed by user first, 100 moves of 100 people dirtied ~60 more pages
 *     per commit (measured: 86 WAL frames per 100-move commit instead of 34,
 *     commit 1.8 ms instead of 0.7 ms, FULL).
 *   - sessions are keyed by the token's hash, never the token.
 * Steps are only ever appended: a database records how many ran in
 * PRAGMA user_version (lith's migrations).
 */
#include "board.h"

static const char STEP1[] = "CREATE TABLE users("
                            " id INTEGER PRIMARY KEY,"
                            " name TEXT NOT NULL UNIQUE,"
                            " pw_hash TEXT NOT NULL,"
                            " created_ms INTEGER NOT NULL);"
                            "CREATE TABLE sessions("
                            " token_hash TEXT PRIMARY KEY,"
                            " user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
                            " created_ms INTEGER NOT NULL,"
                            " expires_ms INTEGER NOT NULL) WITHOUT ROWID;"
                            "CREATE INDEX sessions_expiry ON sessions(expires_ms);"
                            "CREATE INDEX sessions_user ON sessions(user_id);"
                            "CREATE TABLE boards("
                            " id INTEGER PRIMARY KEY,"
                            " title TEXT NOT NULL,"
                            " version INTEGER NOT NULL DEFAULT 1,"
                            " created_by INTEGER NOT NULL REFERENCES users(id),"
                            " created_ms INTEGER NOT NULL);"
                            "CREATE TABLE members("
                            " board_id INTEGER NOT NULL REFERENCES boards(id),"
                            " user_id INTEGER NOT NULL REFERENCES users(id),"
                            " added_ms INTEGER NOT NULL,"
                            " PRIMARY KEY (board_id, user_id)) WITHOUT ROWID;"
                            "CREATE INDEX members_user ON members(user_id);"
                            "CREATE TABLE lists("
                            " id INTEGER PRIMARY KEY,"
                            " board_id INTEGER NOT NULL REFERENCES boards(id),"
                            " title TEXT NOT NULL,"
                            " pos INTEGER NOT NULL,"
                            " archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)));"
                            "CREATE INDEX lists_order ON lists(board_id, pos);"
                            "CREATE TABLE cards("
                            " id INTEGER PRIMARY KEY,"
                            " board_id INTEGER NOT NULL REFERENCES boards(id),"
                            " list_id INTEGER NOT NULL REFERENCES lists(id),"
                            " title TEXT NOT NULL,"
                            " description TEXT NOT NULL DEFAULT '',"
                            " pos INTEGER NOT NULL,"
                            " archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),"
                            " version INTEGER NOT NULL DEFAULT 1,"
                            " created_by INTEGER NOT NULL REFERENCES users(id),"
                            " created_ms INTEGER NOT NULL,"
                            " updated_ms INTEGER NOT NULL);"
                            "CREATE INDEX cards_order ON cards(list_id, archived, pos);"
                            "CREATE TABLE ops("
                            " user_id INTEGER NOT NULL,"
                            " op_id TEXT NOT NULL,"
                            " kind INTEGER NOT NULL,"
                            " board_id INTEGER NOT NULL,"
                            " obj_id INTEGER NOT NULL,"
                            " version INTEGER NOT NULL,"
                            " board_version INTEGER NOT NULL,"
                            " idx INTEGER NOT NULL,"
                            " created_ms INTEGER NOT NULL,"
                            " PRIMARY KEY (op_id, user_id)) WITHOUT ROWID;"
                            "CREATE INDEX ops_age ON ops(created_ms);";

/* The content of each op: a replay asking something else is a conflict
 * (board.c, op_fp); 0 for records made before. */
static const char STEP2[] = "ALTER TABLE ops ADD COLUMN fp INTEGER NOT NULL DEFAULT 0;";

const char *const kb_migrations[] = {STEP1, STEP2};
const int kb_n_migrations = (int)(sizeof kb_migrations / sizeof kb_migrations[0]);

void kb_options_schema(lith_options *opt) {
  opt->migrations = kb_migrations;
  opt->n_migrations = kb_n_migrations;
}
