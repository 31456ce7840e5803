# dqlite/dqlite.mk — the dqlite client (issue 14), lith-node, their tests.
#
# Included by the main Makefile after $(B), CFLAGS and TEST_* are set.
#   DQ_SRC, DQ_OBJ   the client: dqlite/wire.c (the protocol, no I/O) and
#                    dqlite/client.c (blocking TCP); libc only (lib/clock.c)
#   LITH_NODE_BIN    tools/lith-node: one dqlite node (libdqlite)
#   DQ_TEST_BIN      the tests, to add to TEST_BIN: dqlite/test/test_wire
#                    (no node), dqlite/test/test_client (one lith-node, fake
#                    nodes; SQLite opens a node's dump) and tools/lith-node/test/test_lith_node (three,
#                    twice; with the writer); the last two spawn
#                    LITH_NODE_BIN (absolute path compiled in)
#   DQW_OBJ          the batching writer onto a cluster (dqlite/writer.c,
#                    a thread; needs $(DQ_OBJ) too)
#   DQ_PKGS, DQ_DEBS what `make deps` checks and installs
# A program using the client adds -Idqlite and links $(DQ_OBJ).

DQ_PKGS := dqlite
DQ_DEBS := libdqlite-dev
DQ_CFLAGS = $(shell pkg-config --cflags $(DQ_PKGS) 2>/dev/null)
DQ_LIBS   = $(shell pkg-config --libs $(DQ_PKGS) 2>/dev/null)

DQ_SRC  := dqlite/wire.c dqlite/client.c lib/clock.c
DQ_OBJ  := $(B)/dqlite/wire.o $(B)/dqlite/client.o $(B)/lib/clock.o
DQ_HDRS := dqlite/wire.h dqlite/client.h
DQW_OBJ := $(B)/dqlite/writer.o
DQ_TEST_HELP := $(B)/dqlite/test/nodes.o

LITH_NODE_BIN := $(B)/tools/lith-node/lith-node
DQ_TEST_BIN   := $(B)/dqlite/test/test_wire $(B)/dqlite/test/test_client $(B)/tools/lith-node/test/test_lith_node \
                 $(B)/dqlite/test/test_writer

# lith-node calls SQLite itself (sqlite3_auto_extension: the statement
# guard), so it links the system libsqlite3, the one libdqlite uses.
$(LITH_NODE_BIN): tools/lith-node/main.c $(DQ_OBJ) $(DQ_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Idqlite $(DQ_CFLAGS) $(CFLAGS) $(DEPFLAGS) -o $@ $< $(DQ_OBJ) $(DQ_LIBS) \
	  $(shell pkg-config --libs sqlite3 2>/dev/null) $(LDFLAGS)

$(DQ_TEST_HELP): dqlite/test/nodes.c dqlite/test/nodes.h $(DQ_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Idqlite $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) -DLITH_NODE_PATH='"$(abspath $(LITH_NODE_BIN))"' -c $< -o $@

$(B)/dqlite/test/test_wire: dqlite/test/test_wire.c $(B)/dqlite/wire.o dqlite/wire.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Idqlite $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) -o $@ $< $(B)/dqlite/wire.o $(TEST_LIBS) $(LDFLAGS)

$(B)/dqlite/test/test_client: $(B)/%: %.c $(DQ_TEST_HELP) $(DQ_OBJ) $(DQ_HDRS) $(LITH_NODE_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Idqlite -Idqlite/test $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) \
	  -DLITH_NODE_PATH='"$(abspath $(LITH_NODE_BIN))"' -o $@ $< $(DQ_TEST_HELP) $(DQ_OBJ) $(TEST_LIBS) \
	  $(shell pkg-config --libs sqlite3 2>/dev/null) $(LDFLAGS)

# test_lith_node also runs the writer (a write beside a slow statement).
$(B)/tools/lith-node/test/test_lith_node: $(B)/%: %.c $(DQ_TEST_HELP) $(DQW_OBJ) $(DQ_OBJ) $(DQ_HDRS) dqlite/writer.h $(LITH_NODE_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Idqlite -Idqlite/test $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) \
	  -DLITH_NODE_PATH='"$(abspath $(LITH_NODE_BIN))"' -o $@ $< $(DQ_TEST_HELP) $(DQW_OBJ) $(DQ_OBJ) $(TEST_LIBS) $(LDFLAGS)

$(DQW_OBJ): dqlite/writer.h $(DQ_HDRS)

# test_writer: three lith-node processes and the writer (dqlite/writer.h).
$(B)/dqlite/test/test_writer: dqlite/test/test_writer.c $(DQ_TEST_HELP) $(DQW_OBJ) $(DQ_OBJ) $(DQ_HDRS) dqlite/writer.h $(LITH_NODE_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Idqlite -Idqlite/test $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) \
	  -o $@ $< $(DQ_TEST_HELP) $(DQW_OBJ) $(DQ_OBJ) $(TEST_LIBS) $(LDFLAGS)

lith-node: $(LITH_NODE_BIN)
.PHONY: lith-node

# The longer failover run (issue 14: "longer in a make soak-style target"):
# test_writer's leader SIGKILL, catch-up and money check repeated
# SOAK_DQ_ROUNDS times on one cluster (make test runs it once): 5 rounds
# took 30 s for the whole file on 2026-12-01.
SOAK_DQ_ROUNDS ?= 20
soak-dqlite: $(B)/dqlite/test/test_writer
	LITH_DQW_ROUNDS=$(SOAK_DQ_ROUNDS) sh tools/run-tests.sh $(B) $(B)/dqlite/test/test_writer
.PHONY: soak-dqlite
