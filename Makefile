# lith — build, test, install.
#
#   make            what `make install` installs: liblith (.a, .so) and
#                   lith.pc, liblith_uv (.a, .so) and lith_uv.pc, lithd, lith, lith-node;
#                   the packages must be there (`make deps`)
#   make deps       apt-get install what pkg-config cannot find
#   make run        make deps, build, start lithd on lithd.db
#   make run-demo   the writer demo: 64 producers moving money for 5 s
#   make test       make deps, build and run every test (SANITIZE=address or
#                   thread for the same tests under ASan+UBSan or TSan)
#   make test-docs  the documentation's shell examples, run and their output compared
#                   (tools/docs.mk; also part of make test)
#   make bench      the benchmarks (bench/README.md) and their report; BENCH_ARGS=--quick for a smoke run
#   make bench-report  bench/REPORT.md: every control's verdict and the charts, from
#                   the newest results (bench/results.md); bench-record keeps them
#   make soak SOAK_MINUTES=N  lithd under load and faults (bench/soak/)
#   make soak-dqlite          dqlite failover repeated (SOAK_DQ_ROUNDS, dqlite/dqlite.mk)
#   make fuzz       libFuzzer on what lithd reads from outside (FUZZ_SECONDS each)
#   make lint       cppcheck and clang-format checks over every C file (make format fixes the style)
#   make install    PREFIX=/usr/local DESTDIR= (and the systemd units:
#                   UNITDIR, SYSUSERSDIR, LITESTREAM, tools/units.mk)
#
# The libraries, by layer (each may include only those before it):
#   include/  the public headers
#   lib/      the floor: error messages, the clock, latency buckets (libc only)
#   sqlite/   connections, statements, reads, checkpoints, backup
#   writer/   the queue, the writer thread, the calls of a command
#   uv/       liblith_uv: completions and reads delivered on a libuv loop
#             (public API only); liblith itself needs SQLite and pthreads
#
# Objects go to build/<variant>/, so sanitizer builds never mix with the
# normal one; each object's header dependencies are in its .d file.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
SANITIZE ?=
# The version lives in include/lith.h (LITH_VERSION); the soname follows its major.
VERSION := $(shell sed -n 's/^\#define LITH_VERSION "\(.*\)"$$/\1/p' include/lith.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))

PKGS      := sqlite3
UV_PKGS   := libuv
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
# Header dependencies, written beside each object (and test binary) as .d.
DEPFLAGS := -MMD -MP

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
UV_CFLAGS  = $(shell pkg-config --cflags $(UV_PKGS) 2>/dev/null)
UV_LIBS    = $(shell pkg-config --libs $(UV_PKGS) 2>/dev/null)
TEST_CFLAGS = $(shell pkg-config --cflags $(TEST_PKGS) 2>/dev/null)
TEST_LIBS   = $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)

# liblith: SQLite and pthreads only. LIB_SRC is also what the fuzz
# harnesses compile in.
LIB_SRC := $(wildcard lib/*.c sqlite/*.c writer/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
# liblith_uv: on liblith's public API and libuv.
UV_SRC  := $(wildcard uv/*.c)
UV_OBJ  := $(UV_SRC:%.c=$(B)/%.o)
# The public headers: the fragments' programs that compile and link in one
# step depend on them (objects built here track their own headers).
HDRS    := $(wildcard include/*.h)

# The core's tests: one binary per test_*.c, linked with the helpers beside
# them (test/common.c, sqlite/test/crashvfs.c) and liblith.a; uv/test's with
# liblith_uv.a and libuv too.
CORE_TEST_SRC := $(wildcard lib/test/test_*.c sqlite/test/test_*.c writer/test/test_*.c)
CORE_TEST_BIN := $(CORE_TEST_SRC:%.c=$(B)/%)
UV_TEST_SRC   := $(wildcard uv/test/test_*.c)
UV_TEST_BIN   := $(UV_TEST_SRC:%.c=$(B)/%)
TEST_HELP_SRC := test/common.c $(filter-out $(CORE_TEST_SRC),$(wildcard sqlite/test/*.c))
TEST_HELP_OBJ := $(TEST_HELP_SRC:%.c=$(B)/%.o)
# test/test_exports checks what the shared libraries export (only the API).
EXPORTS_TEST  := $(B)/test/test_exports
TEST_BIN      := $(CORE_TEST_BIN) $(UV_TEST_BIN) $(EXPORTS_TEST)

# The included fragments define rules of their own: the first would become
# the default goal. Plain `make` builds what `make install` installs.
.DEFAULT_GOAL := all

# The HTTP layer shared by lithd and kanban, lithd, the lith client, the
# kanban example, the fuzz harnesses, the test runner's own test: each
# fragment adds its test binaries.
include http/http.mk
TEST_BIN += $(HTTP_TEST_BIN)
DEBS += $(HTTP_DEBS)
include tools/lithd/lithd.mk
TEST_BIN += $(LITHD_TEST_BIN)
include tools/lith/lith.mk
TEST_BIN += $(LITH_CLI_TEST_BIN)
include clients/clients.mk
TEST_BIN += $(CLIENT_TEST_BIN)
DEBS += $(CLIENT_DEBS)
include examples/kanban/board.mk
TEST_BIN += $(KANBAN_BOARD_TEST)
include examples/kanban/server.mk
TEST_BIN += $(KANBAN_TEST_BIN)
DEBS += $(KANBAN_DEBS)
include dqlite/dqlite.mk
TEST_BIN += $(DQ_TEST_BIN)
DEBS += $(DQ_DEBS)
include tools/docs.mk
TEST_BIN += $(DOCS_TEST_BIN)
DEBS += $(DOCS_DEBS)
include tools/units.mk
TEST_BIN += $(UNITS_TEST_BIN)
DEBS += $(UNITS_DEBS)
include tools/test/runner.mk
TEST_BIN += $(RUNNER_TEST_BIN)
include bench/test/test.mk
TEST_BIN += $(BENCH_REPORT_TEST_BIN)
DEBS += $(BENCH_REPORT_DEBS)
include tools/lithd/fuzz/fuzz.mk
include http/fuzz/fuzz.mk
include tools/lith/fuzz/fuzz.mk
include examples/kanban/fuzz/fuzz.mk
include dqlite/fuzz/fuzz.mk

DEMO := $(B)/tools/lith-demo
LIBS := $(B)/liblith.a $(B)/liblith.so $(B)/liblith_uv.a $(B)/liblith_uv.so
PCS  := $(B)/lith.pc $(B)/lith_uv.pc

.SECONDARY:
.PHONY: kanban run-demo bench soak lint format all run test test-only deps deps-litestream deps-hrana install uninstall clean demo $(PCS)
all: $(LIBS) $(PCS) $(LITHD_BIN) $(LITH_CLI_BIN) $(LITH_NODE_BIN)

deps:
	@if pkg-config --exists $(PKGS) $(UV_PKGS) $(TEST_PKGS) $(APP_PKGS) $(HTTP_PKGS) $(KANBAN_PKGS) $(DQ_PKGS) 2>/dev/null && $(foreach c,sqlite3 $(DOCS_CMDS) $(UNITS_CMDS) $(BENCH_REPORT_CMDS),command -v $(c) >/dev/null &&) $(DOCS_CHECK) && $(HTTP_CHECK) && $(CLIENT_CHECK) && true; then \
	  :; \
	else \
	  echo "deps: installing $(DEBS)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEBS); \
	fi

# Litestream for tools/lithd/test/test_lithd_replica (issue 13; it skips
# without): Debian has no package, npm carries its static binary (v0.3.13).
# Into build/litestream/, whatever B is, where the test looks for it.
LITESTREAM_NPM := @flydotio/litestream-linux-x64@1.0.1
deps-litestream:
	@command -v npm >/dev/null || { echo "deps-litestream: needs npm (apt-get install npm)"; exit 1; }
	npm install --no-save --no-audit --no-fund --prefix build/litestream $(LITESTREAM_NPM)
	build/litestream/node_modules/@flydotio/litestream-linux-x64/litestream version

# The libSQL client and Drizzle for the Hrana tests (tools/lithd/test/hrana,
# issue 22; they skip without) and bench/hrana, and the other client
# families (issue 33) and drizzle-kit's CLI (issue 34): npm, the versions
# locked in that folder's package-lock.json. Into build/hrana/, whatever B
# is. No install scripts: they are sqlite3's build (knex-libsql's
# dependency, never loaded: its driver is @libsql/sqlite3), Prisma's engine
# downloads (never needed: its client and schema engine are WebAssembly,
# prisma.test.js) and esbuild's check of its binary (drizzle-kit's; the
# binary is the prebuilt @esbuild/linux-x64, drizzle-kit.test.js); libsql's
# native module is a prebuilt package, loaded once here to check it runs
# on this machine.
HRANA_NPM_DIR := tools/lithd/test/hrana
deps-hrana:
	@command -v npm >/dev/null || { echo "deps-hrana: needs npm (apt-get install npm)"; exit 1; }
	@mkdir -p build/hrana
	cp $(HRANA_NPM_DIR)/package.json $(HRANA_NPM_DIR)/package-lock.json build/hrana/
	npm ci --no-audit --no-fund --ignore-scripts --prefix build/hrana
	cd build/hrana/node_modules && for m in @libsql/client drizzle-orm/libsql drizzle-kit knex @libsql/knex-libsql kysely @libsql/kysely-libsql @tursodatabase/serverless @prisma/adapter-libsql prisma/config; do \
	  node -e "require('./$$m')" || exit 1; done
	cd build/hrana/node_modules && node -e 'new (require("./libsql"))(":memory:").close()'

# (files only: the docs' install under $(B) holds a directory sysusers.d)
-include $(shell find $(B) -name '*.d' -type f 2>/dev/null)

$(UV_OBJ): CFLAGS += $(UV_CFLAGS)
# The libraries export only what the headers mark LITH_API (test/test_exports.c).
$(LIB_OBJ) $(UV_OBJ): CFLAGS += -fvisibility=hidden

# An object also depends on the Makefile: a changed flag (say the
# visibility) rebuilds it, as a changed header does through its .d file.
$(B)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(B)/liblith.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/liblith.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,liblith.so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/liblith_uv.a: $(UV_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Linked against liblith.so: its DT_NEEDED names liblith.so.$(SOMAJOR).
$(B)/liblith_uv.so: $(UV_OBJ) $(B)/liblith.so
	$(CC) -shared -Wl,-soname,liblith_uv.so.$(SOMAJOR) $(LDFLAGS) -o $@ $(UV_OBJ) $(B)/liblith.so $(UV_LIBS)

# pkg-config files, written afresh each time (PREFIX may differ).
$(B)/lith.pc:
	@mkdir -p $(dir $@)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: lith' 'Description: single-writer SQLite command batching' 'Version: $(VERSION)' \
	  'Requires: sqlite3' 'Libs: -L$${libdir} -llith' \
	  'Libs.private: -pthread' 'Cflags: -I$${includedir}' > $@

$(B)/lith_uv.pc:
	@mkdir -p $(dir $@)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: lith_uv' 'Description: lith command completions and reads on a libuv loop' 'Version: $(VERSION)' \
	  'Requires: lith libuv' 'Libs: -L$${libdir} -llith_uv' 'Cflags: -I$${includedir}' > $@

# One rule for every core test; uv/test's link liblith_uv and libuv too.
TEST_LINK = $(B)/liblith.a $(PKG_LIBS)
$(UV_TEST_BIN): TEST_LINK = $(B)/liblith_uv.a $(B)/liblith.a $(PKG_LIBS) $(UV_LIBS)
$(UV_TEST_BIN): CFLAGS += $(UV_CFLAGS)
$(UV_TEST_BIN): $(B)/liblith_uv.a
$(CORE_TEST_BIN) $(UV_TEST_BIN): $(B)/%: %.c $(TEST_HELP_OBJ) $(B)/liblith.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itest $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) -o $@ $< $(TEST_HELP_OBJ) $(TEST_LINK) $(TEST_LIBS) $(LDFLAGS)

$(EXPORTS_TEST): test/test_exports.c $(B)/liblith.so $(B)/liblith_uv.so
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(DEPFLAGS) -DLITH_BUILD_DIR='"$(abspath $(B))"' \
	  -DLITH_SRC_DIR='"$(abspath .)"' -o $@ $< $(TEST_LIBS) $(LDFLAGS)

# Each test binary runs in its own scratch directory; the runner runs them
# all, two at a time (LITH_TEST_JOBS), and closes with one "N passed, N
# failed" line. Under TSan one at a time unless LITH_TEST_JOBS says
# otherwise: two at once there was not tried on the 2-core machine.
test: deps
	@$(MAKE) --no-print-directory test-only

test-only: $(TEST_BIN)
	@$(if $(filter thread,$(SANITIZE)),LITH_TEST_JOBS=$${LITH_TEST_JOBS:-1} )sh tools/run-tests.sh $(B) $(TEST_BIN)

$(DEMO): tools/demo.c $(B)/liblith.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) $(DEPFLAGS) -o $@ $< $(B)/liblith.a $(PKG_LIBS) $(LDFLAGS)

demo: $(DEMO)

# Benchmarks and the soak: bench/bench.mk (`make bench`, `make soak`).
include bench/bench.mk

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

# Each library as lib<name>.so.$(VERSION), with the soname and the
# development link beside it.
INSTALL_SO = install -m 755 $(B)/$(1).so $(DESTDIR)$(PREFIX)/lib/$(1).so.$(VERSION) && \
  ln -sf $(1).so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(1).so.$(SOMAJOR) && \
  ln -sf $(1).so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/$(1).so

install: all install-units
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/lith.h include/lith_uv.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(B)/liblith.a $(B)/liblith_uv.a $(DESTDIR)$(PREFIX)/lib/
	$(call INSTALL_SO,liblith)
	$(call INSTALL_SO,liblith_uv)
	install -m 644 $(PCS) $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 755 $(LITH_CLI_BIN) $(DESTDIR)$(PREFIX)/bin/lith
	install -m 755 $(LITHD_BIN) $(DESTDIR)$(PREFIX)/bin/lithd
	install -m 755 $(LITH_NODE_BIN) $(DESTDIR)$(PREFIX)/bin/lith-node

uninstall: uninstall-units
	rm -f $(DESTDIR)$(PREFIX)/include/lith.h $(DESTDIR)$(PREFIX)/include/lith_uv.h \
	  $(DESTDIR)$(PREFIX)/lib/liblith.a $(DESTDIR)$(PREFIX)/lib/liblith.so* \
	  $(DESTDIR)$(PREFIX)/lib/liblith_uv.a $(DESTDIR)$(PREFIX)/lib/liblith_uv.so* \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/lith.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/lith_uv.pc \
	  $(DESTDIR)$(PREFIX)/bin/lith $(DESTDIR)$(PREFIX)/bin/lithd \
	  $(DESTDIR)$(PREFIX)/bin/lith-node

# `make lint`: cppcheck over every C file of the tree (what build/ generates
# aside), then clang-format (.clang-format: the core's style) over every C
# file and header; any finding fails. A test's #error for a missing -D (the
# path of the binary it runs) is no finding: cppcheck also checks the
# configuration that has it. `make format` rewrites the files in that style.
LINT_SRC   = $(shell find * \( -path build -o -name node_modules \) -prune -o -name '*.c' -print | sort)
FORMAT_SRC = $(shell find * \( -path build -o -name node_modules \) -prune -o -name '*.[ch]' -print | sort)
lint:
	@cppcheck --enable=warning,style,performance,portability --std=c11 -Iinclude -Iexamples/kanban -D_GNU_SOURCE \
	  --suppress=missingIncludeSystem --suppress='preprocessorErrorDirective:*test/*.c' \
	  --inline-suppr --error-exitcode=1 -q $(LINT_SRC)
	@echo "lint: cppcheck: $(words $(LINT_SRC)) C files clean"
	@clang-format --dry-run --Werror $(FORMAT_SRC)
	@echo "lint: clang-format: $(words $(FORMAT_SRC)) files in style"

format:
	clang-format -i $(FORMAT_SRC)

clean:
	rm -rf build
