#pragma once

// splitmix64: the hash behind every sub-env's random stream
// (rl::sub_env_seed) and the built-in envs' resets. Small, fast, and the
// same integers in Python (examples/python_env/reference.py), so resets are
// reproducible outside C++.

#include <cstdint>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace rl
TENSORDICT_END_NAMESPACE
