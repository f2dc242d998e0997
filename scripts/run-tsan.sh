#!/usr/bin/env bash
# Runs the unit tests, rl_tests and distributed_test of a TENSORDICT_TSAN
# build under ThreadSanitizer and fails on any report, even one from a
# forked child or a distributed rank: each process writes its reports to a
# file of its own, and the run fails if any such file exists.
# Usage: run-tsan.sh BUILD_DIR [SHARDS]
set -uo pipefail
build=$1
shards=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
reports=$build/tsan-reports
rm -rf "$reports" && mkdir -p "$reports"

# libtorch's OpenMP pool is not instrumented: TSan cannot see libgomp's
# barriers and reports ATen's own kernels as racing with their pool threads.
# One OpenMP thread silences that; our threads (writer threads, map
# workers, futures, loader workers) still run 2 to 4 at a time.
export OMP_NUM_THREADS=1
# halt_on_error: the first report ends the process with exit code 66.
# die_after_fork=0: the kill test forks a process that has libtorch's pool
# threads and the child starts writer threads (allowed on glibc).
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=$root/scripts/tsan.supp:log_path=$reports/report${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

status=0
# All the unit tests, not only those that start threads of ours (threaded
# saves and their failures, the *_async futures, concurrent saves and
# consolidations, threaded consolidate, map and map_iter workers, the data
# loader's workers, the crash-safety overwrites and kill test, parallel
# print options): the rest costs half a minute, and a new threaded test
# needs no list.
"$root/scripts/run-gtest-shards.sh" "$build/bin/unit_tests" "$shards" ||
  status=1
# The RL tests: the collector's range pool, its weight updates from another
# thread, and the envs' range calls on those threads. Run like unit_tests,
# with a summary line of its own.
"$root/scripts/run-gtest-shards.sh" "$build/bin/rl_tests" "$shards" ||
  status=1
# distributed_test's ranks are processes started with this environment,
# and in one test threads of this process.
if [ -x "$build/bin/distributed_test" ]; then
  "$build/bin/distributed_test" --gtest_brief=1 || status=1
fi

found=("$reports"/report.*)
if [ -e "${found[0]}" ]; then
  for report in "${found[@]}"; do
    echo "--- ThreadSanitizer: $report"
    cat "$report"
  done
  echo "run-tsan: ${#found[@]} process(es) reported data races or other errors"
  status=1
else
  echo "run-tsan: no ThreadSanitizer reports"
fi
exit $status
