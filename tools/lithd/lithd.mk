# tools/lithd/lithd.mk — the lithd daemon and its HTTP test.
#
# Included by the main Makefile after http/http.mk and tools/lithd/sqljson.mk
# (it uses HTTP_OBJ, HTTP_HDRS, LITHD_SQLJSON_SRC and LITHD_SQLJSON_HDRS).
#
#   LITHD_BIN       the daemon, $(B)/tools/lithd/lithd
#   LITHD_TEST_BIN  the test binary, to add to TEST_BIN; it spawns LITHD_BIN
#                   (absolute path compiled in: tests run in a scratch dir)

LITHD_PKGS   := libh2o libuv jansson sqlite3
LITHD_CFLAGS  = $(shell pkg-config --cflags $(LITHD_PKGS) 2>/dev/null)
LITHD_LIBS    = $(shell pkg-config --libs $(LITHD_PKGS) 2>/dev/null)

LITHD_SRC      := tools/lithd/main.c tools/lithd/server.c
LITHD_HDRS     := tools/lithd/server.h $(LITHD_SQLJSON_HDRS) $(HTTP_HDRS)
LITHD_BIN      := $(B)/tools/lithd/lithd
LITHD_TEST_BIN := $(B)/tools/lithd/test/test_lithd

$(LITHD_BIN): $(LITHD_SRC) $(LITHD_SQLJSON_SRC) $(HTTP_OBJ) $(B)/liblith.a $(HDRS) $(LITHD_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Itools/lithd $(LITHD_CFLAGS) $(CFLAGS) -o $@ $(LITHD_SRC) $(LITHD_SQLJSON_SRC) $(HTTP_OBJ) $(B)/liblith.a $(LITHD_LIBS) $(LDFLAGS) -lm

$(LITHD_TEST_BIN): tools/lithd/test/test_lithd.c $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -o $@ $< $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)

lithd: $(LITHD_BIN)
.PHONY: lithd
