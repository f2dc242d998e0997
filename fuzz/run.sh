#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS seconds over its corpus
# (BUILD/corpus/<target>/, seeded by fuzz/make_corpus.py), with the format's
# dictionary and a bounded memory per input. Prints one summary line per
# target ("fuzz: <target>: <N> execs ...") and exits non-zero, with the first
# failing target's status, on any crash, leak, timeout or out-of-memory, whose
# reproducer libFuzzer writes to BUILD/artifacts/.
#
# Usage: [FUZZ_JOBS=N] fuzz/run.sh BUILD SECONDS [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1
seconds=$2
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(fuzz_meta_tree fuzz_consolidated_bytes fuzz_consolidated_file fuzz_cli
    fuzz_safetensors fuzz_tdz fuzz_aoti_package_meta fuzz_pickle)
fi
mkdir -p "$build/artifacts" "$build/logs"
# FUZZ_JOBS targets at a time (one per core by default): each runs its
# SECONDS on a core of its own, so a run takes SECONDS times the targets
# over the jobs, and every target still gets its full time.
jobs=${FUZZ_JOBS:-$(nproc)}

# Runs one target; its exit status goes to $build/logs/<target>.rc.
run_target() {
  local target=$1
  local log="$build/logs/$target.log"
  mkdir -p "$build/corpus/$target"
  # malloc_limit_mb: no single allocation above 1 GiB (a hostile shape must
  # be refused before it allocates); rss_limit_mb: the whole process, torch
  # and the sanitizers' shadow memory included, under 3 GiB.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$build/bin/$target" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=3072 -malloc_limit_mb=1024 -max_len=65536 \
      -dict=fuzz/tensordict.dict -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$target-" \
      "$build/corpus/$target" >"$log" 2>&1
  echo $? >"$build/logs/$target.rc"
}

running=0
for target in "${targets[@]}"; do
  rm -f "$build/logs/$target.rc"
  run_target "$target" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

status=0
for target in "${targets[@]}"; do
  log="$build/logs/$target.log"
  rc=$(cat "$build/logs/$target.rc" 2>/dev/null || echo 1)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz: $target: ${execs:-?} execs in ${seconds}s, exit $rc (log: $log)"
  if ((rc != 0)); then
    tail -n 40 "$log"
    if ((status == 0)); then status=$rc; fi
  fi
done
exit "$status"
