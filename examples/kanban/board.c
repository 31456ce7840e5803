/*
 * board.c — STUB: every function compiles and answers LITH_ERROR "not
 * implemented yet" so that the server can be built against board.h; the
 * implementation replaces this file.
 */
#include <stdlib.h>
#include <time.h>

#include "board.h"

#define STUB(name)                                                        \
  int name(lith_tx *tx, void *arg) {                                      \
    (void)arg;                                                            \
    return lith_tx_error(tx, LITH_ERROR, #name ": not implemented yet");  \
  }

STUB(kb_create_user)
STUB(kb_create_session)
STUB(kb_delete_session)
STUB(kb_prune)
STUB(kb_create_board)
STUB(kb_rename_board)
STUB(kb_add_member)
STUB(kb_create_list)
STUB(kb_rename_list)
STUB(kb_archive_list)
STUB(kb_create_card)
STUB(kb_edit_card)
STUB(kb_archive_card)
STUB(kb_move_card)
STUB(kb_seed_demo)

const char *kb_errstr(int rc) { return lith_errstr(rc); }

int64_t kb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kb_board_free(kb_board *b) { free(b); }
void kb_boards_free(kb_board_summary *boards, int n) { (void)n; free(boards); }
int kb_read_board(lith_rx *rx, void *arg) { (void)rx; (void)arg; return LITH_ERROR; }
int kb_read_board_version(lith_rx *rx, void *arg) { (void)rx; (void)arg; return LITH_ERROR; }
int kb_read_boards(lith_rx *rx, void *arg) { (void)rx; (void)arg; return LITH_ERROR; }
int kb_read_user(lith_rx *rx, void *arg) { (void)rx; (void)arg; return LITH_ERROR; }
int kb_read_session(lith_rx *rx, void *arg) { (void)rx; (void)arg; return LITH_ERROR; }
int kb_plain_open(sqlite3 *db, kb_plain **out) { (void)db; *out = NULL; return LITH_ERROR; }
int kb_plain_run(kb_plain *p, lith_command cmd, void *arg) { (void)p; (void)cmd; (void)arg; return LITH_ERROR; }
const char *kb_plain_errmsg(const kb_plain *p) { (void)p; return "not implemented"; }
void kb_plain_close(kb_plain *p) { (void)p; }
