#!/bin/sh
# Run one client's test suite against a lithd binary and close with cmocka's
# lines ("[  PASSED  ] N test(s)." and, on failure, "[  FAILED  ] N test(s)"),
# which tools/run-tests.sh adds up.
#
#   run-client-tests.sh python|node|hrana CLIENTS_DIR LITHD
#
# hrana is lithd's Hrana suite with the real libSQL client and Drizzle
# (tools/lithd/test/hrana/*.test.js), their npm modules from
# LITH_HRANA_MODULES, by default build/hrana/node_modules beside CLIENTS_DIR
# (make deps-hrana). A missing interpreter (python3 older than 3.9, node
# older than 18 count as missing) or missing modules skip the suite with the
# reason and exit 0. Runs in the current directory (the runner's scratch
# directory): the suites make their own temporary directories for lithd.
set -u
lang=$1
clients=$2
LITHD=$3
export LITHD
log=output-$lang.txt

skip() {
  echo "[  SKIPPED ] clients/$lang: $1"
  exit 0
}

case $lang in
python)
  command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
    skip "python3 is $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])'), the client needs 3.9+"
  passed=0 failed=0 status=0
  # unit LOG COMMAND...: one unittest run, shown and added up
  unit() {
    out=$1
    shift
    "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$out" | tail -1)
    last=$(tail -1 "$out")
    n() { echo "$last" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
    failures=$(n failures) errors=$(n errors) skipped=$(n skipped)
    f=$((${failures:-0} + ${errors:-0}))
    p=$((${ran:-0} - f - ${skipped:-0}))
    [ "$p" -ge 0 ] || p=0 # a class's setUp error is counted but not run
    [ "$rc" -eq 0 ] || [ "$f" -ne 0 ] || f=1
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$rc" -eq 0 ] || status=$rc
  }
  # tests/test_sqlalchemy.py needs an interpreter that imports sqlalchemy:
  # PATH's python3 if it does, else Debian's /usr/bin/python3 with
  # python3-sqlalchemy (make deps) runs that file alone; with neither, it
  # fails (LITH_SQLALCHEMY_TEST=required): make test never skips it.
  sqla=python3
  if ! python3 -c 'import sqlalchemy' 2>/dev/null &&
    /usr/bin/python3 -c 'import sys, sqlalchemy; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    sqla=/usr/bin/python3
  fi
  mode=required
  [ "$sqla" = python3 ] || mode=elsewhere
  # LITH_PIP_TEST: the install tests, pip install into a fresh venv, no package index
  unit "$log" env LITH_PIP_TEST=1 LITH_SQLALCHEMY_TEST=$mode python3 -m unittest discover -v -s "$clients/python/tests"
  if [ "$sqla" != python3 ]; then
    echo "clients/python: test_sqlalchemy.py with $sqla (python3 on PATH cannot import sqlalchemy)"
    unit output-python-sqlalchemy.txt env LITH_PIP_TEST=1 LITH_SQLALCHEMY_TEST=required \
      "$sqla" -m unittest discover -v -s "$clients/python/tests" -p test_sqlalchemy.py
  fi
  ;;
node | hrana)
  command -v node >/dev/null 2>&1 || skip "node is not installed"
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 18 ] 2>/dev/null || skip "node is $(node --version), the client needs 18+"
  if [ "$lang" = node ]; then
    node --test "$clients/node/test/client.test.js" "$clients/node/test/retry.test.js" >"$log" 2>&1
    status=$?
  else
    root=$(cd "$clients/.." && pwd)
    LITH_HRANA_MODULES=${LITH_HRANA_MODULES:-$root/build/hrana/node_modules}
    export LITH_HRANA_MODULES
    for pkg in @libsql/client drizzle-orm; do
      [ -f "$LITH_HRANA_MODULES/$pkg/package.json" ] ||
        skip "$pkg is not installed in $LITH_HRANA_MODULES: run make deps-hrana"
    done
    node --test "$root/tools/lithd/test/hrana/client.test.js" "$root/tools/lithd/test/hrana/drizzle.test.js" "$root/tools/lithd/test/hrana/ws.test.js" "$root/tools/lithd/test/hrana/tls.test.js" "$root/tools/lithd/test/hrana/jwt.test.js" \
      "$root/tools/lithd/test/hrana/dqlite.test.js" "$root/tools/lithd/test/hrana/families.test.js" \
      "$root/tools/lithd/test/hrana/prisma.test.js" "$root/tools/lithd/test/hrana/drizzle-kit.test.js" \
      >"$log" 2>&1
    status=$?
  fi
  cat "$log"
  # TAP ("# pass N") or the spec reporter ("ℹ pass N")
  passed=$(sed -n 's/^\(# \|ℹ \)pass \([0-9]*\)$/\2/p' "$log" | tail -1)
  failed=$(sed -n 's/^\(# \|ℹ \)fail \([0-9]*\)$/\2/p' "$log" | tail -1)
  passed=${passed:-0}
  failed=${failed:-0}
  ;;
*)
  echo "usage: run-client-tests.sh python|node|hrana CLIENTS_DIR LITHD" >&2
  exit 2
  ;;
esac

if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1 # the suite itself failed (no lithd, a syntax error): count it
fi
echo "[==========] clients/$lang: $((passed + failed)) test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ "$failed" -ne 0 ]; then
  echo "[  FAILED  ] $failed test(s), listed above."
  exit 1
fi
exit "$status"
