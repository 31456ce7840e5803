# tools/lithd/sqljson.mk — lithd's JSON <-> SQLite module and its test.
#
# Included by the main Makefile (after PKG_*, TEST_*, CPPFLAGS, CFLAGS,
# LDFLAGS, HDRS and B are defined). jansson comes from pkg-config
# (Debian: libjansson-dev).
#
#   LITHD_SQLJSON_SRC   the module's sources, for lithd's own link line
#   LITHD_SQLJSON_TEST  the test binary, to add to TEST_BIN

DEBS += libjansson-dev

JANSSON_CFLAGS = $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS   = $(shell pkg-config --libs jansson 2>/dev/null)

LITHD_SQLJSON_SRC  := tools/lithd/sqljson.c tools/lithd/json.c tools/lithd/arena.c tools/lithd/guard.c
LITHD_SQLJSON_HDRS := tools/lithd/sqljson.h tools/lithd/json.h tools/lithd/arena.h tools/lithd/guard.h
LITHD_SQLJSON_TEST := $(B)/tools/lithd/test/test_sqljson $(B)/tools/lithd/test/test_json $(B)/tools/lithd/test/test_guard

$(B)/tools/lithd/test/test_json: tools/lithd/test/test_json.c tools/lithd/json.c tools/lithd/arena.c tools/lithd/json.h tools/lithd/arena.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lithd $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/json.c tools/lithd/arena.c $(TEST_LIBS) $(LDFLAGS) -lm

$(B)/tools/lithd/test/test_sqljson: tools/lithd/test/test_sqljson.c $(LITHD_SQLJSON_SRC) $(LITHD_SQLJSON_HDRS) $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(TEST_CFLAGS) $(JANSSON_CFLAGS) $(CFLAGS) -o $@ $< $(LITHD_SQLJSON_SRC) $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(JANSSON_LIBS) $(LDFLAGS) -lm

# The guard (limits, bounded functions, watchdog) against SQLite's built-ins.
$(B)/tools/lithd/test/test_guard: tools/lithd/test/test_guard.c tools/lithd/guard.c tools/lithd/guard.h $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< tools/lithd/guard.c $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)
