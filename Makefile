# lith — build, test, install.
#
#   make            liblith.a, liblith.so, lith.pc, lithd, lith (what install installs)
#   make run        install missing packages, build, start lithd on lithd.db
#   make run-demo   the writer demo: 64 producers moving money for 5 s
#   make test       build and run every test (SANITIZE=address or thread for
#                   the same tests under ASan+UBSan or TSan)
#   make deps       apt-get install what pkg-config cannot find
#   make bench      the benchmarks (bench/README.md); BENCH_ARGS=--quick for a smoke run
#   make soak SOAK_MINUTES=N  lithd under load and faults (bench/soak.c)
#   make fuzz       libFuzzer on what lithd reads from outside (FUZZ_SECONDS each)
#   make install    PREFIX=/usr/local DESTDIR=
#
# Objects go to build/<variant>/, so sanitizer builds never mix with the
# normal one.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
SANITIZE ?=
VERSION := 0.1.0
SOMAJOR := 0

PKGS      := sqlite3 libuv
TEST_PKGS := cmocka
APP_PKGS  := jansson
DEBS      := gcc make libc6-dev libsqlite3-dev libuv1-dev libcmocka-dev pkg-config sqlite3

ifeq ($(SANITIZE),)
  VARIANT := default
  SANFLAGS :=
else ifeq ($(SANITIZE),address)
  VARIANT := asan
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SANITIZE),thread)
  VARIANT := tsan
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
  $(error SANITIZE must be empty, address or thread)
endif

B ?= build/$(VARIANT)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -Iinclude
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 $(WARN) -fPIC -pthread $(SANFLAGS)
LDFLAGS  += -pthread $(SANFLAGS)

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
TEST_CFLAGS = $(shell pkg-config --cflags $(TEST_PKGS) 2>/dev/null)
TEST_LIBS   = $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)

LIB_SRC := $(wildcard lib/*.c sqlite/*.c writer/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
HDRS    := $(wildcard include/*.h lib/*.h sqlite/*.h writer/*.h)

TEST_SRC := $(wildcard writer/test/test_*.c sqlite/test/test_*.c)
TEST_BIN := $(TEST_SRC:%.c=$(B)/%)

# The included fragments define rules of their own: the first would become
# the default goal. Plain `make` builds what `make install` installs.
.DEFAULT_GOAL := all

# The HTTP layer shared by lithd and kanban, and lithd's parts (issue 4, in
# progress): each fragment adds its test binary.
include http/http.mk
TEST_BIN += $(HTTP_TEST_BIN)
DEBS += $(HTTP_DEBS)
include tools/lithd/sqljson.mk
TEST_BIN += $(LITHD_SQLJSON_TEST)
include tools/lithd/lithd.mk
TEST_BIN += $(LITHD_TEST_BIN)
include tools/lith/lith.mk
TEST_BIN += $(LITH_CLI_TEST_BIN)
include examples/kanban/board.mk
TEST_BIN += $(KANBAN_BOARD_TEST)
include examples/kanban/server.mk
TEST_BIN += $(KANBAN_TEST_BIN)
DEBS += $(KANBAN_DEBS)
include tools/lithd/fuzz/fuzz.mk
include http/fuzz/fuzz.mk
include tools/lith/fuzz/fuzz.mk
include examples/kanban/fuzz/fuzz.mk
TEST_HELP_SRC := $(filter-out $(TEST_SRC),$(wildcard writer/test/*.c sqlite/test/*.c))
TEST_HELP_OBJ := $(TEST_HELP_SRC:%.c=$(B)/%.o)

DEMO := $(B)/tools/lith-demo

.SECONDARY:
.PHONY: kanban run-demo bench soak lith.pc lint all run test test-only deps install uninstall clean demo
all: deps $(B)/liblith.a $(B)/liblith.so lith.pc $(LITHD_BIN) $(LITH_CLI_BIN)

deps:
	@if pkg-config --exists $(PKGS) $(TEST_PKGS) $(APP_PKGS) $(HTTP_PKGS) $(KANBAN_PKGS) 2>/dev/null && command -v sqlite3 >/dev/null; then \
	  :; \
	else \
	  echo "deps: installing $(DEBS)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEBS); \
	fi

$(B)/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -c $< -o $@

$(B)/liblith.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/liblith.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,liblith.so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

lith.pc:
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: lith' 'Description: single-writer SQLite command batching' 'Version: $(VERSION)' \
	  'Requires.private: sqlite3 libuv' 'Requires: sqlite3' 'Libs: -L$${libdir} -llith' \
	  'Libs.private: -pthread' 'Cflags: -I$${includedir}' > $@

$(B)/writer/test/test_%: writer/test/test_%.c $(TEST_HELP_OBJ) $(B)/liblith.a $(HDRS) $(wildcard writer/test/*.h sqlite/test/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iwriter/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< $(TEST_HELP_OBJ) $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)
$(B)/sqlite/test/test_%: sqlite/test/test_%.c $(TEST_HELP_OBJ) $(B)/liblith.a $(HDRS) $(wildcard writer/test/*.h sqlite/test/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iwriter/test $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< $(TEST_HELP_OBJ) $(B)/liblith.a $(PKG_LIBS) $(TEST_LIBS) $(LDFLAGS)

# Each test binary runs in its own scratch directory; the runner runs them
# all and closes with one "N passed, N failed" line.
test: deps
	@$(MAKE) --no-print-directory test-only

test-only: $(TEST_BIN)
	@sh tools/run-tests.sh $(B) $(TEST_BIN)

$(DEMO): tools/demo.c $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -o $@ $< $(B)/liblith.a $(PKG_LIBS) $(LDFLAGS)

demo: $(DEMO)

# Benchmarks: standalone programs that print tables (see bench/README.md).
BENCH_BIN := $(B)/bench/writer $(B)/bench/lithd $(B)/bench/kanban $(B)/bench/kanban_http
# Every bench program links bench/common.c: the helpers they share (bench/common.h).
$(B)/bench/%: bench/%.c bench/common.c bench/common.h $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -o $@ $< bench/common.c $(B)/liblith.a $(PKG_LIBS) $(LDFLAGS) -lm
# bench/lithd spawns lithd (absolute path compiled in, --lithd overrides); it links SQLite only.
$(B)/bench/lithd: bench/lithd.c bench/common.c bench/common.h $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -o $@ $< bench/common.c $(shell pkg-config --libs sqlite3 2>/dev/null) $(LDFLAGS) -lm
# bench/kanban_http spawns the kanban server (absolute path compiled in, --kanban overrides); SQLite only.
$(B)/bench/kanban_http: bench/kanban_http.c bench/common.c bench/common.h $(KANBAN_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -DKANBAN_PATH='"$(abspath $(KANBAN_BIN))"' -o $@ $< bench/common.c $(shell pkg-config --libs sqlite3 2>/dev/null) $(LDFLAGS) -lm

bench: deps
	@$(MAKE) --no-print-directory $(BENCH_BIN)
	$(B)/bench/writer $(BENCH_ARGS)
	$(B)/bench/lithd $(BENCH_ARGS)
	$(B)/bench/kanban $(BENCH_ARGS)
	$(B)/bench/kanban_http $(BENCH_ARGS)

# The soak: lithd for SOAK_MINUTES under transfer load, faults (SIGKILL,
# SIGSTOP, disk full on a tmpfs it mounts, vanishing clients, slowloris) and
# issue 10's attacks, checked after each (bench/README.md). Root, for the mount.
SOAK_MINUTES ?= 1
$(B)/bench/soak: bench/soak.c bench/common.c bench/common.h $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -o $@ $< bench/common.c $(shell pkg-config --libs sqlite3 2>/dev/null) $(LDFLAGS) -lm

soak: deps
	@$(MAKE) --no-print-directory $(B)/bench/soak
	$(B)/bench/soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

# The main job: lithd on lithd.db, on 127.0.0.1:8765 (ARGS adds options).
run: deps
	@$(MAKE) --no-print-directory $(LITHD_BIN)
	$(LITHD_BIN) --db lithd.db $(ARGS)

# The kanban example on kanban.db, port 8080, with a seeded demo board; it
# prints the URL and the demo sign-ins (ARGS adds options).
kanban: deps
	@$(MAKE) --no-print-directory $(KANBAN_BIN)
	$(KANBAN_BIN) --db kanban.db --port 8080 $(ARGS)

# The writer demo (what `make run` started before lithd): 64 producers for 5 s.
run-demo: deps
	@$(MAKE) --no-print-directory $(DEMO)
	$(DEMO) $(ARGS)

install: all $(LITH_CLI_BIN) $(LITHD_BIN)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/lith.h include/lith_uv.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(B)/liblith.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/liblith.so $(DESTDIR)$(PREFIX)/lib/liblith.so.$(VERSION)
	ln -sf liblith.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblith.so.$(SOMAJOR)
	ln -sf liblith.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/liblith.so
	install -m 644 lith.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 755 $(LITH_CLI_BIN) $(DESTDIR)$(PREFIX)/bin/lith
	install -m 755 $(LITHD_BIN) $(DESTDIR)$(PREFIX)/bin/lithd

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/lith.h $(DESTDIR)$(PREFIX)/include/lith_uv.h \
	  $(DESTDIR)$(PREFIX)/lib/liblith.a $(DESTDIR)$(PREFIX)/lib/liblith.so* \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/lith.pc $(DESTDIR)$(PREFIX)/bin/lith $(DESTDIR)$(PREFIX)/bin/lithd

# cppcheck over the library and tools; any finding fails.
lint:
	cppcheck --enable=warning,style,performance,portability --std=c11 -Iinclude -Iexamples/kanban -D_GNU_SOURCE \
	  --suppress=missingIncludeSystem --inline-suppr --error-exitcode=1 -q \
	  writer/*.c sqlite/*.c tools/*.c tools/lithd/*.c tools/lithd/fuzz/*.c tools/lith/*.c tools/lith/fuzz/*.c http/*.c http/fuzz/*.c bench/common.c bench/writer.c bench/lithd.c bench/kanban.c bench/kanban_http.c sqlite/test/crashvfs.c writer/test/test_powerloss.c bench/soak.c \
	  examples/kanban/*.c examples/kanban/fuzz/*.c

clean:
	rm -rf build lith.pc
