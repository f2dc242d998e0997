#pragma once

/// @file
/// What the repr of a TensorDict or a LazyStackedTensorDict shows: the C++
/// form of Python's `tensordict.set_printoptions` and `get_printoptions`.

#include <cstdint>

#include "tensordict/export.h"

TENSORDICT_BEGIN_NAMESPACE

/// How a repr orders the entries of each level (Python's `sort_keys`).
enum class SortKeys : uint8_t {
  /// By the text "key: value", as Python's default "alphabetical" does.
  kAlphabetical,
  /// In insertion order (Python's `sort_keys=None`).
  kInsertion,
};

/// The options of `repr()` and `operator<<`, with Python's defaults. Setters
/// chain, so a guard can change one option of the current ones:
/// `PrintOptionsGuard guard(get_printoptions().compact(false));`.
///
/// The compact form follows every option. The detailed form follows
/// `sort_keys`, `show_batch_size` and `show_device` in the fields and header
/// of a TensorDict or LazyStackedTensorDict; its `Tensor(...)` lines always
/// show the dtype.
///
/// Example:
/// ```
///   tensordict::set_printoptions(
///       tensordict::PrintOptions().sort_keys(tensordict::SortKeys::kInsertion));
/// ```
struct TENSORDICT_API PrintOptions {
  /// Selects the compact form, `TensorDict(batch_size=[3], fields={a: f32[]})`
  /// (true, Python's default) or the detailed `TensorDict(\n    fields={...`.
  PrintOptions& compact(bool value) noexcept {
    compact_ = value;
    return *this;
  }
  /// Returns whether the compact form is selected.
  bool compact() const noexcept {
    return compact_;
  }
  /// Sets how the entries of each level are ordered.
  PrintOptions& sort_keys(SortKeys value) noexcept {
    sort_keys_ = value;
    return *this;
  }
  /// Returns how the entries of each level are ordered.
  SortKeys sort_keys() const noexcept {
    return sort_keys_;
  }
  /// Shows the dtype of each tensor in the compact form (`f32[3]`, else
  /// `[3]`).
  PrintOptions& show_dtype(bool value) noexcept {
    show_dtype_ = value;
    return *this;
  }
  /// Returns whether the compact form shows dtypes.
  bool show_dtype() const noexcept {
    return show_dtype_;
  }
  /// Shows the batch size in the header.
  PrintOptions& show_batch_size(bool value) noexcept {
    show_batch_size_ = value;
    return *this;
  }
  /// Returns whether the header shows the batch size.
  bool show_batch_size() const noexcept {
    return show_batch_size_;
  }
  /// Shows the device in the header (the compact form shows it only when
  /// one is set).
  PrintOptions& show_device(bool value) noexcept {
    show_device_ = value;
    return *this;
  }
  /// Returns whether the header shows the device.
  bool show_device() const noexcept {
    return show_device_;
  }

 private:
  bool compact_ = true;
  SortKeys sort_keys_ = SortKeys::kAlphabetical;
  bool show_dtype_ = true;
  bool show_batch_size_ = true;
  bool show_device_ = true;
};

/// Sets the print options for the whole program, every thread included, as
/// Python's `set_printoptions(...).set()` does. Reading and setting the
/// options from several threads is safe (a mutex guards them): each repr
/// reads them once, so it never mixes old and new options.
TENSORDICT_API void set_printoptions(const PrintOptions& options);

/// Returns a copy of the current print options.
TENSORDICT_API PrintOptions get_printoptions();

/// Sets the print options for its lifetime and restores the previous ones
/// when destroyed: Python's `with set_printoptions(...):`. The options are
/// global, so a guard changes what every thread prints; guards restore
/// correctly when they nest in one thread.
///
/// Example:
/// ```
///   {
///     tensordict::PrintOptionsGuard detailed(
///         tensordict::get_printoptions().compact(false));
///     std::cout << td;  // the detailed form
///   }
///   std::cout << td;    // the previous options again
/// ```
class TENSORDICT_API PrintOptionsGuard {
 public:
  /// Sets `options`, remembering the current ones.
  explicit PrintOptionsGuard(const PrintOptions& options);
  PrintOptionsGuard(const PrintOptionsGuard&) = delete;
  PrintOptionsGuard& operator=(const PrintOptionsGuard&) = delete;
  /// Restores the options that were current at construction.
  ~PrintOptionsGuard();

 private:
  PrintOptions previous_;
};

TENSORDICT_END_NAMESPACE
