#!/bin/sh
# Run each test binary in its own scratch directory under $1/scratch, print
# every binary's output, and close with one "N passed, N failed" line that
# sums cmocka's counts. Exits non-zero if any test or binary failed.
#
# Each binary runs under a time limit, LITH_TEST_TIMEOUT seconds (default
# 900; 0: no limit). The slowest binaries took a quarter of that under
# SANITIZE=thread with LITH_TEST_SCALE=4 on the 2-core machine with other
# builds beside (load 15): test_docs 220 s, test_lithd_options 205 s,
# clients/test_python 143 s, test_lithd_streams 138 s. A binary still
# running at its limit is sent SIGTERM, then SIGKILL LITH_TEST_KILL_AFTER
# seconds later (default 10), and so is every process of its process group
# (the lithd and node processes it started); the runner says so in a line
# naming it and the limit, counts it failed, and goes on with the next.
# Whatever a binary leaves running in its group when it ends is killed too
# (and named). tools/test/test_runner.sh tests this.
set -u
build=$1
shift
root=$(pwd)
limit=${LITH_TEST_TIMEOUT:-900}
grace=${LITH_TEST_KILL_AFTER:-10}
for v in "LITH_TEST_TIMEOUT=$limit" "LITH_TEST_KILL_AFTER=$grace"; do
  case ${v#*=} in
  '' | *[!0-9]*)
    echo "run-tests.sh: $v: a whole number of seconds" >&2
    exit 2
    ;;
  esac
done
command -v timeout >/dev/null || {
  echo "run-tests.sh: needs timeout (coreutils)" >&2
  exit 2
}
passed=0
failed=0
bad=""
pid=""
# On ^C (or a kill of make), the binary running goes too: under timeout it
# is in a process group of its own, which the terminal's ^C does not reach.
stop() {
  [ -n "$pid" ] && kill -s KILL -- "-$pid" 2>/dev/null
  echo "run-tests.sh: interrupted${name:+ during $name}" >&2
  exit 130
}
trap stop INT TERM HUP
# " pid pid ..." of process group $1's live members ("?" without ps), or
# nothing. Zombies are no one's to kill (they wait for their parent).
members() {
  if command -v ps >/dev/null; then
    ps -e -o pid= -o pgid= -o stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { printf " %s", $1 }'
  elif kill -s 0 -- "-$1" 2>/dev/null; then
    printf ' ?'
  fi
}
for bin in "$@"; do
  # Named by the path below the build dir: http/test/test_guard and
  # tools/lithd/test/test_guard are two tests, with two scratch dirs.
  name=${bin#"$build"/}
  dir="$build/scratch/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  log="$dir/output.txt"
  start=$(date +%s)
  # timeout puts itself and the binary in a new process group (its pid) and
  # signals the whole group when the limit fires. In the background, so that
  # the trap above runs at once (wait returns on a signal; a foreground
  # command would be waited for first).
  (cd "$dir" && exec timeout -k "$grace" "$limit" "$root/$bin") >"$log" 2>&1 </dev/null &
  pid=$!
  wait "$pid" 2>/dev/null # (without "Killed" from the shell)
  status=$?
  took=$(($(date +%s) - start))
  timed_out=0
  # 124: the binary ended on SIGTERM; 137: SIGKILL reached timeout too
  if [ "$limit" -gt 0 ] && [ "$took" -ge "$limit" ] && { [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; }; then
    timed_out=1
  fi
  # Anything still in the group (a child that ignored SIGTERM, or one the
  # binary left behind when it ended): the group outlives timeout only
  # while it has members, so its id is still theirs.
  left=$(members "$pid")
  if [ -n "$left" ]; then
    kill -s KILL -- "-$pid" 2>/dev/null
    echo "== $name: left processes running in its group (pid$left): killed them" >>"$log"
  fi
  pid=""
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$timed_out" -eq 1 ]; then
    running=$(sed -n 's/^\[ RUN      \] //p' "$log" | tail -1)
    echo "== $name: TIMED OUT: still running after its limit of ${limit}s (LITH_TEST_TIMEOUT);" \
      "killed with its process group${running:+; the test running was $running}"
    failed=$((failed + 1))
    bad="$bad $name(timed out after ${limit}s)"
    continue
  fi
  if [ "$status" -ne 0 ] || [ "$f" -ne 0 ]; then
    [ "$f" -eq 0 ] && failed=$((failed + 1))
    bad="$bad $name(exit $status)"
  fi
  echo "== $name: exit $status, ${took}s"
done
if [ -n "$bad" ]; then
  echo "failing:$bad"
fi
echo "$passed passed, $failed failed"
[ -z "$bad" ]
