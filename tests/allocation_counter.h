#pragma once

#include <cstdint>

namespace tensordict::testing {

/// Returns how many times the global operator new has run in this process,
/// or -1 where counting is off (sanitizer builds). Linking
/// allocation_counter.cpp into a test binary replaces operator new.
int64_t allocation_count();

}  // namespace tensordict::testing
