#!/usr/bin/env bash
# Runs a gtest binary as N parallel shards (one per core), each in one
# process, and prints each shard's output after it ends. Used for the
# sanitizer run: starting an instrumented binary that loads libtorch costs
# seconds, too much to pay once per test as ctest does.
# Usage: run-gtest-shards.sh BINARY [SHARDS] [gtest args...]
set -uo pipefail
binary=$1
shards=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
    "$binary" --gtest_brief=1 "$@" >"$logdir/$i.log" 2>&1 &
  pids+=($!)
done

status=0
passed=0
failed=0
skipped=0
for ((i = 0; i < shards; ++i)); do
  wait "${pids[$i]}" || status=1
  echo "--- shard $i of $shards"
  cat "$logdir/$i.log"
  # "[  PASSED  ] 12 tests." and, --gtest_brief printing no failure
  # summary, one "[  FAILED  ] Suite.Test (46 ms)" per failed test.
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$logdir/$i.log")
  f=$(grep -c '^\[  FAILED  \] [^ ]* ([0-9]* ms)$' "$logdir/$i.log")
  k=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$logdir/$i.log")
  passed=$((passed + ${p:-0}))
  skipped=$((skipped + ${k:-0}))
  failed=$((failed + ${f:-0}))
  # A shard that crashed prints no summary: count it as a failure.
  if [ -z "$p" ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); status=1; fi
done
echo "$(basename "$binary"): $passed passed, $failed failed, $skipped skipped"
exit $status
