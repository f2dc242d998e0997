// The env registry (NOTE [The env registry] in rl/env.h), the keyword
// argument reader of env factories, and load_env_library.

#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tensordict/json.h"
#include "tensordict/rl/env.h"

TENSORDICT_BEGIN_NAMESPACE
namespace rl {

namespace {

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    out += (out.empty() ? "'" : ", '") + name + "'";
  }
  return out.empty() ? "none" : out;
}

class Registry {
 public:
  static Registry& get() {
    // Made on first use, whoever uses it first (a static initializer of a
    // user's library included), and never destroyed: a registration or a
    // make_env at exit must still find it.
    static Registry* registry = new Registry();
    return *registry;
  }

  void add(const std::string& name, EnvFactory factory) {
    TORCH_CHECK_VALUE(!name.empty(), "register_env: the env name is empty");
    TORCH_CHECK_VALUE(
        factory != nullptr,
        "register_env: env '",
        name,
        "' was given an empty factory");
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK_VALUE(
        factories_.count(name) == 0,
        "register_env: env '",
        name,
        "' is already registered (the registered envs are ",
        quoted_list(names_locked()),
        ")");
    factories_.emplace(name, std::move(factory));
  }

  // Records a registration that failed in a static initializer.
  void add_failure(const std::string& name, const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_.emplace_back(name, why);
  }

  std::vector<std::pair<std::string, std::string>> failures() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_;
  }

  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mutex_);
    return names_locked();
  }

  EnvFactory find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [failed, why] : failures_) {
      TORCH_CHECK_VALUE(
          failed != name,
          "make_env: env '",
          name,
          "' was registered more than once, so which one to make is not "
          "known: ",
          why);
    }
    const auto found = factories_.find(name);
    TORCH_CHECK_VALUE(
        found != factories_.end(),
        "make_env: unknown env '",
        name,
        "'; the registered envs are ",
        quoted_list(names_locked()),
        " (a library of envs registers more: rl::load_env_library, the "
        "worker's --env-library, tensordict_cpp.load_env_library)");
    return found->second;
  }

 private:
  Registry();

  std::vector<std::string> names_locked() const {
    std::vector<std::string> out;
    for (const auto& entry : factories_) {
      out.push_back(entry.first);
    }
    return out;
  }

  std::mutex mutex_;
  std::map<std::string, EnvFactory> factories_;
  std::vector<std::pair<std::string, std::string>> failures_;
};

// The built-in envs, registered as a user's would be (see the NOTE on why
// not by static objects).
Registry::Registry() {
  factories_.emplace("CartPole-v1", [](int64_t num_envs, const Json& kwargs) {
    EnvKwargs args("CartPole-v1", kwargs);
    CartPoleOptions options;
    options.categorical_action_encoding(args.get(
        "categorical_action_encoding", options.categorical_action_encoding()));
    options.max_episode_steps(
        args.get("max_episode_steps", options.max_episode_steps()));
    args.check_all_read();
    return std::shared_ptr<EnvBase>(
        std::make_shared<CartPoleEnv>(num_envs, options));
  });
  factories_.emplace("PointMass", [](int64_t num_envs, const Json& kwargs) {
    EnvKwargs args("PointMass", kwargs);
    const auto seed = args.get<uint64_t>("seed", 0);
    const auto max_steps = args.get<int64_t>("max_steps", 50);
    args.check_all_read();
    return std::shared_ptr<EnvBase>(
        std::make_shared<PointMassEnv>(num_envs, seed, max_steps));
  });
}

const char* json_type(const Json& value) {
  if (value.is_boolean()) {
    return "bool";
  }
  if (value.is_number_integer()) {
    return "int";
  }
  if (value.is_number_float()) {
    return "float";
  }
  return value.type_name();
}

}  // namespace

void register_env(const std::string& name, EnvFactory factory) {
  Registry::get().add(name, std::move(factory));
}

std::vector<std::string> registered_envs() {
  return Registry::get().names();
}

std::shared_ptr<EnvBase> make_env(const std::string& name, int64_t num_envs) {
  return make_env(name, num_envs, Json::object());
}

std::shared_ptr<EnvBase> make_env(
    const std::string& name, int64_t num_envs, const Json& kwargs) {
  const EnvFactory factory = Registry::get().find(name);
  TORCH_CHECK_VALUE(
      num_envs >= 1,
      "make_env: env '",
      name,
      "' needs num_envs >= 1, got ",
      num_envs);
  TORCH_CHECK_VALUE(
      kwargs.is_object() || kwargs.is_null(),
      "make_env: env '",
      name,
      "' takes its keyword arguments as a JSON object, got ",
      json_type(kwargs));
  std::shared_ptr<EnvBase> env = factory(num_envs, kwargs);
  TORCH_CHECK_VALUE(
      env != nullptr, "make_env: the factory of env '", name, "' made null");
  return env;
}

std::vector<std::string> load_env_library(const std::string& path) {
  // One load at a time, so that the names a library registered are those
  // that appeared while it loaded. The registry's own mutex is not held:
  // the library's static initializers take it.
  static std::mutex load_mutex;
  static std::map<void*, std::vector<std::string>> loaded;
  std::lock_guard<std::mutex> lock(load_mutex);
  const std::vector<std::string> before = registered_envs();
  const size_t failures_before = Registry::get().failures().size();
  // RTLD_LOCAL: the library's symbols stay its own; it finds libtensordict
  // (and so this registry) as a dependency already loaded.
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    TORCH_CHECK_VALUE(
        false,
        "load_env_library: cannot load '",
        path,
        "': ",
        why != nullptr ? why : "unknown error");
  }
  const auto known = loaded.find(handle);
  if (known != loaded.end()) {
    return known->second;  // loaded before: its envs are registered
  }
  const std::vector<std::string> after = registered_envs();
  std::vector<std::string> added;
  std::set_difference(
      after.begin(),
      after.end(),
      before.begin(),
      before.end(),
      std::back_inserter(added));
  const auto failures = Registry::get().failures();
  std::string failed;
  for (size_t i = failures_before; i < failures.size(); ++i) {
    failed += (failed.empty() ? "" : "; ") + failures[i].second;
  }
  TORCH_CHECK_VALUE(
      failed.empty(),
      "load_env_library: a registration of '",
      path,
      "' failed: ",
      failed);
  TORCH_CHECK_VALUE(
      !added.empty(),
      "load_env_library: '",
      path,
      "' loaded but registered no env (expected a TENSORDICT_REGISTER_ENV "
      "or a register_env call run when it loads; is it linked to the same "
      "libtensordict as this process?); the registered envs are ",
      quoted_list(after));
  loaded.emplace(handle, added);
  return added;
}

// --- EnvKwargs
// ----------------------------------------------------------------

EnvKwargs::EnvKwargs(std::string env, const Json& kwargs)
    : env_(std::move(env)), kwargs_(&kwargs) {
  TORCH_CHECK_VALUE(
      kwargs.is_object() || kwargs.is_null(),
      env_,
      ": keyword arguments must be a JSON object, got ",
      json_type(kwargs));
}

bool EnvKwargs::contains(const std::string& name) {
  if (std::find(known_.begin(), known_.end(), name) == known_.end()) {
    known_.push_back(name);
  }
  return kwargs_->is_object() && kwargs_->contains(name);
}

namespace {

template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) {
    return "a bool";
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return "an int";
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return "a non-negative int";
  } else if constexpr (std::is_same_v<T, double>) {
    return "a number";
  } else {
    return "a str";
  }
}

template <typename T>
bool fits(const Json& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value.is_boolean();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return value.is_number_integer() &&
           (value.is_number_unsigned()
                ? value.get<uint64_t>() <=
                      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                : true);
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return value.is_number_unsigned() ||
           (value.is_number_integer() && value.get<int64_t>() >= 0);
  } else if constexpr (std::is_same_v<T, double>) {
    return value.is_number();
  } else {
    return value.is_string();
  }
}

}  // namespace

template <typename T>
T EnvKwargs::get(const std::string& name, T default_value) {
  if (!contains(name)) {
    return default_value;
  }
  const Json& value = kwargs_->at(name);
  TORCH_CHECK_VALUE(
      fits<T>(value),
      env_,
      ": keyword argument '",
      name,
      "' must be ",
      type_name<T>(),
      ", got ",
      json_type(value),
      " ",
      value.dump());
  return value.get<T>();
}

template bool EnvKwargs::get<bool>(const std::string&, bool);
template int64_t EnvKwargs::get<int64_t>(const std::string&, int64_t);
template uint64_t EnvKwargs::get<uint64_t>(const std::string&, uint64_t);
template double EnvKwargs::get<double>(const std::string&, double);
template std::string EnvKwargs::get<std::string>(
    const std::string&, std::string);

void EnvKwargs::check_all_read() const {
  if (!kwargs_->is_object()) {
    return;
  }
  std::vector<std::string> unknown;
  for (const auto& item : kwargs_->items()) {
    if (std::find(known_.begin(), known_.end(), item.key()) == known_.end()) {
      unknown.push_back(item.key());
    }
  }
  TORCH_CHECK_VALUE(
      unknown.empty(),
      env_,
      ": unknown keyword argument",
      unknown.size() == 1 ? " " : "s ",
      quoted_list(unknown),
      "; the env takes ",
      known_.empty() ? "no keyword arguments" : quoted_list(known_));
}

namespace {
void record_failure(const char* name, const std::string& why) {
  Registry::get().add_failure(name, why);
}
}  // namespace

}  // namespace rl

namespace detail {

bool register_env_at_load(const char* name, rl::EnvFactory factory) noexcept {
  try {
    rl::register_env(name, std::move(factory));
  } catch (const std::exception& e) {
    try {
      rl::record_failure(name, e.what());
    } catch (...) {
      // Out of memory in a static initializer: nothing left to record with.
    }
  }
  return true;
}

}  // namespace detail
TENSORDICT_END_NAMESPACE
