#pragma once

/// @file
/// The error types: tensordict::KeyError and TENSORDICT_CHECK_KEY.

#include <c10/util/Exception.h>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE

/// Raised where Python tensordict raises `KeyError`: a missing key, a key
/// that walks through a leaf, a malformed nested key.
///
/// The other Python kinds map onto c10's own: `c10::IndexError`,
/// `c10::ValueError`, `c10::TypeError`, and `c10::Error` for `RuntimeError`.
struct TENSORDICT_API KeyError : public c10::Error {
  using c10::Error::Error;
};

TENSORDICT_END_NAMESPACE

/// Throws `tensordict::KeyError` with the streamed message unless `cond`
/// holds. `TORCH_CHECK` cannot do this: `C10_THROW_ERROR` hard-codes the
/// c10 namespace.
#define TENSORDICT_CHECK_KEY(cond, ...)                        \
  if (C10_UNLIKELY_OR_CONST(!(cond))) {                        \
    throw ::tensordict::KeyError(                              \
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, \
        ::c10::str(__VA_ARGS__));                              \
  }
