#pragma once

/// @file
/// Parallel map over the chunks of a TensorDict: `TensorDict::map` and
/// `TensorDict::map_iter`, Python's `td.map` / `td.map_iter` on threads.
//
// NOTE [Parallel map]
// The dict is split along `dim` into chunks: one element at a time with
// `chunksize(0)` (views, the dim removed), slices of `chunksize` elements,
// or `num_chunks` slices as `torch.chunk` makes them (one per worker when
// neither is given). Each chunk is a view of the dict, made by the worker
// that takes it, so a memory-mapped dict is read from its files without a
// copy. `fn` runs on the chunks on `num_workers` threads; the results are
// stacked (`chunksize(0)`) or concatenated along `dim`, in the order of the
// chunks.
//
// What `fn` returns chooses what `map` returns:
// - `TensorDict`: `map` returns the joined results (or `out`);
// - `std::optional<TensorDict>`: `std::nullopt` means the chunk was handled
//   in place; `map` returns the joined results of the others, or
//   `std::nullopt` when every chunk returned nothing (Python's `None`);
// - `void`: `fn` works in place (the seed's `data.set_(...)` on a memmapped
//   dict) and `map` returns nothing.
// With `out(dict)`, each worker writes its result into the matching slice
// of `out` (`update_`: the keys must exist there) and `map` returns `out`.
//
// Threads, not processes: C++ has no GIL, so the workers share the dict and
// nothing is pickled; `fn` is called from several threads at once, so it
// must not write shared state without a lock (its chunks never overlap). Each
// worker runs with the caller's thread-local state (grad mode, inference mode,
// ...) and with `worker_threads` ATen intra-op threads (default: the caller's
// intra-op threads divided among the workers), so that workers times intra-op
// threads do not oversubscribe the cores; the caller's setting is restored when
// the map ends. The workers share the process's random generators (Python seeds
// one per process).
//
// Errors: an exception thrown by `fn` stops the map: the chunks before the
// failing one still complete, no chunk after it is started (those already
// running finish), and the exception of the earliest failing chunk is
// rethrown on the calling thread with the chunk's index range added to its
// context ("while mapping chunk 2 of 5 (items [4, 6)) along dim 0"); a
// c10::Error keeps its type, another std::exception becomes a c10::Error
// nesting it (std::rethrow_if_nested). `out` keeps the results of every
// chunk that completed: all those before the failing chunk, maybe some
// after it; its other slices are left as they were. `map_iter` first
// yields the results that come before the failing chunk.
//
// Cancellation: `cancel(&flag)` makes the workers stop taking chunks once
// `flag` is true (setting it from a SIGINT handler is safe: the flag is a
// lock-free atomic); the map then throws MapCancelled, and `out` keeps the
// completed chunks as above.
//
// Differences from Python, for C++'s sake:
// - Options are a MapOptions struct with chained setters (C++ has no keyword
//   arguments); `pool`, `mp_start_method`, `max_tasks_per_child`,
//   `generator` and `index_with_generator` have no counterpart (chunks are
//   always made lazily, by the workers, which is cheap for views).
// - Results with different keys are an error (Python makes a lazy stack).
// - `map_iter` keeps at most 2 * num_workers chunks ahead of the consumer
//   (Python's pool runs ahead without bound).

#include <c10/util/Exception.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "tensordict/export.h"
#include "tensordict/options.h"
#include "tensordict/tensor_dict.h"

TENSORDICT_BEGIN_NAMESPACE

/// How far a map has got: what the progress callback receives.
struct TENSORDICT_API MapProgress {
  /// Elements along the map's dim whose chunk has completed.
  int64_t items_done = 0;
  /// Elements along the map's dim.
  int64_t items_total = 0;
  /// Chunks completed.
  int64_t chunks_done = 0;
  /// Chunks in all.
  int64_t chunks_total = 0;
  /// Seconds since the map started.
  double elapsed_seconds = 0;

  /// Returns the progress bar line `pbar(true)` draws, at most `width`
  /// characters: percentage, bar, items done / total, rate and ETA, as
  /// ` 45% [#########           ] 45000/100000 9.00k it/s ETA 0:06`.
  std::string to_string(int width = 80) const;
};

/// The flag `MapOptions::cancel` watches.
using MapCancelFlag = const std::atomic<bool>*;

/// Options of `TensorDict::map` and `TensorDict::map_iter` (Python's keyword
/// arguments); see NOTE [Parallel map].
///
/// Example: `MapOptions().num_workers(2).chunksize(0).pbar(true)`
struct TENSORDICT_API MapOptions {
  /// The batch dim the dict is split along (negative counts from the end).
  TENSORDICT_ARG(int64_t, dim) = 0;
  /// The number of worker threads (default: one per hardware thread, as
  /// Python's one process per CPU).
  TENSORDICT_ARG(std::optional<int64_t>, num_workers);
  /// The number of elements per chunk; 0 passes the elements one by one
  /// (the dim removed) and stacks the results. Exclusive with `num_chunks`.
  TENSORDICT_ARG(std::optional<int64_t>, chunksize);
  /// The number of chunks, as `torch.chunk` splits (capped by the dim's
  /// size). Exclusive with `chunksize`; when neither is set, one chunk per
  /// worker.
  TENSORDICT_ARG(std::optional<int64_t>, num_chunks);
  /// A dict with the batch size of the result to write the results into
  /// (`map` only); `map` then returns it.
  TENSORDICT_ARG(std::optional<TensorDict>, out);
  /// `map_iter` only: the chunks take their elements from a random
  /// permutation along `dim` (gathered copies) and the results come in the
  /// order they complete, as Python's `shuffle=True`.
  TENSORDICT_ARG(bool, shuffle) = false;
  /// ATen intra-op threads in each worker (default: the caller's
  /// `at::get_num_threads()` divided by the number of workers, at least 1).
  TENSORDICT_ARG(std::optional<int64_t>, worker_threads);
  /// Draw a progress bar on stderr, only when stderr is a terminal.
  TENSORDICT_ARG(bool, pbar) = false;
  /// Called on the calling thread (never concurrently) about ten times a
  /// second while chunks complete (for `map_iter`: as it yields results),
  /// and once more when every chunk is done.
  TENSORDICT_ARG(std::function<void(const MapProgress&)>, progress);
  /// When the pointee becomes true, workers stop taking chunks and the map
  /// throws MapCancelled. Must outlive the map.
  TENSORDICT_ARG(MapCancelFlag, cancel) = nullptr;
};

/// Thrown by `map` and `map_iter` when `MapOptions::cancel` stopped them.
class TENSORDICT_API MapCancelled : public c10::Error {
 public:
  using Error::Error;
};

namespace detail {
class MapRun;
/// The type-erased callback of a map: the chunk in, the result (or none).
using MapFunction = std::function<std::optional<TensorDict>(TensorDict&)>;
/// The compiled form of `TensorDict::map`.
TENSORDICT_API std::optional<TensorDict> map_impl(
    const TensorDict& td, MapFunction fn, const MapOptions& options);

/// Wraps `fn` into a MapFunction, whatever it returns (see NOTE [Parallel
/// map]).
template <typename Fn>
MapFunction to_map_function(Fn&& fn) {
  using Result = std::invoke_result_t<Fn&, TensorDict&>;
  if constexpr (std::is_void_v<Result>) {
    return [fn = std::forward<Fn>(fn)](
               TensorDict& chunk) mutable -> std::optional<TensorDict> {
      fn(chunk);
      return std::nullopt;
    };
  } else {
    static_assert(
        std::is_convertible_v<Result, std::optional<TensorDict>>,
        "map: fn must return TensorDict, std::optional<TensorDict> or void");
    return [fn = std::forward<Fn>(fn)](
               TensorDict& chunk) mutable -> std::optional<TensorDict> {
      return fn(chunk);
    };
  }
}
}  // namespace detail

/// The results of `TensorDict::map_iter`, one chunk at a time: a range for
/// `for (TensorDict result : td.map_iter(...))`, or `next()`. Owns the
/// worker threads; destroying it stops them (after the chunks they are
/// running) and restores the caller's ATen intra-op threads. Move-only; use
/// it from one thread.
class TENSORDICT_API MapIterator {
 public:
  /// Starts the workers; use `TensorDict::map_iter`.
  MapIterator(TensorDict td, detail::MapFunction fn, MapOptions options);
  /// Takes over `other`'s workers and pending results.
  MapIterator(MapIterator&& other) noexcept;
  /// Takes over `other`'s workers and pending results.
  MapIterator& operator=(MapIterator&& other) noexcept;
  MapIterator(const MapIterator&) = delete;
  MapIterator& operator=(const MapIterator&) = delete;
  ~MapIterator();

  /// Returns the next result (in chunk order, or in completion order with
  /// `shuffle`), waiting for it; std::nullopt after the last. Chunks whose
  /// `fn` returned nothing are skipped. Rethrows an exception of `fn` with
  /// the chunk's index range; throws MapCancelled when cancelled.
  std::optional<TensorDict> next();

  /// An input iterator over the results; `++` calls `next()`.
  class iterator {
   public:
    /// Single pass: each result is produced once.
    using iterator_category = std::input_iterator_tag;
    /// A result: a TensorDict.
    using value_type = TensorDict;
    /// Required by std::iterator_traits; not meaningful for one pass.
    using difference_type = std::ptrdiff_t;
    /// Points to the current result.
    using pointer = const TensorDict*;
    /// Refers to the current result.
    using reference = const TensorDict&;

    /// Makes the end iterator.
    iterator() = default;
    /// Returns the current result.
    const TensorDict& operator*() const {
      return *current_;
    }
    /// Returns the current result.
    const TensorDict* operator->() const {
      return &*current_;
    }
    /// Moves to the next result.
    iterator& operator++() {
      current_ = owner_->next();
      return *this;
    }
    /// Returns true if both are past the last result.
    bool operator==(const iterator& other) const {
      return !current_ && !other.current_;
    }
    /// Returns true unless both are past the last result.
    bool operator!=(const iterator& other) const {
      return !(*this == other);
    }

   private:
    friend class MapIterator;
    explicit iterator(MapIterator* owner)
        : owner_(owner), current_(owner->next()) {}
    MapIterator* owner_ = nullptr;
    std::optional<TensorDict> current_;
  };

  /// Waits for the first result; iterate once only.
  iterator begin() {
    return iterator(this);
  }
  /// Returns the end iterator.
  iterator end() {
    return {};
  }

 private:
  std::unique_ptr<detail::MapRun> run_;
};

template <typename Fn>
auto TensorDict::map(Fn&& fn, const MapOptions& options) const {
  using Result = std::invoke_result_t<Fn&, TensorDict&>;
  std::optional<TensorDict> joined = detail::map_impl(
      *this, detail::to_map_function(std::forward<Fn>(fn)), options);
  if constexpr (std::is_void_v<Result>) {
    return;
  } else if constexpr (std::is_same_v<
                           std::decay_t<Result>,
                           std::optional<TensorDict>>) {
    return joined;
  } else {
    TORCH_CHECK_VALUE(
        joined.has_value(),
        "map: nothing to join: dim ",
        options.dim(),
        " of the dict has size 0");
    return std::move(*joined);
  }
}

template <typename Fn>
auto TensorDict::map(Fn&& fn) const {
  return map(std::forward<Fn>(fn), MapOptions());
}

template <typename Fn>
MapIterator TensorDict::map_iter(Fn&& fn, const MapOptions& options) const {
  return MapIterator(
      *this, detail::to_map_function(std::forward<Fn>(fn)), options);
}

template <typename Fn>
MapIterator TensorDict::map_iter(Fn&& fn) const {
  return map_iter(std::forward<Fn>(fn), MapOptions());
}

TENSORDICT_END_NAMESPACE
