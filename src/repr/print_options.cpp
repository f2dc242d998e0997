#include "tensordict/print_options.h"

#include <mutex>

TENSORDICT_BEGIN_NAMESPACE

namespace {

// The program's options. A mutex, not an atomic: PrintOptions is five bytes,
// which std::atomic would lock anyway (or need libatomic), and a repr reads
// the options once.
std::mutex& print_options_mutex() {
  static std::mutex mutex;
  return mutex;
}

PrintOptions& print_options_storage() {
  static PrintOptions options;
  return options;
}

}  // namespace

void set_printoptions(const PrintOptions& options) {
  std::lock_guard<std::mutex> lock(print_options_mutex());
  print_options_storage() = options;
}

PrintOptions get_printoptions() {
  std::lock_guard<std::mutex> lock(print_options_mutex());
  return print_options_storage();
}

PrintOptionsGuard::PrintOptionsGuard(const PrintOptions& options) {
  std::lock_guard<std::mutex> lock(print_options_mutex());
  previous_ = print_options_storage();
  print_options_storage() = options;
}

PrintOptionsGuard::~PrintOptionsGuard() {
  set_printoptions(previous_);
}

TENSORDICT_END_NAMESPACE
