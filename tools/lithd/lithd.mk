# tools/lithd/lithd.mk — the lithd daemon and its end-to-end tests.
#
# Included by the main Makefile after http/http.mk and tools/lithd/sqljson.mk
# (it uses HTTP_OBJ, HTTP_HDRS, LITHD_SQLJSON_SRC and LITHD_SQLJSON_HDRS).
#
#   LITHD_BIN       the daemon, $(B)/tools/lithd/lithd
#   LITHD_TEST_BIN  the test binaries, to add to TEST_BIN: one per
#                   tools/lithd/test/test_lithd*.c, each linked with the shared
#                   helpers of tools/lithd/test/child.c; they spawn LITHD_BIN
#                   (absolute path compiled in: tests run in a scratch dir)

LITHD_PKGS   := libh2o libuv jansson sqlite3
LITHD_CFLAGS  = $(shell pkg-config --cflags $(LITHD_PKGS) 2>/dev/null)
LITHD_LIBS    = $(shell pkg-config --libs $(LITHD_PKGS) 2>/dev/null)

LITHD_SRC      := tools/lithd/main.c tools/lithd/server.c tools/lithd/options.c \
                  tools/lithd/log.c tools/lithd/schema.c tools/lithd/commands.c \
                  tools/lithd/token.c tools/lithd/textfile.c tools/lithd/heap.c
LITHD_HDRS     := tools/lithd/server.h tools/lithd/options.h tools/lithd/log.h \
                  tools/lithd/schema.h tools/lithd/commands.h tools/lithd/token.h tools/lithd/textfile.h \
                  tools/lithd/heap.h \
                  $(LITHD_SQLJSON_HDRS) $(HTTP_HDRS)
LITHD_BIN      := $(B)/tools/lithd/lithd
LITHD_TEST_SRC := $(wildcard tools/lithd/test/test_lithd*.c)
LITHD_TEST_BIN := $(LITHD_TEST_SRC:%.c=$(B)/%)
LITHD_TEST_OBJ := $(B)/tools/lithd/test/child.o
LITHD_TEST_DEF  = -DLITHD_PATH='"$(abspath $(LITHD_BIN))"'

$(LITHD_BIN): $(LITHD_SRC) $(LITHD_SQLJSON_SRC) $(HTTP_OBJ) $(B)/liblith_uv.a $(B)/liblith.a $(HDRS) $(LITHD_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Itools/lithd $(LITHD_CFLAGS) $(CFLAGS) -o $@ $(LITHD_SRC) $(LITHD_SQLJSON_SRC) $(HTTP_OBJ) $(B)/liblith_uv.a $(B)/liblith.a $(LITHD_LIBS) $(LDFLAGS) -lm

$(LITHD_TEST_OBJ): tools/lithd/test/child.c tools/lithd/test/child.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(LITHD_TEST_DEF) -c $< -o $@

$(LITHD_TEST_BIN): $(B)/%: %.c $(LITHD_TEST_OBJ) tools/lithd/test/child.h $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(LITHD_TEST_DEF) -o $@ $< $(LITHD_TEST_OBJ) $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)

lithd: $(LITHD_BIN)
.PHONY: lithd
