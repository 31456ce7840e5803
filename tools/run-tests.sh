#!/bin/sh
# Run each test binary in its own scratch directory under $1/scratch, print
# every binary's output, and close with one "N passed, N failed" line that
# sums cmocka's counts. Exits non-zero if any test or binary failed.
#
# Two binaries run at once (LITH_TEST_JOBS, default 2; 1 where one
# processor is online; the Makefile makes it 1 under TSan): most of the suite's time is tests waiting (timers,
# lithd starting, clients' round trips), not computing, and one at a time
# `make test` took 11 minutes on the 2-core machine. Each binary's output
# goes to its scratch directory and is printed whole when it is over, in
# the order given, so the output reads as if they had run one by one. The
# binaries share no port (each asks the kernel for a free one; the docs'
# fixed ports are test_docs' alone), file or name (each has its own
# scratch directory). A binary named in ALONE below (or in
# LITH_TEST_ALONE, which replaces that list) runs with no other beside it:
# the ones running are waited for first, and the next starts after it. The
# binaries named in FIRST (or LITH_TEST_FIRST) start before the others (in
# the order given): test_docs, the slowest, and the runner's own test
# (25 s) come last in the list and would end the run alone otherwise.
# Names: the path below the build dir.
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
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
[ "$cpus" = 1 ] && jobs_default=1 || jobs_default=2
jobs=${LITH_TEST_JOBS:-$jobs_default}
# test_backoff counts a fake node's connections for 3 s and then wants one
# round of the addresses to find it healed: it failed once beside another
# binary on the loaded machine (2026-12-07).
# test_lithd_ops's test_wal_bounded_under_http_readers holds the -wal file
# under 64 MiB while 16 writers and 8 readers run flat out: beside another
# binary on a faster CPU (28,000 transfers a second) it reached 69 MB
# (2026-12-08), the checkpoint sharing its core with the other binary.
ALONE="dqlite/test/test_writer tools/lithd/test/test_lithd_ops"
FIRST="tools/test/test_docs tools/test/test_runner"
alone=${LITH_TEST_ALONE-$ALONE}
first=${LITH_TEST_FIRST-$FIRST}
for v in "LITH_TEST_TIMEOUT=$limit" "LITH_TEST_KILL_AFTER=$grace"; do
  case ${v#*=} in
  '' | *[!0-9]*)
    echo "run-tests.sh: $v: a whole number of seconds" >&2
    exit 2
    ;;
  esac
done
case $jobs in
'' | *[!0-9]* | 0 | 0*)
  echo "run-tests.sh: LITH_TEST_JOBS=$jobs: a whole number, at least 1" >&2
  exit 2
  ;;
esac
command -v timeout >/dev/null || {
  echo "run-tests.sh: needs timeout (coreutils)" >&2
  exit 2
}
passed=0
failed=0
bad=""
# What the runs in the background tell the runner: N.pid (the run's own
# pid) and N.done ("STATUS SECONDS" once the binary is over) for the Nth.
state="$build/scratch/.run-tests.$$"
rm -rf "$state"
mkdir -p "$state"
running="" # " N N": the runs not yet over
nrun=0     # how many

# The Nth binary's path ($bin) and name ($name). Named by the path below
# the build dir: http/test/test_guard and tools/lithd/test/test_guard are
# two tests, with two scratch dirs.
nth() {
  eval "bin=\$bin_$1"
  name=${bin#"$build"/}
}

# " pid pid ..." of process group $1's live members ("?" without ps), or
# nothing. Zombies are no one's to kill (they wait for their parent).
members() {
  if command -v ps >/dev/null; then
    ps -e -o pid= -o pgid= -o stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { printf " %s", $1 }'
  elif kill -s 0 -- "-$1" 2>/dev/null; then
    printf ' ?'
  fi
}

# Run the Nth binary in the background: its output to output.txt in its
# scratch dir, "STATUS SECONDS" to $state/N.done when it is over.
start() {
  nth "$1"
  dir="$build/scratch/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  (
    log="$dir/output.txt"
    # Stopped (the runner's ^C below), it takes the binary's group along:
    # $!'s, the binary's once it is started (before, a run's like this
    # one, which leads no group).
    trap '[ -n "${!:-}" ] && kill -s KILL -- "-$!" 2>/dev/null; exit 130' TERM
    t0=$(date +%s)
    # timeout puts itself and the binary in a new process group (its pid)
    # and signals the whole group when the limit fires. In the background,
    # so that the trap above runs at once (wait returns on a signal; a
    # foreground command would be waited for first).
    (cd "$dir" && exec timeout -k "$grace" "$limit" "$root/$bin") >"$log" 2>&1 </dev/null &
    pid=$!
    wait "$pid" 2>/dev/null # (without "Killed" from the shell)
    status=$?
    took=$(($(date +%s) - t0))
    # Anything still in the group (a child that ignored SIGTERM, or one the
    # binary left behind when it ended): the group outlives timeout only
    # while it has members, so its id is still theirs.
    left=$(members "$pid")
    if [ -n "$left" ]; then
      kill -s KILL -- "-$pid" 2>/dev/null
      echo "== $name: left processes running in its group (pid$left): killed them" >>"$log"
    fi
    echo "$status $took" >"$state/$1.tmp"
    mv "$state/$1.tmp" "$state/$1.done"
  ) &
  echo "$!" >"$state/$1.pid"
  running="$running $1"
  nrun=$((nrun + 1))
}

# Print the Nth binary's output and count it (once it is done).
report() {
  nth "$1"
  log="$build/scratch/$name/output.txt"
  read -r status took <"$state/$1.done"
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p))
  failed=$((failed + f))
  # 124: the binary ended on SIGTERM; 137: SIGKILL reached timeout too
  if [ "$limit" -gt 0 ] && [ "$took" -ge "$limit" ] && { [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; }; then
    running_test=$(sed -n 's/^\[ RUN      \] //p' "$log" | tail -1)
    echo "== $name: TIMED OUT: still running after its limit of ${limit}s (LITH_TEST_TIMEOUT);" \
      "killed with its process group${running_test:+; the test running was $running_test}"
    failed=$((failed + 1))
    bad="$bad $name(timed out after ${limit}s)"
    return
  fi
  if [ "$status" -ne 0 ] || [ "$f" -ne 0 ]; then
    [ "$f" -eq 0 ] && failed=$((failed + 1))
    bad="$bad $name(exit $status)"
  fi
  echo "== $name: exit $status, ${took}s"
}

# On ^C (or a kill of make), the binaries running go too: under timeout
# each is in a process group of its own, which the terminal's ^C does not
# reach.
stop() {
  names=""
  for i in $running; do
    nth "$i"
    names="${names:+$names, }$name"
    kill -s TERM "$(cat "$state/$i.pid")" 2>/dev/null
  done
  wait
  rm -rf "$state"
  echo "run-tests.sh: interrupted${names:+ during $names}" >&2
  exit 130
}
trap stop INT TERM HUP

# bin_N: the Nth binary given; order: the Ns in the order they start
# (those of $first, then the rest).
n=0
order=""
for bin in "$@"; do
  n=$((n + 1))
  eval "bin_$n=\$bin"
done
for f in $first; do
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    [ "${bin#"$build"/}" = "$f" ] && order="$order $i"
  done
done
i=0
for bin in "$@"; do
  i=$((i + 1))
  case " $order " in *" $i "*) ;; *) order="$order $i" ;; esac
done
# shellcheck disable=SC2086 # (split: numbers)
set -- $order
next=1  # the next to start: the $next-th of $order, binary $k
k=0
shown=1 # the next to print
alone_now=0
while [ "$shown" -le "$n" ]; do
  # Start what may start: up to $jobs at once, a binary of $alone only
  # once the others are over, and none beside it.
  while [ "$next" -le "$n" ] && [ "$alone_now" -eq 0 ]; do
    eval "k=\${$next}"
    nth "$k"
    [ "$nrun" -lt "$jobs" ] || break
    case " $alone " in *" $name "*)
      [ "$nrun" -eq 0 ] || break
      alone_now=1
      ;;
    esac
    start "$k"
    next=$((next + 1))
  done
  # Those over leave $running; the next in order is printed once over.
  still=""
  for i in $running; do
    if [ -e "$state/$i.done" ]; then
      wait "$(cat "$state/$i.pid")" 2>/dev/null
      nrun=$((nrun - 1))
      alone_now=0
    else
      still="$still $i"
    fi
  done
  changed=0
  [ "$still" = "$running" ] || changed=1
  running=$still
  while [ "$shown" -le "$n" ] && [ -e "$state/$shown.done" ]; do
    report "$shown"
    shown=$((shown + 1))
    changed=1
  done
  [ "$changed" -eq 1 ] || sleep 0.2
done
rm -rf "$state"
if [ -n "$bad" ]; then
  echo "failing:$bad"
fi
echo "$passed passed, $failed failed"
[ -z "$bad" ]
