#pragma once

// Large CPU buffers backed by transparent huge pages.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

/// Buffers from this size up are mapped for huge pages by
/// `huge_page_bytes`; smaller ones come from the CPU allocator.
constexpr int64_t kHugePageBufferMin = int64_t{8} << 20;

/// Returns an uninitialized 1-dim uint8 CPU tensor of `nbytes`. From
/// kHugePageBufferMin up it is an anonymous mapping aligned to 2 MiB and
/// advised for transparent huge pages (MADV_HUGEPAGE), so filling it takes
/// one page fault per 2 MiB instead of one per 4 KiB: for a fresh buffer
/// the faults, not the copy, are most of the time. Where the kernel has no
/// huge pages the advice is ignored and the mapping faults in 4 KiB pages,
/// like the allocator's. The storage is not resizable.
at::Tensor huge_page_bytes(int64_t nbytes);

}  // namespace detail
TENSORDICT_END_NAMESPACE
