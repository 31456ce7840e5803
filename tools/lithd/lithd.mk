# tools/lithd/lithd.mk — the lithd daemon, its pieces' unit tests and its
# end-to-end tests.
#
# Included by the main Makefile after http/http.mk (HTTP_OBJ, HTTP_HDRS).
#
# The folders are the layers (docs/design.md, "lithd's folders"); a file
# may include those of its own folder and those below it:
#   main.c, options.c, database.c   the wiring: options, one database's pieces
#   routes/   the HTTP routes, the write queue's overflow, backup routes
#   request/  request formats: JSON, {"statements": ...}, named commands,
#             sqld's JWTs
#   sql/      the SQL policy above the stores: running a batch, the guard,
#             the heap ceiling, schema steps, parameter scan, where a text's
#             statements end (split.c)
#   store/    where the data live: the local file, the dqlite cluster
#   ops/      metrics, logs, the SQL dump, restore
#   util/     arena, buffer, bounded file reader, token, UTF-8
#
#   LITHD_BIN       the daemon, $(B)/tools/lithd/lithd
#   LITHD_TEST_BIN  the test binaries, to add to TEST_BIN: one per
#                   tools/lithd/test/test_lithd*.c, each linked with the shared
#                   helpers of tools/lithd/test/child.c (answers read by
#                   http/h1client.c, H1C_OBJ); they spawn LITHD_BIN
#                   (absolute path compiled in: tests run in a scratch dir);
#                   and the unit tests of LITHD_UNIT_TEST (below)
#   LITHD_INC       the -I flags of lithd's folders, for whatever compiles
#                   its sources (tests, fuzzers, the lith client)
#
# Every object is built once into $(B)/tools/lithd/ with -MMD (its header
# dependencies in its .d file), as the libraries' are.

# No jansson in lithd: it reads JSON with json.c and writes it by hand.
# The tests read answers back with jansson, a reader independent of the
# code under test (Debian: libjansson-dev).
DEBS += libjansson-dev
JANSSON_CFLAGS = $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS   = $(shell pkg-config --libs jansson 2>/dev/null)

# libcrypto: --auth-jwt-key-file's Ed25519 (request/jwt.c; Debian: libssl-dev).
DEBS += libssl-dev
LITHD_PKGS   := libh2o libuv sqlite3 libcrypto
LITHD_CFLAGS  = $(shell pkg-config --cflags $(LITHD_PKGS) 2>/dev/null)
LITHD_LIBS    = $(shell pkg-config --libs $(LITHD_PKGS) 2>/dev/null)
LITHD_DIRS   := tools/lithd tools/lithd/routes tools/lithd/request tools/lithd/sql tools/lithd/store \
                tools/lithd/ops tools/lithd/util
LITHD_INC    := $(addprefix -I,$(LITHD_DIRS)) -Ihttp -Idqlite

LD_DIR := tools/lithd
# The JSON reader and what it stands on: no SQLite, no liblith.
LITHD_JSON_SRC    := $(LD_DIR)/request/json.c $(LD_DIR)/util/arena.c $(LD_DIR)/util/utf8.c
# Requests in, SQL run, answers out: what the unit tests and fuzzers take.
LITHD_SQLJSON_SRC := $(LD_DIR)/request/sqljson.c $(LD_DIR)/request/sqljson_parse.c $(LD_DIR)/sql/sqljson_run.c \
                     $(LD_DIR)/request/sqljson_encode.c $(LD_DIR)/util/buf.c $(LD_DIR)/sql/guard.c \
                     $(LD_DIR)/sql/txctl.c $(LD_DIR)/sql/steps.c $(LD_DIR)/sql/split.c $(LD_DIR)/request/hrana.c \
                     $(LITHD_JSON_SRC)
LITHD_SRC := $(LD_DIR)/main.c $(LD_DIR)/options.c $(LD_DIR)/database.c \
             $(LD_DIR)/routes/server.c $(LD_DIR)/routes/overload.c $(LD_DIR)/routes/backup_http.c \
             $(LD_DIR)/routes/pieces.c $(LD_DIR)/routes/hrana_http.c $(LD_DIR)/routes/hrana_ws.c \
             $(LD_DIR)/request/commands.c $(LD_DIR)/request/jwt.c \
             $(LD_DIR)/sql/schema.c $(LD_DIR)/sql/heap.c \
             $(LD_DIR)/store/store.c $(LD_DIR)/store/local.c $(LD_DIR)/store/dqlite.c \
             $(LD_DIR)/store/dq_snapshot.c \
             $(LD_DIR)/ops/metrics.c $(LD_DIR)/ops/log.c $(LD_DIR)/ops/sqldump.c $(LD_DIR)/ops/restore.c \
             $(LD_DIR)/ops/dqlite_restore.c \
             $(LD_DIR)/util/token.c $(LD_DIR)/util/textfile.c \
             $(LITHD_SQLJSON_SRC)
LITHD_OBJ  := $(LITHD_SRC:%.c=$(B)/%.o)
lithd_obj = $(patsubst %.c,$(B)/%.o,$(1))
LITHD_BIN  := $(B)/tools/lithd/lithd

$(LITHD_OBJ): $(B)/tools/lithd/%.o: tools/lithd/%.c Makefile tools/lithd/lithd.mk
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(LITHD_INC) $(LITHD_CFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# --dqlite (store/dqlite.c): the dqlite client and writer (dqlite/dqlite.mk's
# objects, libc only: lithd links no libdqlite; named here: that file is
# included after this one).
LITHD_DQ_OBJ := $(B)/dqlite/writer.o $(B)/dqlite/wire.o $(B)/dqlite/client.o $(B)/lib/clock.o
$(LITHD_BIN): $(LITHD_OBJ) $(HTTP_OBJ) $(LITHD_DQ_OBJ) $(B)/liblith_uv.a $(B)/liblith.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(LITHD_OBJ) $(HTTP_OBJ) $(LITHD_DQ_OBJ) $(B)/liblith_uv.a $(B)/liblith.a $(LITHD_LIBS) $(HTTP_LIBS) $(LDFLAGS) -lm -lpthread

lithd: $(LITHD_BIN)
.PHONY: lithd

# ---- End-to-end tests: each spawns lithd --------------------------------
# test_lithd_dqlite: lithd --dqlite in front of three lith-node processes;
# test_lithd_attacks: one table of attacks on a local lithd and a lithd
# --dqlite; test_lithd_hrana: Hrana, its batches on both stores;
# test_lithd_migrate: what migration tools send, on both stores;
# test_lithd_dqlite_restore: lithd --dqlite --restore, and a cluster backed
# up, wiped and restored; test_lithd_dqlite_backup: backups of a cluster
# under write load; test_lithd_leader: who leads, in /metrics, /v1/stats
# and the log within 1 s of a new leader (dqlite/test/nodes.o spawns the
# nodes; the dqlite client reads the cluster).
LITHD_DQ_SRC   := $(LD_DIR)/test/test_lithd_dqlite.c $(LD_DIR)/test/test_lithd_attacks.c \
                  $(LD_DIR)/test/test_lithd_hrana.c $(LD_DIR)/test/test_lithd_migrate.c \
                  $(LD_DIR)/test/test_lithd_leader.c \
                  $(LD_DIR)/test/test_lithd_dqlite_restore.c $(LD_DIR)/test/test_lithd_dqlite_backup.c
# test_lithd_tls: https, with the test certificates of http/test/tlsgen.c
# and OpenSSL's client.
LITHD_TLS_SRC  := $(LD_DIR)/test/test_lithd_tls.c
LITHD_TLS_TEST := $(LITHD_TLS_SRC:%.c=$(B)/%)
LITHD_TEST_SRC := $(filter-out $(LITHD_DQ_SRC) $(LITHD_TLS_SRC),$(wildcard $(LD_DIR)/test/test_lithd*.c))
LITHD_TEST_BIN := $(LITHD_TEST_SRC:%.c=$(B)/%)
LITHD_DQ_TEST  := $(LITHD_DQ_SRC:%.c=$(B)/%)
LITHD_TEST_OBJ := $(B)/$(LD_DIR)/test/child.o
LITHD_TEST_DEF  = -DLITHD_PATH='"$(abspath $(LITHD_BIN))"'

$(LITHD_TEST_OBJ): $(LD_DIR)/test/child.c Makefile tools/lithd/lithd.mk
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) $(LITHD_TEST_DEF) -c $< -o $@

$(LITHD_TEST_BIN): $(B)/%: %.c $(LITHD_TEST_OBJ) $(H1C_OBJ) $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(LD_DIR)/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(JANSSON_CFLAGS) $(CFLAGS) $(DEPFLAGS) $(LITHD_TEST_DEF) -o $@ $< $(LITHD_TEST_OBJ) $(H1C_OBJ) $(PKG_LIBS) $(TEST_LIBS) $(JANSSON_LIBS) $(LDFLAGS) -lm

# (`private`: a target's flags are not inherited by its prerequisites, so
# lithd and lith-node, built on the way, never link a test's objects.)
# test_lithd_clients reads Go's keep-alive answers with http/h1client.h
# and speaks Python's WebSocket with http/test/wsclient.c.
$(B)/$(LD_DIR)/test/test_lithd_clients: $(WSC_OBJ)
$(B)/$(LD_DIR)/test/test_lithd_clients: private CPPFLAGS += -Ihttp -Ihttp/test
$(B)/$(LD_DIR)/test/test_lithd_clients: private LDFLAGS += $(WSC_OBJ)

# test_lithd_hrana_ws, test_lithd_attacks and test_lithd_jwt speak
# WebSocket with http/test/wsclient.c.
WSC_TESTS := $(B)/$(LD_DIR)/test/test_lithd_hrana_ws $(B)/$(LD_DIR)/test/test_lithd_attacks \
	$(B)/$(LD_DIR)/test/test_lithd_jwt
$(WSC_TESTS): $(WSC_OBJ)
$(WSC_TESTS): private CPPFLAGS += -Ihttp/test
$(WSC_TESTS): private LDFLAGS += $(WSC_OBJ)

# test_lithd_jwt and test_lithd_attacks mint their tokens with libcrypto
# (test/jwtmint.h).
$(B)/$(LD_DIR)/test/test_lithd_jwt $(B)/$(LD_DIR)/test/test_lithd_attacks: private LDFLAGS += $(shell pkg-config --libs libcrypto 2>/dev/null)

$(LITHD_DQ_TEST): $(B)/%: %.c $(LITHD_TEST_OBJ) $(H1C_OBJ) $(B)/dqlite/test/nodes.o $(LITHD_DQ_OBJ) $(LITHD_BIN) $(B)/tools/lith-node/lith-node
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(LD_DIR)/test -Idqlite -Idqlite/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(JANSSON_CFLAGS) $(CFLAGS) $(DEPFLAGS) $(LITHD_TEST_DEF) -o $@ $< $(LITHD_TEST_OBJ) $(H1C_OBJ) $(B)/dqlite/test/nodes.o $(B)/dqlite/wire.o $(B)/dqlite/client.o $(B)/lib/clock.o $(PKG_LIBS) $(TEST_LIBS) $(JANSSON_LIBS) $(LDFLAGS) -lm

$(LITHD_TLS_TEST): $(B)/%: %.c $(LITHD_TEST_OBJ) $(H1C_OBJ) $(TLSGEN_OBJ) $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(LD_DIR)/test -Ihttp/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(HTTP_CFLAGS) $(CFLAGS) $(DEPFLAGS) $(LITHD_TEST_DEF) -o $@ $< $(LITHD_TEST_OBJ) $(H1C_OBJ) $(TLSGEN_OBJ) $(PKG_LIBS) $(TEST_LIBS) $(HTTP_LIBS) $(LDFLAGS) -lm

# ---- Unit tests of lithd's own pieces (not spawning lithd) ----------------
# Each source with logic of its own has its test, linked with the objects it
# tests (and fakes for what it stands on, where named):
#   test_json      request/json.c           test_sqljson  request -> SQL -> answer
#   test_guard     sql/guard.c against SQLite's built-ins
#   test_utf8      util/utf8.c              test_buf      util/buf.c
#   test_overload  routes/overload.c against fakes of lith_uv_submit,
#                  lith_clock_ms and lith_http_is_gone (link seams: no
#                  writer, no HTTP)
#   test_textfile  util/textfile.c, the one bounded file reader, and token.c
#   test_metrics   ops/metrics.c on a real lith handle, without an HTTP server
#   test_options   options.c's table walked: --help, the config file, the
#                  modes (docs/lithd.md's table against --help: test-docs)
#   test_jwt       request/jwt.c: keys, grants, every forged token (test/jwtmint.h)
#   test_split     sql/split.c against sqlite3_complete (test/split_ref.h),
#                  and its time, linear in the text
LITHD_UNIT_TEST := $(addprefix $(B)/$(LD_DIR)/test/,test_json test_sqljson test_guard test_utf8 test_buf \
                   test_overload test_textfile test_metrics test_options test_split test_jwt)
LITHD_TEST_BIN  += $(LITHD_UNIT_TEST) $(LITHD_DQ_TEST) $(LITHD_TLS_TEST)

# What each unit test links, besides its own .c.
UNIT_test_json      := $(LITHD_JSON_SRC)
UNIT_test_sqljson   := $(LITHD_SQLJSON_SRC)
UNIT_test_guard     := $(LD_DIR)/sql/guard.c
UNIT_test_utf8      := $(LD_DIR)/util/utf8.c
UNIT_test_buf       := $(LD_DIR)/util/buf.c
UNIT_test_overload  := $(LD_DIR)/routes/overload.c
UNIT_test_textfile  := $(LD_DIR)/util/textfile.c $(LD_DIR)/util/token.c
UNIT_test_metrics   := $(LD_DIR)/ops/metrics.c $(LD_DIR)/util/buf.c
UNIT_test_options   := $(LD_DIR)/options.c $(LD_DIR)/ops/log.c $(LD_DIR)/util/textfile.c $(LD_DIR)/util/utf8.c
UNIT_test_split     := $(LD_DIR)/sql/split.c
UNIT_test_jwt       := $(LD_DIR)/request/jwt.c $(LD_DIR)/util/textfile.c $(LITHD_JSON_SRC)
# What beyond libc and cmocka each one needs.
UNIT_LINK_test_sqljson  := $(B)/liblith.a $(JANSSON_LIBS)
UNIT_LINK_test_guard    := $(B)/liblith.a
UNIT_LINK_test_overload := $(shell pkg-config --libs libuv 2>/dev/null)
UNIT_LINK_test_metrics  := $(HTTP_OBJ) $(B)/liblith.a $(LITHD_LIBS) $(HTTP_LIBS)
UNIT_LINK_test_jwt      := $(shell pkg-config --libs libcrypto 2>/dev/null)

define LITHD_UNIT_RULE
$(B)/$(LD_DIR)/test/$(1): $(LD_DIR)/test/$(1).c $$(call lithd_obj,$$(UNIT_$(1))) $(B)/liblith.a $(HTTP_OBJ) Makefile tools/lithd/lithd.mk
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CPPFLAGS) $$(LITHD_INC) $$(LITHD_CFLAGS) $$(TEST_CFLAGS) $$(JANSSON_CFLAGS) $$(CFLAGS) $$(DEPFLAGS) -o $$@ $$< $$(call lithd_obj,$$(UNIT_$(1))) $$(UNIT_LINK_$(1)) $$(PKG_LIBS) $$(TEST_LIBS) $$(LDFLAGS) -lm
endef
$(foreach t,$(notdir $(LITHD_UNIT_TEST)),$(eval $(call LITHD_UNIT_RULE,$(t))))
