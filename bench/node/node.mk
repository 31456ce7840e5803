# bench/node/node.mk — the Node.js + better-sqlite3 server of bench/lithd's node arm
# (bench/node/server.js): better-sqlite3 at the version locked in bench/node/package-lock.json,
# into build/bench-node/node_modules/ (whatever B is), where server.js looks by default.
# Included by bench/bench.mk; `make deps-bench` runs deps-bench-node.
#
# npm ci without install scripts (the tree's rule: deps-hrana too), then better-sqlite3's own
# build-release script (node-gyp rebuild --release, npm's node-gyp): its native module and the
# SQLite it bundles compiled here, against the headers of the node that runs it (npm_config_nodedir:
# the node binary's prefix when it has include/node/node.h, as Debian's and NodeSource's packages
# have; else node-gyp downloads them from nodejs.org). Its install
# script would first try prebuild-install, a download from GitHub; building here needs no network
# past the npm registry, and the module is the same one its prebuilds are (node-gyp, Release, -O3);
# node-gyp's output goes to build/bench-node/build.log (its end is shown when the build fails).
# Needs node 20+ (better-sqlite3 12's engines), npm, a C++ compiler and python3 (node-gyp); without
# node or npm it says so and does nothing, and bench/lithd skips the node arm with the line
# server.js prints (exit 2). Once installed and loading, it does nothing again until the lock changes.
# One recipe, no recursive make: it works the same from bench/bench.mk or `make -f bench/node/node.mk`.

BENCH_NODE_OUT := build/bench-node
BENCH_NODE_LOCK := bench/node/package.json bench/node/package-lock.json
# the check that the module loads under this node (an upgraded node needs a rebuild), and what it is
BENCH_NODE_CHECK := node -e "new (require('better-sqlite3'))(':memory:').close()"
BENCH_NODE_ABOUT := node -p "const D = require('better-sqlite3'); require('better-sqlite3/package.json').version + \
  ' (SQLite ' + new D(':memory:').prepare('select sqlite_version()').pluck().get() + '), node ' + process.version"

deps-bench-node:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  echo "deps-bench-node: skipped: no node or npm (Node 20+; bench/lithd skips its node arm)"; \
	elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then \
	  echo "deps-bench-node: skipped: node $$(node --version) is older than 20 (better-sqlite3 12 needs 20+)"; \
	elif cmp -s bench/node/package-lock.json $(BENCH_NODE_OUT)/package-lock.json && \
	     (cd $(BENCH_NODE_OUT) && $(BENCH_NODE_CHECK)) 2>/dev/null; then \
	  :; \
	else \
	  set -e; \
	  for c in c++ python3 make; do command -v $$c >/dev/null || \
	    { echo "deps-bench-node: needs $$c to build better-sqlite3 (apt-get install g++ python3 make)"; exit 1; }; done; \
	  mkdir -p $(BENCH_NODE_OUT); \
	  echo "cp $(BENCH_NODE_LOCK) $(BENCH_NODE_OUT)/"; cp $(BENCH_NODE_LOCK) $(BENCH_NODE_OUT)/; \
	  echo "cd $(BENCH_NODE_OUT) && npm ci --no-audit --no-fund --ignore-scripts"; \
	  (cd $(BENCH_NODE_OUT) && npm ci --no-audit --no-fund --ignore-scripts); \
	  nodedir=$$(node -p 'require("path").resolve(process.execPath, "../..")'); \
	  if [ -f $$nodedir/include/node/node.h ]; then export npm_config_nodedir=$$nodedir; fi; \
	  echo "cd $(BENCH_NODE_OUT)/node_modules/better-sqlite3 && npm_config_nodedir=$${npm_config_nodedir:-} npm run build-release > $(BENCH_NODE_OUT)/build.log 2>&1"; \
	  (cd $(BENCH_NODE_OUT)/node_modules/better-sqlite3 && npm run build-release) > $(BENCH_NODE_OUT)/build.log 2>&1 || \
	    { tail -30 $(BENCH_NODE_OUT)/build.log; echo "deps-bench-node: building better-sqlite3 failed ($(BENCH_NODE_OUT)/build.log)"; exit 1; }; \
	  (cd $(BENCH_NODE_OUT) && $(BENCH_NODE_CHECK)); \
	  echo "deps-bench-node: $(BENCH_NODE_OUT)/node_modules/better-sqlite3 $$(cd $(BENCH_NODE_OUT) && $(BENCH_NODE_ABOUT))"; \
	fi
.PHONY: deps-bench-node
