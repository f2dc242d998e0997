// TensorDict::map and map_iter on a pool of worker threads; see NOTE
// [Parallel map] in tensordict/map.h.

#include "tensordict/map.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/ops/randperm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "tensordict/indexing.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

using Clock = std::chrono::steady_clock;

// How often the calling thread reports progress while it waits.
constexpr auto kProgressInterval = std::chrono::milliseconds(100);

// "0:06", "1:02:03".
std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  const int64_t h = total / 3600;
  const int64_t m = total / 60 % 60;
  const int64_t s = total % 60;
  char buffer[48];
  if (h > 0) {
    std::snprintf(
        buffer,
        sizeof(buffer),
        "%" PRId64 ":%02" PRId64 ":%02" PRId64,
        h,
        m,
        s);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%" PRId64 ":%02" PRId64, m, s);
  }
  return buffer;
}

// "9.00", "9.00k", "9.00M".
std::string format_rate(double rate) {
  char buffer[32];
  if (rate >= 1e6) {
    std::snprintf(buffer, sizeof(buffer), "%.2fM", rate / 1e6);
  } else if (rate >= 1e3) {
    std::snprintf(buffer, sizeof(buffer), "%.2fk", rate / 1e3);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f", rate);
  }
  return buffer;
}

// The columns of the terminal behind stderr, or 80.
int terminal_width() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

// Reports progress to the callback and the bar, at most every
// kProgressInterval except for the final report.
}  // namespace

namespace detail {

class MapReporter {
 public:
  MapReporter(
      const MapOptions& options, int64_t items_total, int64_t chunks_total)
      : callback_(options.progress()),
        draw_(options.pbar() && isatty(STDERR_FILENO) == 1),
        start_(Clock::now()),
        last_(start_) {
    progress_.items_total = items_total;
    progress_.chunks_total = chunks_total;
  }

  void report(int64_t items_done, int64_t chunks_done, bool final) {
    if (!callback_ && !draw_) {
      return;
    }
    const auto now = Clock::now();
    if (!final && now - last_ < kProgressInterval) {
      return;
    }
    last_ = now;
    progress_.items_done = items_done;
    progress_.chunks_done = chunks_done;
    progress_.elapsed_seconds =
        std::chrono::duration<double>(now - start_).count();
    if (draw_) {
      const std::string line = progress_.to_string(terminal_width() - 1);
      std::fprintf(stderr, "\r%s%s", line.c_str(), final ? "\n" : "");
      std::fflush(stderr);
    }
    if (callback_) {
      callback_(progress_);
    }
  }

 private:
  std::function<void(const MapProgress&)> callback_;
  bool draw_;
  Clock::time_point start_;
  Clock::time_point last_;
  MapProgress progress_;
};

// How the dict is cut: chunk i covers elements [start(i), start(i) +
// length(i)) along `dim`, of `order` when shuffled.
struct MapPlan {
  int64_t dim = 0;
  int64_t size = 0;
  int64_t chunk_len = 1;
  int64_t count = 0;
  // chunksize 0: chunk i is element i, with `dim` removed.
  bool single = false;
  // shuffle: a permutation of [0, size), int64.
  at::Tensor order;

  int64_t start(int64_t i) const {
    return i * chunk_len;
  }
  int64_t length(int64_t i) const {
    return std::min(chunk_len, size - start(i));
  }
  std::string describe(int64_t i) const {
    std::string items =
        single ? c10::str("item ", start(i))
               : c10::str("items [", start(i), ", ", start(i) + length(i), ")");
    return c10::str(
        "while mapping chunk ",
        i,
        " of ",
        count,
        " (",
        items,
        order.defined() ? " of a random permutation" : "",
        ") along dim ",
        dim);
  }
};

}  // namespace detail

namespace {

using detail::MapPlan;

MapPlan plan_chunks(
    const TensorDict& td, const MapOptions& options, int64_t num_workers) {
  const int64_t ndim = td.batch_dims();
  const int64_t dim = options.dim();
  TORCH_CHECK_INDEX(
      dim >= -ndim && dim < ndim,
      "Incompatible dim ",
      dim,
      " for tensordict with shape ",
      detail::size_repr(td.batch_size()),
      ".");
  TORCH_CHECK_VALUE(
      !(options.chunksize() && options.num_chunks()),
      "Either chunksize or num_chunks must be provided, but not both.");
  MapPlan plan;
  plan.dim = dim < 0 ? dim + ndim : dim;
  plan.size = td.batch_size()[plan.dim];
  if (options.chunksize()) {
    const int64_t chunksize = *options.chunksize();
    TORCH_CHECK_VALUE(
        chunksize >= 0, "map: chunksize must be 0 or more, got ", chunksize);
    plan.single = chunksize == 0;
    plan.chunk_len = std::max<int64_t>(chunksize, 1);
  } else {
    const int64_t num_chunks = options.num_chunks().value_or(num_workers);
    TORCH_CHECK_VALUE(
        num_chunks > 0, "map: num_chunks must be positive, got ", num_chunks);
    // torch.chunk: chunks of ceil(size / num_chunks), maybe fewer of them.
    const int64_t n = std::max<int64_t>(std::min(plan.size, num_chunks), 1);
    plan.chunk_len = std::max<int64_t>((plan.size + n - 1) / n, 1);
  }
  plan.count = (plan.size + plan.chunk_len - 1) / plan.chunk_len;
  if (options.shuffle()) {
    plan.order = at::randperm(plan.size, at::TensorOptions().dtype(at::kLong));
  }
  return plan;
}

// Chunk i of `td`: views, except a shuffled chunk (a gathered copy).
TensorDict take_chunk(const TensorDict& td, const MapPlan& plan, int64_t i) {
  c10::SmallVector<at::indexing::TensorIndex, 4> index(
      plan.dim, at::indexing::Slice());
  if (plan.order.defined()) {
    const at::Tensor picked =
        plan.order.narrow(0, plan.start(i), plan.length(i));
    if (plan.single) {
      index.emplace_back(picked.item<int64_t>());
    } else {
      index.emplace_back(picked);
    }
    return td.index(index);
  }
  if (plan.single) {
    index.emplace_back(plan.start(i));
    return td.index(index);
  }
  return td.narrow(plan.dim, plan.start(i), plan.length(i));
}

[[noreturn]] void throw_cancelled(const MapPlan& plan, int64_t chunks_done) {
  throw MapCancelled(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      c10::str(
          "map was cancelled after ",
          chunks_done,
          " of ",
          plan.count,
          " chunks"));
}

}  // namespace

std::string MapProgress::to_string(int width) const {
  const double fraction = items_total > 0 ? static_cast<double>(items_done) /
                                                static_cast<double>(items_total)
                                          : 1.0;
  const double rate = elapsed_seconds > 0
                          ? static_cast<double>(items_done) / elapsed_seconds
                          : 0;
  const std::string eta =
      rate > 0 ? format_duration(
                     static_cast<double>(items_total - items_done) / rate)
               : std::string("?");
  char percent[8];
  std::snprintf(
      percent, sizeof(percent), "%3d%%", static_cast<int>(fraction * 100));
  const std::string right = c10::str(
      " ",
      items_done,
      "/",
      items_total,
      " ",
      rate > 0 ? format_rate(rate) : std::string("?"),
      " it/s ETA ",
      eta);
  // The bar takes what is left, if at least 10 columns: " 45% [###   ]".
  const int64_t bar_width =
      static_cast<int64_t>(width) -
      static_cast<int64_t>(std::string(percent).size() + right.size() + 3);
  if (bar_width < 10) {
    return percent + right;
  }
  const auto filled = std::min<int64_t>(
      bar_width,
      static_cast<int64_t>(fraction * static_cast<double>(bar_width)));
  return c10::str(
      percent,
      " [",
      std::string(filled, '#'),
      std::string(bar_width - filled, ' '),
      "]",
      right);
}

namespace detail {

// One map or map_iter: the plan, the workers and what they share.
//
// Workers claim chunks in order from an atomic counter. In a map, each
// result goes to its own slot, read by the calling thread after the join;
// in a map_iter, results are handed over under `mutex_`, and a worker
// waits before chunk i until i < consumed + window, so the workers never
// run more than a window ahead of the consumer.
class MapRun {
 public:
  MapRun(TensorDict td, MapFunction fn, MapOptions options, bool iterating)
      : td_(std::move(td)),
        fn_(std::move(fn)),
        options_(std::move(options)),
        iterating_(iterating),
        caller_state_(),
        caller_threads_(at::get_num_threads()) {
    const int64_t num_workers = options_.num_workers().value_or(
        std::max<int64_t>(std::thread::hardware_concurrency(), 1));
    TORCH_CHECK_VALUE(
        num_workers >= 1,
        "map: num_workers must be at least 1, got ",
        num_workers);
    TORCH_CHECK_VALUE(
        iterating_ || !options_.shuffle(),
        "map: shuffle is an option of map_iter only");
    TORCH_CHECK_VALUE(
        !iterating_ || !options_.out(),
        "map_iter: out is an option of map only");
    plan_ = plan_chunks(td_, options_, num_workers);
    if (options_.out()) {
      const TensorDict& out = *options_.out();
      TORCH_CHECK_VALUE(
          out.batch_dims() > plan_.dim &&
              out.batch_size()[plan_.dim] == plan_.size,
          "map: out has batch size ",
          c10::str(out.batch_size()),
          ", but the dict has ",
          plan_.size,
          " elements along dim ",
          plan_.dim);
    }
    const int64_t num_threads = std::min(num_workers, plan_.count);
    worker_threads_ = options_.worker_threads().value_or(std::max<int64_t>(
        caller_threads_ / std::max<int64_t>(num_threads, 1), 1));
    TORCH_CHECK_VALUE(
        worker_threads_ >= 1,
        "map: worker_threads must be at least 1, got ",
        worker_threads_);
    window_ = 2 * num_threads;
    slots_.resize(plan_.count);
    if (iterating_) {
      done_.assign(plan_.count, 0);
    }
    reporter_.emplace(options_, plan_.size, plan_.count);
    threads_.reserve(num_threads);
    try {
      for (int64_t i = 0; i < num_threads; ++i) {
        threads_.emplace_back([this] { work(); });
      }
    } catch (...) {
      stop_and_join();
      throw;
    }
  }

  MapRun(const MapRun&) = delete;
  MapRun& operator=(const MapRun&) = delete;

  ~MapRun() {
    stop_and_join();
  }

  // Waits for every chunk and joins the results (map).
  std::optional<TensorDict> run() {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!cv_.wait_for(lock, kProgressInterval, [this] {
        return exited_ == threads_.size();
      })) {
        lock.unlock();
        reporter_->report(items_done_, chunks_done_, /*final=*/false);
        lock.lock();
      }
    }
    stop_and_join();
    throw_if_failed();
    if (chunks_done_ != plan_.count) {
      throw_cancelled(plan_, chunks_done_);
    }
    reporter_->report(items_done_, chunks_done_, /*final=*/true);
    if (options_.out()) {
      return options_.out();
    }
    std::vector<TensorDict> results;
    for (std::optional<TensorDict>& slot : slots_) {
      if (slot) {
        results.push_back(std::move(*slot));
      }
    }
    slots_.clear();
    if (results.empty()) {
      return std::nullopt;
    }
    try {
      return plan_.single ? stack(results, plan_.dim) : cat(results, plan_.dim);
    } catch (c10::Error& e) {
      TORCH_RETHROW(
          e, "while joining the results of map along dim ", plan_.dim);
    }
  }

  // Returns the next result (map_iter).
  std::optional<TensorDict> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      std::optional<int64_t> ready;
      if (options_.shuffle()) {
        if (!ready_.empty()) {
          ready = ready_.front();
          ready_.pop_front();
        }
      } else if (consumed_ < plan_.count && done_[consumed_] != 0) {
        ready = consumed_;
      }
      if (ready) {
        ++consumed_;
        std::optional<TensorDict> result = std::move(slots_[*ready]);
        slots_[*ready].reset();
        room_cv_.notify_all();
        lock.unlock();
        reporter_->report(items_yielded_ += length(*ready), consumed_, false);
        if (result) {
          return result;
        }
        lock.lock();
        continue;
      }
      if (exited_ == threads_.size()) {
        lock.unlock();
        throw_if_failed();
        if (consumed_ != plan_.count) {
          throw_cancelled(plan_, consumed_);
        }
        if (!finished_) {
          finished_ = true;
          reporter_->report(items_yielded_, consumed_, /*final=*/true);
        }
        return std::nullopt;
      }
      cv_.wait_for(lock, kProgressInterval);
    }
  }

 private:
  int64_t length(int64_t chunk) const {
    return plan_.single ? 1 : plan_.length(chunk);
  }

  // True once the run is closing or cancelled; a failure stops only the
  // chunks after the failing one (see `fail`).
  bool should_stop() const {
    return closing_ ||
           (options_.cancel() != nullptr && options_.cancel()->load());
  }

  void work() {
    at::ThreadLocalStateGuard state_guard(caller_state_);
    if (worker_threads_ != caller_threads_) {
      at::set_num_threads(static_cast<int>(worker_threads_));
    }
    while (!should_stop()) {
      const int64_t i = next_chunk_.fetch_add(1);
      if (i >= plan_.count || i > failed_chunk_ ||
          (iterating_ && !wait_for_room(i))) {
        break;
      }
      std::optional<TensorDict> result;
      try {
        TensorDict chunk = take_chunk(td_, plan_, i);
        result = fn_(chunk);
        if (result && options_.out()) {
          take_chunk(*options_.out(), plan_, i).update_(*result);
          result.reset();
        }
      } catch (...) {
        fail(i, std::current_exception());
        break;
      }
      finish(i, std::move(result));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++exited_;
    }
    cv_.notify_all();
  }

  // Waits until chunk i is within the window; false if the run stopped.
  bool wait_for_room(int64_t i) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (i >= consumed_ + window_) {
      if (should_stop() || i > failed_chunk_) {
        return false;
      }
      room_cv_.wait_for(lock, kProgressInterval);
    }
    return !should_stop();
  }

  void finish(int64_t i, std::optional<TensorDict> result) {
    if (!iterating_) {
      slots_[i] = std::move(result);
      items_done_ += length(i);
      ++chunks_done_;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[i] = std::move(result);
      done_[i] = 1;
      if (options_.shuffle()) {
        ready_.push_back(i);
      }
    }
    cv_.notify_all();
  }

  void fail(int64_t i, std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The chunks before the failing one still complete, as they would
      // in a serial loop; those after it are not started.
      if (!error_ || i < error_chunk_) {
        error_ = std::move(error);
        error_chunk_ = i;
        failed_chunk_ = i;
      }
    }
    room_cv_.notify_all();
    cv_.notify_all();
  }

  void throw_if_failed() {
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error = error_;
    }
    if (!error) {
      return;
    }
    const std::string where = plan_.describe(error_chunk_);
    try {
      std::rethrow_exception(error);
    } catch (c10::Error& e) {
      e.add_context(where);
      throw;
    } catch (const std::exception& e) {
      std::throw_with_nested(c10::Error(
          {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          c10::str("map: fn threw: ", e.what(), "\n", where)));
    } catch (...) {
      throw c10::Error(
          {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          c10::str(
              "map: fn threw an exception that is not a std::exception\n",
              where));
    }
  }

  void stop_and_join() {
    closing_ = true;
    room_cv_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) {
        thread.join();
      }
    }
    if (!restored_ && worker_threads_ != caller_threads_) {
      // The workers' set_num_threads also set the default of new threads.
      at::set_num_threads(static_cast<int>(caller_threads_));
    }
    restored_ = true;
  }

  TensorDict td_;
  MapFunction fn_;
  MapOptions options_;
  bool iterating_;
  at::ThreadLocalState caller_state_;
  int64_t caller_threads_;
  int64_t worker_threads_ = 1;
  int64_t window_ = 1;
  MapPlan plan_;
  std::optional<MapReporter> reporter_;
  std::vector<std::thread> threads_;

  std::atomic<int64_t> next_chunk_{0};
  std::atomic<bool> closing_{false};
  std::atomic<int64_t> failed_chunk_{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> items_done_{0};
  std::atomic<int64_t> chunks_done_{0};
  bool restored_ = false;

  // Guarded by mutex_ (slots_ only in map_iter; in map each worker owns
  // the slots of its chunks until the join).
  std::mutex mutex_;
  std::condition_variable cv_;       // a result is ready, or a worker exited
  std::condition_variable room_cv_;  // the consumer took a result
  std::vector<std::optional<TensorDict>> slots_;
  std::vector<char> done_;
  std::deque<int64_t> ready_;
  size_t exited_ = 0;
  int64_t consumed_ = 0;
  std::exception_ptr error_;
  int64_t error_chunk_ = 0;

  // The consumer's own (map_iter).
  int64_t items_yielded_ = 0;
  bool finished_ = false;
};

std::optional<TensorDict> map_impl(
    const TensorDict& td, MapFunction fn, const MapOptions& options) {
  MapRun run(td, std::move(fn), options, /*iterating=*/false);
  return run.run();
}

}  // namespace detail

MapIterator::MapIterator(
    TensorDict td, detail::MapFunction fn, MapOptions options)
    : run_(std::make_unique<detail::MapRun>(
          std::move(td),
          std::move(fn),
          std::move(options),
          /*iterating=*/true)) {}

MapIterator::MapIterator(MapIterator&& other) noexcept = default;
MapIterator& MapIterator::operator=(MapIterator&& other) noexcept = default;
MapIterator::~MapIterator() = default;

std::optional<TensorDict> MapIterator::next() {
  TORCH_CHECK(run_ != nullptr, "map_iter: the iterator was moved from");
  return run_->next();
}

TENSORDICT_END_NAMESPACE
