#pragma once

// Instruction counts of the benchmarked ops, measured by callgrind: unlike
// times, they do not move with the machine's load, so a regression in a hot
// path shows on a shared or virtual machine too (which often has no
// hardware counters). `tensor_dict_benchmark --instructions`, run under
// `valgrind --tool=callgrind --instr-atstart=no`, runs every registered op
// a fixed number of times and dumps callgrind's counts once per op;
// benchmarks/instructions.py starts it, reads the dumps and writes
// build/bench/instructions.json.

#include <functional>
#include <string>

namespace tensordict_bench {

/// Builds an op's inputs and returns a callable that runs the op once.
using OpFactory = std::function<std::function<void()>()>;

/// Registers `name` (e.g. "stack/cpp") for `--instructions`.
void register_instruction_op(std::string name, OpFactory make);

/// Runs every registered op under callgrind; returns a process exit status.
int run_instruction_counts();

}  // namespace tensordict_bench
