# tools/lithd/sqljson.mk — lithd's JSON <-> SQLite module and its tests.
#
# Included by the main Makefile (after PKG_*, TEST_*, CPPFLAGS, CFLAGS,
# LDFLAGS, HDRS and B are defined). lithd itself needs no JSON library: it
# reads JSON with json.c and writes it by hand (sqljson_encode.c, into
# buf.c's buffer). test_sqljson reads the answers back with jansson, a
# reader independent of the code under test (Debian: libjansson-dev).
#
#   LITHD_SQLJSON_SRC   the module's sources, for lithd's own link line
#   LITHD_SQLJSON_HDRS  its headers
#   LITHD_SQLJSON_TEST  the test binaries, to add to TEST_BIN: one per
#                       source with logic of its own

DEBS += libjansson-dev

JANSSON_CFLAGS = $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS   = $(shell pkg-config --libs jansson 2>/dev/null)

# The reader and what it stands on: no SQLite, no liblith.
LITHD_JSON_SRC  := tools/lithd/json.c tools/lithd/arena.c tools/lithd/utf8.c
LITHD_JSON_HDRS := tools/lithd/json.h tools/lithd/arena.h tools/lithd/utf8.h

LITHD_SQLJSON_SRC  := tools/lithd/sqljson.c tools/lithd/sqljson_parse.c tools/lithd/sqljson_run.c \
                      tools/lithd/sqljson_encode.c tools/lithd/buf.c tools/lithd/guard.c $(LITHD_JSON_SRC)
LITHD_SQLJSON_HDRS := tools/lithd/sqljson.h tools/lithd/sqljson_int.h tools/lithd/buf.h \
                      tools/lithd/guard.h $(LITHD_JSON_HDRS)
LITHD_SQLJSON_TEST := $(B)/tools/lithd/test/test_sqljson $(B)/tools/lithd/test/test_json \
                      $(B)/tools/lithd/test/test_guard $(B)/tools/lithd/test/test_utf8 \
                      $(B)/tools/lithd/test/test_buf

$(B)/tools/lithd/test/test_json: tools/lithd/test/test_json.c $(LITHD_JSON_SRC) $(LITHD_JSON_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(TEST_CFLAGS) $(CFLAGS) -o $@ $< $(LITHD_JSON_SRC) $(TEST_LIBS) $(LDFLAGS) -lm

$(B)/tools/lithd/test/test_sqljson: tools/lithd/test/test_sqljson.c $(LITHD_SQLJSON_SRC) $(LITHD_SQLJSON_HDRS) $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(PKG_CFLAGS) $(TEST_CFLAGS) $(JANSSON_CFLAGS) $(CFLAGS) -o $@ $< $(LITHD_SQLJSON_SRC) $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(JANSSON_LIBS) $(LDFLAGS) -lm

# The guard (limits, bounded functions, watchdog) against SQLite's built-ins.
$(B)/tools/lithd/test/test_guard: tools/lithd/test/test_guard.c tools/lithd/guard.c tools/lithd/guard.h $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/guard.c $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)

$(B)/tools/lithd/test/test_utf8: tools/lithd/test/test_utf8.c tools/lithd/utf8.c tools/lithd/utf8.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/utf8.c $(TEST_LIBS) $(LDFLAGS)

$(B)/tools/lithd/test/test_buf: tools/lithd/test/test_buf.c tools/lithd/buf.c tools/lithd/buf.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/buf.c $(TEST_LIBS) $(LDFLAGS)
