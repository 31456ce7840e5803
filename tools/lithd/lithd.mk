# tools/lithd/lithd.mk — the lithd daemon and its end-to-end tests.
#
# Included by the main Makefile after http/http.mk and tools/lithd/sqljson.mk
# (it uses HTTP_OBJ, HTTP_HDRS, LITHD_SQLJSON_SRC and LITHD_SQLJSON_HDRS).
#
#   LITHD_BIN       the daemon, $(B)/tools/lithd/lithd
#   LITHD_TEST_BIN  the test binaries, to add to TEST_BIN: one per
#                   tools/lithd/test/test_lithd*.c, each linked with the shared
#                   helpers of tools/lithd/test/child.c (answers read by
#                   http/h1client.c, H1C_OBJ); they spawn LITHD_BIN
#                   (absolute path compiled in: tests run in a scratch dir);
#                   and the unit tests of LITHD_UNIT_TEST (below)

# No jansson: lithd reads JSON with json.c and writes it by hand.
LITHD_PKGS   := libh2o libuv sqlite3
LITHD_CFLAGS  = $(shell pkg-config --cflags $(LITHD_PKGS) 2>/dev/null)
LITHD_LIBS    = $(shell pkg-config --libs $(LITHD_PKGS) 2>/dev/null)

LITHD_SRC      := tools/lithd/main.c tools/lithd/database.c tools/lithd/server.c tools/lithd/overload.c \
                  tools/lithd/metrics.c tools/lithd/options.c tools/lithd/log.c \
                  tools/lithd/schema.c tools/lithd/commands.c tools/lithd/token.c \
                  tools/lithd/textfile.c tools/lithd/heap.c \
                  tools/lithd/backup_http.c tools/lithd/sqldump.c tools/lithd/restore.c \
                  tools/lithd/dq.c tools/lithd/sqljson_dq.c tools/lithd/sqlparams.c
LITHD_HDRS     := tools/lithd/database.h tools/lithd/server.h tools/lithd/overload.h tools/lithd/metrics.h \
                  tools/lithd/options.h tools/lithd/log.h tools/lithd/schema.h \
                  tools/lithd/commands.h tools/lithd/token.h tools/lithd/textfile.h \
                  tools/lithd/heap.h tools/lithd/backup_http.h tools/lithd/sqldump.h \
                  tools/lithd/restore.h tools/lithd/dq.h tools/lithd/sqljson_dq.h tools/lithd/sqlparams.h \
                  $(LITHD_SQLJSON_HDRS) $(HTTP_HDRS) dqlite/wire.h dqlite/client.h dqlite/writer.h
LITHD_BIN      := $(B)/tools/lithd/lithd
LITHD_TEST_SRC := $(filter-out tools/lithd/test/test_lithd_dqlite.c,$(wildcard tools/lithd/test/test_lithd*.c))
LITHD_TEST_BIN := $(LITHD_TEST_SRC:%.c=$(B)/%)
# test_lithd_dqlite: lithd --dqlite in front of three lith-node processes
# (dqlite/test/nodes.o spawns them; the dqlite client reads the cluster).
LITHD_DQ_TEST  := $(B)/tools/lithd/test/test_lithd_dqlite
LITHD_TEST_OBJ := $(B)/tools/lithd/test/child.o
LITHD_TEST_DEF  = -DLITHD_PATH='"$(abspath $(LITHD_BIN))"'
# The tests read lithd's JSON log lines with jansson (lithd itself links none).
LITHD_TEST_JSON_CFLAGS = $(shell pkg-config --cflags jansson 2>/dev/null)
LITHD_TEST_JSON_LIBS   = $(shell pkg-config --libs jansson 2>/dev/null)

# --dqlite (dq.c): the dqlite client and writer (dqlite/dqlite.mk's objects,
# libc only: lithd links no libdqlite; named here: that file is included
# after this one).
LITHD_DQ_OBJ := $(B)/dqlite/writer.o $(B)/dqlite/wire.o $(B)/dqlite/client.o $(B)/lib/clock.o
$(LITHD_BIN): $(LITHD_SRC) $(LITHD_SQLJSON_SRC) $(HTTP_OBJ) $(LITHD_DQ_OBJ) $(B)/liblith_uv.a $(B)/liblith.a $(HDRS) $(LITHD_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Itools/lithd -Idqlite $(LITHD_CFLAGS) $(CFLAGS) -o $@ $(LITHD_SRC) $(LITHD_SQLJSON_SRC) $(HTTP_OBJ) $(LITHD_DQ_OBJ) $(B)/liblith_uv.a $(B)/liblith.a $(LITHD_LIBS) $(LDFLAGS) -lm -lpthread

$(LITHD_TEST_OBJ): tools/lithd/test/child.c tools/lithd/test/child.h http/h1client.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(LITHD_TEST_DEF) -c $< -o $@

$(LITHD_TEST_BIN): $(B)/%: %.c $(LITHD_TEST_OBJ) $(H1C_OBJ) tools/lithd/test/child.h $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(LITHD_TEST_JSON_CFLAGS) $(CFLAGS) $(LITHD_TEST_DEF) -o $@ $< $(LITHD_TEST_OBJ) $(H1C_OBJ) $(PKG_LIBS) $(TEST_LIBS) $(LITHD_TEST_JSON_LIBS) $(LDFLAGS) -lm

$(LITHD_DQ_TEST): tools/lithd/test/test_lithd_dqlite.c $(LITHD_TEST_OBJ) $(H1C_OBJ) $(B)/dqlite/test/nodes.o $(LITHD_DQ_OBJ) tools/lithd/test/child.h dqlite/test/nodes.h dqlite/client.h $(LITHD_BIN) $(B)/tools/lith-node/lith-node
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd/test -Idqlite -Idqlite/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(LITHD_TEST_DEF) -o $@ $< $(LITHD_TEST_OBJ) $(H1C_OBJ) $(B)/dqlite/test/nodes.o $(B)/dqlite/wire.o $(B)/dqlite/client.o $(B)/lib/clock.o $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS) -lm

lithd: $(LITHD_BIN)
.PHONY: lithd

# Unit tests of lithd's own pieces (not spawning lithd): each source with
# logic of its own has its test; LITHD_UNIT_TEST goes to TEST_BIN with
# LITHD_TEST_BIN.
#   test_overload  overload.c against fakes of lith_uv_submit, lith_clock_ms
#                  and lith_http_is_gone (link seams: no writer, no HTTP)
#   test_textfile  textfile.c, the one bounded file reader, and token.c
#   test_metrics   metrics.c on a real lith handle, without an HTTP server
#   test_sqlparams sqlparams.c against SQLite's own parameter numbering
LITHD_UNIT_TEST := $(B)/tools/lithd/test/test_overload $(B)/tools/lithd/test/test_textfile \
                   $(B)/tools/lithd/test/test_metrics $(B)/tools/lithd/test/test_sqlparams
LITHD_TEST_BIN  += $(LITHD_UNIT_TEST) $(LITHD_DQ_TEST)

$(B)/tools/lithd/test/test_overload: tools/lithd/test/test_overload.c tools/lithd/overload.c tools/lithd/overload.h $(HDRS) $(HTTP_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Itools/lithd $(LITHD_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/overload.c $(shell pkg-config --libs libuv 2>/dev/null) $(TEST_LIBS) $(LDFLAGS)

$(B)/tools/lithd/test/test_textfile: tools/lithd/test/test_textfile.c tools/lithd/textfile.c tools/lithd/textfile.h tools/lithd/token.c tools/lithd/token.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/textfile.c tools/lithd/token.c $(TEST_LIBS) $(LDFLAGS)

$(B)/tools/lithd/test/test_metrics: tools/lithd/test/test_metrics.c tools/lithd/metrics.c tools/lithd/metrics.h tools/lithd/buf.c tools/lithd/buf.h $(HTTP_OBJ) $(B)/liblith.a $(HDRS) $(HTTP_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Itools/lithd $(LITHD_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/metrics.c tools/lithd/buf.c $(HTTP_OBJ) $(B)/liblith.a $(LITHD_LIBS) $(TEST_LIBS) $(LDFLAGS)

$(B)/tools/lithd/test/test_sqlparams: tools/lithd/test/test_sqlparams.c tools/lithd/sqlparams.c tools/lithd/sqlparams.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/sqlparams.c $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)
