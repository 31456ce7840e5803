# tools/lith/lith.mk — `lith`, the command-line client of lithd, and its test.
#
# Included by the main Makefile after tools/lithd/lithd.mk (the test spawns
# LITHD_BIN). The client needs jansson and OpenSSL (https) only (no h2o, no liblith): it talks
# to lithd over HTTP (reading answers with http/h1client.c, libc only), and
# takes LITH_VERSION from include/lith.h.
#
#   LITH_CLI_BIN       the client, $(B)/tools/lith/lith
#   LITH_CLI_TEST_BIN  the test binary, to add to TEST_BIN; it spawns both
#                      binaries (absolute paths compiled in: tests run in a
#                      scratch directory)

LITH_CLI_CFLAGS = $(shell pkg-config --cflags jansson libssl libcrypto 2>/dev/null)
LITH_CLI_LIBS   = $(shell pkg-config --libs jansson libssl libcrypto 2>/dev/null)

LITH_CLI_SRC      := tools/lith/main.c tools/lith/client.c http/h1client.c tools/lithd/util/token.c tools/lithd/util/textfile.c
LITH_CLI_HDRS     := tools/lith/client.h http/h1client.h tools/lithd/util/token.h tools/lithd/util/textfile.h include/lith.h
LITH_CLI_BIN      := $(B)/tools/lith/lith
LITH_CLI_TEST_BIN := $(B)/tools/lith/test/test_lith_cli

$(LITH_CLI_BIN): $(LITH_CLI_SRC) $(LITH_CLI_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lith -Itools/lithd/util -Ihttp $(PKG_CFLAGS) $(LITH_CLI_CFLAGS) $(CFLAGS) -o $@ $(LITH_CLI_SRC) $(LITH_CLI_LIBS) $(LDFLAGS) -lm

# The test links client.c too, to test URL parsing and the HTTP reader
# directly (against canned answers) besides running the binary.
$(LITH_CLI_TEST_BIN): tools/lith/test/test_lith_cli.c tools/lith/client.c http/h1client.c $(LITH_CLI_HDRS) $(TLSGEN_OBJ) $(LITH_CLI_BIN) $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lith -Ihttp -Ihttp/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(LITH_CLI_CFLAGS) $(CFLAGS) \
	  -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -DLITH_CLI_PATH='"$(abspath $(LITH_CLI_BIN))"' \
	  -o $@ $< tools/lith/client.c http/h1client.c $(TLSGEN_OBJ) $(PKG_LIBS) $(TEST_LIBS) $(LITH_CLI_LIBS) $(LDFLAGS)

lith-cli: $(LITH_CLI_BIN)
.PHONY: lith-cli
