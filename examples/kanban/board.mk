# examples/kanban/board.mk — the kanban model (board.h: commands, reads,
# schema) and its cmocka test.
#
# Included by the main Makefile (after B, CFLAGS, PKG_*, TEST_* and HDRS).
# It defines:
#   KANBAN_BOARD_SRC, KANBAN_BOARD_OBJ  the model's sources and their objects
#   KANBAN_BOARD_HDRS                   its header(s)
#   KANBAN_BOARD_TEST                   the test binary, to add to TEST_BIN
# A program using the model adds -Iexamples/kanban and links
# $(KANBAN_BOARD_OBJ) $(B)/liblith.a $(PKG_LIBS) (the server and bench/kanban).

KANBAN_BOARD_SRC  := examples/kanban/board.c examples/kanban/board_read.c examples/kanban/schema.c
KANBAN_BOARD_HDRS := examples/kanban/board.h
KANBAN_BOARD_OBJ  := $(KANBAN_BOARD_SRC:%.c=$(B)/%.o)
KANBAN_BOARD_TEST := $(B)/examples/kanban/test/test_board

$(KANBAN_BOARD_OBJ): $(B)/examples/kanban/%.o: examples/kanban/%.c $(KANBAN_BOARD_HDRS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iexamples/kanban $(PKG_CFLAGS) $(CFLAGS) -c $< -o $@

$(KANBAN_BOARD_TEST): examples/kanban/test/test_board.c $(KANBAN_BOARD_OBJ) $(B)/liblith.a $(KANBAN_BOARD_HDRS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iexamples/kanban $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< $(KANBAN_BOARD_OBJ) $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)

# bench/kanban runs the model's commands (same code as the server); like every
# bench program it links bench/common.c and bench/harness.c (BENCH_CPPFLAGS:
# bench/bench.mk's, read when the rule runs).
$(B)/bench/kanban: bench/kanban.c bench/common.c bench/common.h bench/harness.c bench/harness.h $(KANBAN_BOARD_OBJ) $(B)/liblith.a $(KANBAN_BOARD_HDRS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Iexamples/kanban $(PKG_CFLAGS) $(CFLAGS) -o $@ $< bench/common.c bench/harness.c $(KANBAN_BOARD_OBJ) $(B)/liblith.a $(PKG_LIBS) $(LDFLAGS) -lm
