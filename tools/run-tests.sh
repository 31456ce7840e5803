#!/bin/sh
# Run each test binary in its own scratch directory under $1/scratch, print
# every binary's output, and close with one "N passed, N failed" line that
# sums cmocka's counts. Exits non-zero if any test or binary failed.
set -u
build=$1
shift
root=$(pwd)
passed=0
failed=0
bad=""
for bin in "$@"; do
  # Named by the path below the build dir: http/test/test_guard and
  # tools/lithd/test/test_guard are two tests, with two scratch dirs.
  name=${bin#"$build"/}
  dir="$build/scratch/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  log="$dir/output.txt"
  start=$(date +%s)
  (cd "$dir" && "$root/$bin") >"$log" 2>&1
  status=$?
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$status" -ne 0 ] || [ "$f" -ne 0 ]; then
    [ "$f" -eq 0 ] && failed=$((failed + 1))
    bad="$bad $name(exit $status)"
  fi
  echo "== $name: exit $status, $(( $(date +%s) - start ))s"
done
if [ -n "$bad" ]; then
  echo "failing:$bad"
fi
echo "$passed passed, $failed failed"
[ -z "$bad" ]
