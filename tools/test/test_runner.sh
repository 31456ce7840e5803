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
# Then two at once (LITH_TEST_JOBS): `second` runs beside `first`, each
# one's output printed whole in the order given, a failure counted; one at
# a time with LITH_TEST_JOBS=1; a binary of LITH_TEST_ALONE with none
# beside it; one of LITH_TEST_FIRST started before the others; stopped
# with two running, both killed and named. Closes with cmocka's lines,
# which the outer runner adds up.
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

# Two at once, printed in order. `first` waits up to 3 s for `second` to
# have started beside it and prints whether it did; `second` marks that it
# started (and ends before `first`). `first` ended leaves a mark too.
reap
rm -rf marks
mkdir -p marks
cat >b/first <<EOF
#!/bin/sh
echo "first begins"
i=0
while [ ! -e "$here/marks/second" ] && [ "\$i" -lt 30 ]; do sleep 0.1; i=\$((i + 1)); done
if [ -e "$here/marks/second" ]; then echo "first: second had started"; else echo "first: second had not started"; fi
sleep 1 # (second is over well before)
touch "$here/marks/first-ended"
echo "[  PASSED  ] 1 test(s)."
EOF
cat >b/second <<EOF
#!/bin/sh
touch "$here/marks/second"
if [ -e "$here/marks/first-ended" ]; then echo "second: first was over"; else echo "second: first was not over"; fi
echo "[  PASSED  ] 1 test(s)."
EOF
cat >b/fails <<EOF
#!/bin/sh
echo "[  FAILED  ] 1 test(s)"
exit 1
EOF
chmod +x b/first b/second b/fails
# the lines a run printed, but the times
lines() { sed 's/, [0-9]*s$//' "$1"; }
LITH_TEST_JOBS=2 sh "$runner" b b/first b/second b/fails >two.txt 2>&1
status=$?
sed 's/^/    | /' two.txt
check "with LITH_TEST_JOBS=2, second runs beside first" grep -qx "first: second had started" two.txt
check "... each one's output whole, in the order given" [ "$(lines two.txt)" = "first begins
first: second had started
[  PASSED  ] 1 test(s).
== first: exit 0
second: first was not over
[  PASSED  ] 1 test(s).
== second: exit 0
[  FAILED  ] 1 test(s)
== fails: exit 1
failing: fails(exit 1)
2 passed, 1 failed" ]
check "... and a failure beside them fails the run (exit $status)" [ "$status" -eq 1 ]

rm -f marks/*
LITH_TEST_JOBS=1 sh "$runner" b b/first b/second >one.txt 2>&1
check "with LITH_TEST_JOBS=1, one at a time" [ "$(grep -e '^first:' -e '^second:' one.txt)" = "first: second had not started
second: first was over" ]

rm -f marks/*
LITH_TEST_JOBS=2 LITH_TEST_ALONE="x first y" sh "$runner" b b/first b/second >alone.txt 2>&1
check "a binary in LITH_TEST_ALONE runs with none beside it" \
  [ "$(grep -e '^first:' -e '^second:' -e ' passed, ' alone.txt)" = "first: second had not started
second: first was over
2 passed, 0 failed" ]
rm -f marks/*
LITH_TEST_JOBS=2 LITH_TEST_ALONE="second" sh "$runner" b b/first b/second >alone2.txt 2>&1
check "... nor beside one started before it" \
  [ "$(grep -e '^first:' -e '^second:' alone2.txt)" = "first: second had not started
second: first was over" ]

rm -f marks/*
LITH_TEST_JOBS=1 LITH_TEST_FIRST="second" sh "$runner" b b/ok b/first b/second >first.txt 2>&1
check "a binary in LITH_TEST_FIRST starts before those given before it" \
  [ "$(grep -e '^first:' -e '^second:' -e '^== ' first.txt | sed 's/, [0-9]*s$//')" = "== ok: exit 0
first: second had started
== first: exit 0
second: first was not over
== second: exit 0" ]

# Stopped, the runner takes every binary running with it.
rm -f pids/*
LITH_TEST_JOBS=2 LITH_TEST_TIMEOUT=600 sh "$runner" b b/hang b/stubborn b/ok >stopped2.txt 2>&1 &
rpid=$!
i=0
while { [ ! -s pids/hang-child ] || [ ! -s pids/stubborn ]; } && [ "$i" -lt 100 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -s TERM "$rpid"
# (a runner that waits for a binary it left running: 30 s, then it fails)
i=0
while ps -o stat= -p "$rpid" | grep -qv '^Z' && [ "$i" -lt 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -s KILL "$rpid" 2>/dev/null
wait "$rpid"
status=$?
sleep 1
check "stopped with two running, the runner exits 130 (exit $status)" [ "$status" -eq 130 ]
check "... naming both" grep -qF "run-tests.sh: interrupted during hang, stubborn" stopped2.txt
check "... and hang is gone" gone hang
check "... and so is its child" gone hang-child
check "... and so is stubborn" gone stubborn

LITH_TEST_JOBS=0 sh "$runner" b b/ok >bad.txt 2>&1
status=$?
check "LITH_TEST_JOBS=0 is refused (exit $status)" [ "$status" -eq 2 ]
check "... saying why" grep -qF "LITH_TEST_JOBS=0: a whole number, at least 1" bad.txt

reap
echo "[  PASSED  ] $n_ok test(s)."
if [ "$n_bad" -gt 0 ]; then
  echo "[  FAILED  ] $n_bad test(s)"
  exit 1
fi
