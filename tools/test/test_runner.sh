#!/bin/sh
# tools/run-tests.sh's own test: its time limit. Run by `make test`
# (tools/test/runner.mk) in its scratch directory:
#
#   test_runner.sh RUN_TESTS_SH
#
# Three fake test binaries run under LITH_TEST_TIMEOUT=2,
# LITH_TEST_KILL_AFTER=1: `hang` starts a child that ignores SIGTERM and
# sleeps for ever (SIGTERM ends it, not its child); `stubborn` ignores
# SIGTERM itself (only SIGKILL ends it); `ok` passes two tests. The runner
# must name each hung binary and its limit (and the test it was in), count
# each failed, go on to `ok`, close with "2 passed, 2 failed", exit
# non-zero, and leave none of their processes running. Stopped by a
# signal, the runner kills the binary running (and its children) too.
# Closes with
# cmocka's lines, which the outer runner adds up.
set -u
runner=$1
n_ok=0
n_bad=0
check() { # check WHAT COMMAND...: one test
  what=$1
  shift
  if "$@"; then
    echo "[       OK ] $what"
    n_ok=$((n_ok + 1))
  else
    echo "[  FAILED  ] $what"
    n_bad=$((n_bad + 1))
  fi
}

here=$(pwd)
rm -rf b pids
mkdir -p b pids
cat >b/hang <<EOF
#!/bin/sh
echo \$\$ >"$here/pids/hang"
echo "[ RUN      ] test_hangs"
sh -c 'trap "" TERM; echo \$\$ >"$here/pids/hang-child"; while :; do sleep 1; done' &
while :; do sleep 1; done
EOF
cat >b/stubborn <<EOF
#!/bin/sh
trap '' TERM
echo \$\$ >"$here/pids/stubborn"
echo "[ RUN      ] test_ignores_sigterm"
while :; do sleep 1; done
EOF
cat >b/ok <<EOF
#!/bin/sh
echo "[==========] 2 test(s) run."
echo "[  PASSED  ] 2 test(s)."
EOF
chmod +x b/hang b/stubborn b/ok

t0=$(date +%s)
# (a runner without its limit would wait for ever: 60 s, then this fails)
LITH_TEST_TIMEOUT=2 LITH_TEST_KILL_AFTER=1 timeout -k 5 60 sh "$runner" b b/hang b/stubborn b/ok >out.txt 2>&1
status=$?
took=$(($(date +%s) - t0))
sleep 1 # what the kills reach is gone (or a zombie) by now
sed 's/^/    | /' out.txt

has() { grep -qF -- "$1" out.txt; }
# gone: no such process, or a zombie waiting for its parent
gone() {
  [ -s "pids/$1" ] || return 1
  st=$(ps -o stat= -p "$(cat "pids/$1")" 2>/dev/null)
  case $st in '' | Z*) return 0 ;; esac
  echo "    $1 (pid $(cat "pids/$1")) still running: $st"
  return 1
}

# What a failing runner left running goes, once checked.
reap() {
  for f in pids/*; do
    [ -s "$f" ] && kill -s KILL "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
}

check "the runner exits non-zero (exit $status)" [ "$status" -ne 0 ]
check "it ends within the limits, not for ever (${took}s)" [ "$took" -lt 30 ]
check "hang is named, with its limit and its test" \
  has "== hang: TIMED OUT: still running after its limit of 2s (LITH_TEST_TIMEOUT); killed with its process group; the test running was test_hangs"
check "stubborn (ignoring SIGTERM) is named, with its limit and its test" \
  has "== stubborn: TIMED OUT: still running after its limit of 2s (LITH_TEST_TIMEOUT); killed with its process group; the test running was test_ignores_sigterm"
check "the next binary runs after them" has "== ok: exit 0"
check "each hung binary is counted failed" has "2 passed, 2 failed"
check "the closing list names both" has "failing: hang(timed out after 2s) stubborn(timed out after 2s)"
check "hang's child, which ignores SIGTERM, is named as left running" has "== hang: left processes running in its group"
check "hang is gone" gone hang
check "hang's child is gone" gone hang-child
check "stubborn is gone" gone stubborn

# The runner stopped (^C, or make killed) takes the binary running with it.
reap
LITH_TEST_TIMEOUT=600 sh "$runner" b b/hang b/ok >stopped.txt 2>&1 &
rpid=$!
i=0
while [ ! -s pids/hang-child ] && [ "$i" -lt 100 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -s TERM "$rpid"
wait "$rpid"
status=$?
sleep 1
check "stopped by SIGTERM, the runner exits 130 (exit $status)" [ "$status" -eq 130 ]
check "... saying what it was running" grep -qF "run-tests.sh: interrupted during hang" stopped.txt
check "... and hang is gone" gone hang
check "... and so is its child" gone hang-child

# A limit that is not a number is refused, before any binary runs.
LITH_TEST_TIMEOUT=soon sh "$runner" b b/ok >bad.txt 2>&1
status=$?
check "LITH_TEST_TIMEOUT=soon is refused (exit $status)" [ "$status" -eq 2 ]
check "... saying why" grep -qF "LITH_TEST_TIMEOUT=soon: a whole number of seconds" bad.txt

reap
echo "[  PASSED  ] $n_ok test(s)."
if [ "$n_bad" -gt 0 ]; then
  echo "[  FAILED  ] $n_bad test(s)"
  exit 1
fi
