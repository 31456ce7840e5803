# bench/bench.mk — the benchmarks (`make bench`) and the soak (`make soak`):
# standalone programs that print tables (see bench/README.md).
#
# Included by the main Makefile after tools/lithd/lithd.mk and
# examples/kanban/server.mk (bench/lithd and the soak spawn LITHD_BIN,
# bench/kanban_http spawns KANBAN_BIN; absolute paths compiled in, options
# override them) and http/http.mk (H1C_SRC).
#
#   BENCH_BIN     the eight C benchmark programs `make bench` runs (then
#                 bench/hrana.js, a Node program: bench-hrana below), and
#                 bench/hrana_null, the null Hrana server bench/hrana.js's
#                 arm N spawns
#   BENCH_SHARED  what the bench programs link: bench/common.c (the helpers
#                 they share), bench/net.c (the HTTP client and the server
#                 under test), bench/transfer.c (the transfer workload),
#                 bench/transfer_http.c (its HTTP and WebSocket client),
#                 http/h1client.c (reading answers) and http/test/wsclient.c
#                 (a WebSocket's handshake, lithd's tests' client). bench/kanban needs only
#                 bench/common.c; its rule is in examples/kanban/board.mk.
#   BENCH_LITH_SHARED  what the programs on liblith add (bench/writer,
#                 bench/shards, bench/growth): the transfer as a lith command.

BENCH_BIN         := $(B)/bench/writer $(B)/bench/lithd $(B)/bench/kanban $(B)/bench/kanban_http \
                     $(B)/bench/shards $(B)/bench/dqlite $(B)/bench/hrana_null $(B)/bench/growth \
                     $(B)/bench/walhold $(B)/bench/h2o_null
BENCH_SHARED      := bench/common.c bench/harness.c bench/net.c bench/transfer.c bench/transfer_http.c $(H1C_SRC) \
                     http/test/wsclient.c
BENCH_SHARED_HDRS := bench/common.h bench/harness.h bench/net.h bench/transfer.h bench/transfer_http.h http/h1client.h \
                     http/test/wsclient.h
# The harness names the commit its results come from: git describe of this tree.
BENCH_CPPFLAGS    := -DBENCH_SRCDIR='"$(abspath .)"'
BENCH_SQLITE_LIBS  = $(shell pkg-config --libs sqlite3 2>/dev/null)
BENCH_LITH_SHARED := bench/transfer_lith.c
BENCH_LITH_HDRS   := bench/transfer_lith.h

# The programs on liblith with no rule of their own: bench/writer, bench/growth.
$(B)/bench/%: bench/%.c $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(BENCH_LITH_SHARED) $(BENCH_LITH_HDRS) $(B)/liblith.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(CFLAGS) -o $@ $< $(BENCH_SHARED) $(BENCH_LITH_SHARED) $(B)/liblith.a $(PKG_LIBS) $(LDFLAGS) -lm
# bench/shards: the library arm, and its lithd arm spawns lithd (LITHD_PATH).
# `make` (all) builds it too.
$(B)/bench/shards: bench/shards.c $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(BENCH_LITH_SHARED) $(BENCH_LITH_HDRS) $(B)/liblith.a $(HDRS) $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -o $@ $< $(BENCH_SHARED) $(BENCH_LITH_SHARED) $(B)/liblith.a $(PKG_LIBS) $(LDFLAGS) -lm
all: $(B)/bench/shards
# bench/dqlite: three lith-node processes (dqlite/test/nodes.c, the tests'
# launcher), the dqlite client and writer in process, and lithd (--dqlite,
# --db) over HTTP. `make` (all) builds it too.
$(B)/bench/dqlite: bench/dqlite.c $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(DQ_TEST_HELP) $(DQW_OBJ) $(DQ_OBJ) \
                   $(DQ_HDRS) dqlite/writer.h dqlite/test/nodes.h $(LITHD_BIN) $(LITH_NODE_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp -Idqlite -Idqlite/test $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' \
	  -o $@ $< $(BENCH_SHARED) $(DQ_TEST_HELP) $(DQW_OBJ) $(DQ_OBJ) $(BENCH_SQLITE_LIBS) $(LDFLAGS) -lm
all: $(B)/bench/dqlite
# bench/h2o_null: a bare h2o server answering bench/lithd's transfer POSTs (its
# arm h2o, the baseline of lithd's CPU per request); libh2o and libuv as http/
# links them.
$(B)/bench/h2o_null: bench/h2o_null.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HTTP_CFLAGS) $(CFLAGS) -o $@ $< $(HTTP_LIBS) $(LDFLAGS)
# bench/lithd spawns lithd, bench/h2o_null and node bench/node/server.js; it
# links SQLite only.
$(B)/bench/lithd: bench/lithd.c $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(LITHD_BIN) $(B)/bench/h2o_null
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' \
	  -DH2O_NULL_PATH='"$(abspath $(B)/bench/h2o_null)"' -DNODE_SERVER_PATH='"$(abspath bench/node/server.js)"' \
	  -o $@ $< $(BENCH_SHARED) $(BENCH_SQLITE_LIBS) $(LDFLAGS) -lm
# bench/walhold spawns lithd (the WAL hold's cost); it links SQLite only.
$(B)/bench/walhold: bench/walhold.c $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -o $@ $< $(BENCH_SHARED) $(BENCH_SQLITE_LIBS) $(LDFLAGS) -lm
# bench/hrana_null: the null Hrana server (no SQL) of bench/hrana.js's arm N,
# the client's ceiling; standalone, no libraries.
$(B)/bench/hrana_null: bench/hrana_null.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS)
# bench/kanban_http spawns the kanban server; SQLite only.
$(B)/bench/kanban_http: bench/kanban_http.c $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(KANBAN_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(CFLAGS) -DKANBAN_PATH='"$(abspath $(KANBAN_BIN))"' -o $@ $< $(BENCH_SHARED) $(BENCH_SQLITE_LIBS) $(LDFLAGS) -lm

bench: deps-bench
	@$(MAKE) --no-print-directory $(BENCH_BIN)
	$(B)/bench/writer $(BENCH_ARGS)
	$(B)/bench/lithd $(BENCH_ARGS)
	$(B)/bench/kanban $(BENCH_ARGS)
	$(B)/bench/kanban_http $(BENCH_ARGS)
	$(B)/bench/shards $(BENCH_ARGS)
	$(B)/bench/dqlite $(BENCH_ARGS)
	$(B)/bench/growth $(BENCH_ARGS)
	$(B)/bench/walhold $(BENCH_ARGS)
	@$(MAKE) --no-print-directory bench-hrana
	@$(MAKE) --no-print-directory bench-report

# The report (bench/results.md): bench/REPORT.md and bench/charts/*.svg, the
# verdict of every control (bench/controls.csv) from the newest results file
# of each program in bench/results/ (bench/record/, the recorded run, when
# there is none), against the verdicts recorded for this CPU model
# (bench/verdicts.csv). bench-record keeps this run: its results files into
# bench/record/ and its verdicts into bench/verdicts.csv. bench-check: exit 1
# when a verdict drifted from the record. gnuplot draws the charts (make
# deps-bench; without it the report says which it left out).
bench-report: deps-bench
	python3 bench/report.py $(BENCH_REPORT_ARGS)
bench-record: deps-bench
	python3 bench/report.py bench/results --save bench/record --write-record $(BENCH_REPORT_ARGS)
	python3 bench/report.py bench/record $(BENCH_REPORT_ARGS)
bench-check:
	python3 bench/report.py --check $(BENCH_REPORT_ARGS)
.PHONY: bench-report bench-record bench-check

# What the benchmarks need beyond make deps: gnuplot for the report's charts
# (Debian's gnuplot-nox), the Node.js + better-sqlite3 server of bench/lithd's
# node arm (npm, bench/node/node.mk) and bench/hrana's libSQL client
# (deps-hrana).
include bench/node/node.mk
deps-bench: deps
	@command -v gnuplot >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox; }
	@$(MAKE) --no-print-directory deps-bench-node
	@$(MAKE) --no-print-directory deps-hrana || echo "deps-bench: no @libsql/client: bench/hrana will be skipped"
.PHONY: deps-bench

# bench/hrana (bench/hrana.js, Node): @libsql/client through lithd's Hrana
# endpoint (/v2/pipeline), lithd's own Node client (clients/node) and
# @libsql/client on a local file:, in one Node process; it spawns HRANA_LITHD,
# and $(B)/bench/hrana_null (built here) for its arm N, the client's ceiling.
# Needs node 18+ and build/hrana/node_modules (`make deps-hrana`); without
# them it is skipped, saying why. `make bench` runs it last, with BENCH_ARGS;
# `make bench-hrana` alone. HRANA_LITHD=PATH runs it against another lithd
# (only LITHD_BIN is built; never override LITHD_BIN for that: make would
# link the tree's objects onto PATH).
HRANA_MODULES ?= build/hrana
HRANA_LITHD   ?= $(LITHD_BIN)
bench-hrana: deps
	$(if $(filter $(LITHD_BIN),$(HRANA_LITHD)),@$(MAKE) --no-print-directory $(LITHD_BIN))
	@$(MAKE) --no-print-directory $(B)/bench/hrana_null
	@if ! command -v node >/dev/null 2>&1; then \
	  echo "bench/hrana: skipped: no node (Node 18+ runs it)"; \
	elif ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; then \
	  echo "bench/hrana: skipped: node $$(node --version) is older than 18"; \
	elif [ ! -d $(HRANA_MODULES)/node_modules/@libsql/client ]; then \
	  echo "bench/hrana: skipped: no $(HRANA_MODULES)/node_modules/@libsql/client (make deps-hrana)"; \
	else \
	  echo "node bench/hrana.js --lithd $(abspath $(HRANA_LITHD)) --modules $(abspath $(HRANA_MODULES)) --null $(abspath $(B)/bench/hrana_null) $(BENCH_ARGS)"; \
	  node bench/hrana.js --lithd $(abspath $(HRANA_LITHD)) --modules $(abspath $(HRANA_MODULES)) --null $(abspath $(B)/bench/hrana_null) $(BENCH_ARGS); \
	fi
.PHONY: bench-hrana

# The soak: lithd for SOAK_MINUTES under transfer load, faults (SIGKILL,
# SIGSTOP, disk full on a tmpfs it mounts, vanishing clients, slowloris) and
# issue 10's attacks, checked after each (bench/README.md). Root, for the mount.
# Its sources, bench/soak/: the driver, lithd under test, the load, the
# faults, the attacks, the checks, the tables (soak.h: what they share).
SOAK_MINUTES ?= 1
SOAK_SRC := bench/soak/main.c bench/soak/lithd.c bench/soak/load.c bench/soak/faults.c \
            bench/soak/attacks.c bench/soak/checks.c bench/soak/report.c
$(B)/bench/soak: $(SOAK_SRC) bench/soak/soak.h $(BENCH_SHARED) $(BENCH_SHARED_HDRS) $(LITHD_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(CFLAGS) -DLITHD_PATH='"$(abspath $(LITHD_BIN))"' -o $@ $(SOAK_SRC) $(BENCH_SHARED) $(BENCH_SQLITE_LIBS) $(LDFLAGS) -lm

soak: deps
	@$(MAKE) --no-print-directory $(B)/bench/soak
	$(B)/bench/soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)
