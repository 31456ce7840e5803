# http/http.mk — the HTTP layer shared by lithd and examples/kanban
# (http/http.h), on h2o 2.2.5 (libuv flavour), libuv and OpenSSL (TLS).
#
# Included by the main Makefile after $(B), CFLAGS, PKG_* and TEST_* are set.
# It defines:
#   HTTP_SRC, HTTP_OBJ   the layer's sources and their objects in $(B)
#   HTTP_CFLAGS/LIBS     pkg-config for libh2o and libuv
#   HTTP_TEST_BIN        the test binaries, to add to TEST_BIN: one per
#                        http/test/test_*.c (mirroring http/*.c), each linked
#                        with the shared fixture and raw client of
#                        http/test/helper.c
#   HTTP_PKGS, HTTP_DEBS what `make deps` must check and install (and
#                        HTTP_CHECK, a test for what pkg-config cannot find)
# A program using the layer adds -Ihttp, links $(HTTP_OBJ) and $(HTTP_LIBS).

HTTP_PKGS := libh2o libuv libssl libcrypto
HTTP_DEBS := libh2o-dev libuv1-dev libssl-dev

HTTP_CFLAGS = $(shell pkg-config --cflags $(HTTP_PKGS) 2>/dev/null)
HTTP_LIBS   = $(shell pkg-config --libs $(HTTP_PKGS) 2>/dev/null)
# WebSocket (websocket.c): h2o's framing is wslay's, whose -dev package has no
# .pc file; its header is what <h2o/websocket.h> includes.
HTTP_DEBS  += libwslay-dev
HTTP_LIBS  += -lwslay
# what make deps checks besides pkg-config (no .pc to ask)
HTTP_CHECK := test -f /usr/include/wslay/wslay.h

# http/h1client.c is not the server's: a libc-only HTTP/1.1 answer reader
# for clients (the lith CLI, tests, benchmarks), which link H1C_OBJ or
# compile H1C_SRC (-Ihttp).
H1C_SRC   := http/h1client.c
H1C_OBJ   := $(B)/http/h1client.o
HTTP_SRC  := $(filter-out $(H1C_SRC),$(wildcard http/*.c))
HTTP_OBJ  := $(HTTP_SRC:%.c=$(B)/%.o)
HTTP_HDRS := $(wildcard http/*.h)
HTTP_TEST_SRC := $(wildcard http/test/test_*.c)
HTTP_TEST_BIN := $(HTTP_TEST_SRC:%.c=$(B)/%)
# tlsgen.o: the TLS tests' certificates (libcrypto), for lithd's and the
# CLI's tests too.
TLSGEN_OBJ    := $(B)/http/test/tlsgen.o
# wsclient.o: a raw WebSocket client, for lithd's Hrana tests too.
WSC_OBJ       := $(B)/http/test/wsclient.o
HTTP_TEST_OBJ := $(B)/http/test/helper.o $(TLSGEN_OBJ) $(WSC_OBJ)

$(B)/http/%.o: http/%.c Makefile http/http.mk
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(HTTP_CFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(B)/http/test/%.o: http/test/%.c http/test/%.h $(HTTP_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(HTTP_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -c $< -o $@

# One rule for every test; test_h1client needs only H1C_OBJ, the others the
# server (HTTP_OBJ) and the helper.
$(B)/http/test/test_%: http/test/test_%.c $(HTTP_TEST_OBJ) $(HTTP_OBJ) $(H1C_OBJ) http/test/helper.h http/test/tlsgen.h $(HTTP_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Ihttp/test $(PKG_CFLAGS) $(HTTP_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< $(HTTP_TEST_OBJ) $(HTTP_OBJ) $(H1C_OBJ) $(PKG_LIBS) $(HTTP_LIBS) $(TEST_LIBS) $(LDFLAGS)
