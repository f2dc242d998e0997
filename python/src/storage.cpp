// The storage functions of tensordict_cpp._C: they read and write Python
// tensordict's own formats (memmap directories and .tdz archives,
// consolidated files, safetensors), so either side reads what the other
// wrote. Each converts its arguments with the GIL held, releases it while
// the C++ side works on files, and takes it again to convert the result
// (NOTE [The GIL and the casters] in python.h). The rules (archive or
// directory, dict or lazy-stack root, argument checks) are the C++ API's;
// this file converts, and adds only the one check C++ cannot make: the
// walk over the Python objects of NOTE [copy_existing from Python].
//
// Roots: a TensorDict, a tensorclass instance (saved as its dict; a memmap
// save keeps its class name, so Python loads it back as that class) or a
// LazyStackedTensorDict. Loads return a TensorDict or, where the file's root
// is a lazy stack, a LazyStackedTensorDict (Python's loaders do the same); a
// tensorclass saved by Python comes back as a TensorDict (the casters never
// rebuild a Python class). Anything else is a TypeError naming what is
// supported.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tensordict/consolidate.h>
#include <tensordict/memmap.h>
#include <tensordict/options.h>
#include <tensordict/python.h>
#include <tensordict/safetensors.h>
#include <tensordict/tensor_dict.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace py = pybind11;

namespace {

using tensordict::LazyStackedTensorDict;
using tensordict::TensorDict;
namespace tdpy = tensordict::python;

// A root the storage functions accept and return: a dict (a tensorclass
// as its dict) or a lazy stack.
using Root = tensordict::LoadedTree;

// Converts `obj` (GIL held). `what` names the function for the error.
Root root_from_python(py::handle obj, const char* what) {
  using tdpy::detail::PyKind;
  const PyKind kind = tdpy::detail::kind_of(obj);
  if (kind == PyKind::kTensorDict || kind == PyKind::kTensorClass) {
    // A tensorclass converts to its dict remembering the class, which a
    // memmap save writes as Python's does.
    return tdpy::tensordict_from_python(obj);
  }
  if (kind == PyKind::kLazyStack) {
    return tdpy::lazy_stack_from_python(obj);
  }
  throw py::type_error(
      std::string("tensordict_cpp.") + what +
      " expects a tensordict.TensorDict, a tensorclass instance or a "
      "tensordict.LazyStackedTensorDict, got " +
      tdpy::detail::type_name(obj));
}

py::object root_to_python(const Root& root) {
  if (const auto* td = std::get_if<TensorDict>(&root)) {
    return tdpy::to_python(*td);
  }
  return tdpy::to_python(std::get<LazyStackedTensorDict>(root));
}

// A file system path as Python's open() takes it: str, bytes or a path-like
// object (os.fspath), as Python tensordict's functions accept them.
std::string path_from_python(py::handle obj, const char* argument) {
  py::object path = py::reinterpret_steal<py::object>(PyOS_FSPath(obj.ptr()));
  if (!path) {
    PyErr_Clear();
    throw py::type_error(
        std::string(argument) + " must be a str or an os.PathLike, got " +
        tdpy::detail::type_name(obj));
  }
  std::string out = PyBytes_Check(path.ptr())
                        ? std::string(
                              PyBytes_AS_STRING(path.ptr()),
                              static_cast<size_t>(PyBytes_GET_SIZE(path.ptr())))
                        : path.cast<std::string>();
  // The C library would stop at the NUL and use another path.
  if (out.find('\0') != std::string::npos) {
    throw py::value_error(std::string(argument) + " holds a NUL byte");
  }
  return out;
}

// Python's `subpath`: a nested key as a tuple of str, or a "/"-separated
// string.
std::vector<std::string> subpath_from_python(py::handle obj) {
  std::vector<std::string> parts;
  if (obj.is_none()) {
    return parts;
  }
  if (py::isinstance<py::str>(obj)) {
    const std::string text = obj.cast<std::string>();
    size_t start = 0;
    while (start <= text.size()) {
      const size_t end = std::min(text.find('/', start), text.size());
      if (end > start) {
        parts.push_back(text.substr(start, end - start));
      }
      start = end + 1;
    }
    return parts;
  }
  if (!py::isinstance<py::tuple>(obj) && !py::isinstance<py::list>(obj)) {
    throw py::type_error(
        "subpath must be a str or a tuple of str, got " +
        tdpy::detail::type_name(obj));
  }
  for (py::handle part : obj) {
    if (!py::isinstance<py::str>(part)) {
      throw py::type_error(
          "subpath must hold str keys, got " + tdpy::detail::type_name(part));
    }
    parts.push_back(part.cast<std::string>());
  }
  return parts;
}

tensordict::MapMode map_mode_from_python(
    const std::optional<std::string>& mode) {
  if (!mode) {
    return tensordict::MapMode::kAuto;
  }
  if (*mode == "r") {
    return tensordict::MapMode::kReadOnly;
  }
  if (*mode == "r+") {
    return tensordict::MapMode::kReadWrite;
  }
  throw py::value_error("mode must be None, 'r' or 'r+', got '" + *mode + "'");
}

std::optional<c10::Device> device_from_python(py::handle obj) {
  if (obj.is_none()) {
    return std::nullopt;
  }
  if (py::isinstance<py::str>(obj)) {
    return c10::Device(obj.cast<std::string>());
  }
  return obj.cast<c10::Device>();
}

// The options of memmap and save, Python's keyword arguments.
struct SaveArguments {
  py::object prefix;
  bool copy_existing;
  int64_t num_threads;
  bool existsok;
  bool robust_key;
  std::optional<bool> archive;
  std::optional<std::string> compression;
  bool atomic;
  bool durable;

  tensordict::MemmapOptions options() const {
    tensordict::MemmapOptions out(
        prefix.is_none() ? std::string() : path_from_python(prefix, "prefix"));
    out.copy_existing(copy_existing)
        .num_threads(num_threads)
        .existsok(existsok)
        .robust_key(robust_key)
        .archive(archive)
        .atomic(atomic)
        .durable(durable);
    if (compression) {
      out.compression(*compression);
    }
    return out;
  }
};

// NOTE [copy_existing from Python]
// Python's rule: a leaf that is a MemoryMappedTensor of a file outside the
// prefix needs copy_existing=True, else RuntimeError. The casters pass that
// leaf as a plain tensor, so the C++ save would copy it silently; this walk
// checks the Python objects first. It looks at the MemoryMappedTensor
// class only, as Python does: a plain view of a mapped file (a leaf of a
// consolidated file) is copied without complaint on both sides.
class MappedLeafCheck {
 public:
  explicit MappedLeafCheck(const std::string& prefix)
      : prefix_(std::filesystem::absolute(prefix).lexically_normal().string()),
        mapped_cls_(
            py::module_::import("tensordict").attr("MemoryMappedTensor")) {
    if (!prefix_.empty() && prefix_.back() != '/') {
      prefix_ += '/';
    }
  }

  void walk(py::handle obj) {
    using tdpy::detail::PyKind;
    switch (tdpy::detail::kind_of(obj)) {
      case PyKind::kTensor:
        check_leaf(obj);
        return;
      case PyKind::kTensorDict:
        walk_entries(obj.attr("_tensordict"));
        return;
      case PyKind::kTensorClass:
        walk_entries(obj.attr("_tensordict").attr("_tensordict"));
        return;
      case PyKind::kLazyStack:
        for (py::handle element : obj.attr("tensordicts")) {
          walk(element);
        }
        return;
      default:
        return;  // non-tensor data: no file
    }
  }

 private:
  void walk_entries(py::handle entries) {
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(entries.ptr(), &pos, &key, &value)) {
      path_.push_back(py::reinterpret_borrow<py::str>(key).cast<std::string>());
      walk(value);
      path_.pop_back();
    }
  }

  void check_leaf(py::handle tensor) {
    if (!py::isinstance(tensor, mapped_cls_)) {
      return;
    }
    py::object file = py::getattr(tensor, "_filename", py::none());
    if (file.is_none()) {
      return;
    }
    const std::string name =
        std::filesystem::absolute(path_from_python(file, "_filename"))
            .lexically_normal()
            .string();
    if (name.compare(0, prefix_.size(), prefix_) == 0) {
      return;  // a file of this prefix: the save handles it
    }
    std::string key = path_.size() == 1 ? "'" + path_[0] + "'" : "(";
    for (size_t i = 0; path_.size() != 1 && i < path_.size(); ++i) {
      key += (i == 0 ? "'" : ", '") + path_[i] + "'";
    }
    if (path_.size() != 1) {
      key += ")";
    }
    throw std::runtime_error(
        "A filename was provided but the tensor already has a file "
        "associated (" +
        name +
        "). To copy the tensor onto the new location, pass "
        "copy_existing=True. (" +
        key + ")");
  }

  std::string prefix_;
  py::object mapped_cls_;
  std::vector<std::string> path_;
};

py::object save_root(
    py::handle data, const SaveArguments& arguments, const char* what) {
  Root root = root_from_python(data, what);
  const tensordict::MemmapOptions options = arguments.options();
  if (!arguments.copy_existing && !options.prefix().empty() &&
      !options.writes_archive()) {
    // See NOTE [copy_existing from Python].
    MappedLeafCheck(options.prefix()).walk(data);
  }
  Root saved;
  {
    py::gil_scoped_release release;
    if (auto* td = std::get_if<TensorDict>(&root)) {
      saved = td->memmap(options);
    } else {
      saved = std::get<LazyStackedTensorDict>(root).memmap(options);
    }
  }
  return root_to_python(saved);
}

// Binds `name` of the save family with Python's keyword arguments, in
// Python's order: `memmap` takes `existsok`, `save` does not (it always
// replaces what the prefix holds).
void bind_save(
    py::module_& m, const char* name, bool with_existsok, const char* doc) {
  const auto def = [&](auto function, auto&&... existsok) {
    m.def(
        name,
        function,
        py::arg("data"),
        py::arg("prefix") = py::none(),
        py::arg("copy_existing") = false,
        py::kw_only(),
        py::arg("num_threads") = 0,
        existsok...,
        py::arg("robust_key") = true,
        py::arg("archive") = py::none(),
        py::arg("compression") = py::none(),
        py::arg("atomic") = false,
        py::arg("durable") = false,
        doc);
  };
  if (with_existsok) {
    def(
        [name](
            py::handle data,
            py::object prefix,
            bool copy_existing,
            int64_t num_threads,
            bool existsok,
            bool robust_key,
            std::optional<bool> archive,
            std::optional<std::string> compression,
            bool atomic,
            bool durable) {
          return save_root(
              data,
              {std::move(prefix),
               copy_existing,
               num_threads,
               existsok,
               robust_key,
               archive,
               std::move(compression),
               atomic,
               durable},
              name);
        },
        py::arg("existsok") = true);
  } else {
    def([name](
            py::handle data,
            py::object prefix,
            bool copy_existing,
            int64_t num_threads,
            bool robust_key,
            std::optional<bool> archive,
            std::optional<std::string> compression,
            bool atomic,
            bool durable) {
      return save_root(
          data,
          {std::move(prefix),
           copy_existing,
           num_threads,
           /*existsok=*/true,
           robust_key,
           archive,
           std::move(compression),
           atomic,
           durable},
          name);
    });
  }
}

py::object load_memmap(
    py::handle prefix,
    py::handle device,
    bool non_blocking,
    bool robust_key,
    py::handle subpath,
    const std::optional<std::string>& mode,
    int64_t num_threads) {
  const std::string path = path_from_python(prefix, "prefix");
  tensordict::LoadMemmapOptions options;
  options.device(device_from_python(device))
      .non_blocking(non_blocking)
      .robust_key(robust_key)
      .subpath(subpath_from_python(subpath))
      .mode(map_mode_from_python(mode))
      .num_threads(num_threads);
  Root loaded;
  {
    py::gil_scoped_release release;
    loaded = tensordict::load_memmap_any(path, options);
  }
  return root_to_python(loaded);
}

py::object consolidate(
    py::handle data,
    py::object filename,
    int64_t num_threads,
    py::handle device,
    bool share_memory,
    bool pin_memory,
    bool durable) {
  Root root = root_from_python(data, "consolidate");
  tensordict::ConsolidateOptions options;
  options
      .filename(
          filename.is_none() ? std::string()
                             : path_from_python(filename, "filename"))
      .num_threads(num_threads)
      .device(device_from_python(device))
      .share_memory(share_memory)
      .pin_memory(pin_memory)
      .durable(durable);
  Root out;
  {
    py::gil_scoped_release release;
    if (auto* td = std::get_if<TensorDict>(&root)) {
      out = td->consolidate(options);
    } else {
      out = std::get<LazyStackedTensorDict>(root).consolidate(options);
    }
  }
  return root_to_python(out);
}

py::object from_consolidated(py::handle filename) {
  const std::string path = path_from_python(filename, "filename");
  Root out;
  {
    py::gil_scoped_release release;
    out = tensordict::from_consolidated_any(path);
  }
  return root_to_python(out);
}

void to_safetensors(py::handle data, py::handle path) {
  Root root = root_from_python(data, "to_safetensors");
  const std::string file = path_from_python(path, "path");
  py::gil_scoped_release release;
  if (auto* td = std::get_if<TensorDict>(&root)) {
    tensordict::to_safetensors(*td, file);
  } else {
    tensordict::to_safetensors(std::get<LazyStackedTensorDict>(root), file);
  }
}

py::object from_safetensors(py::handle path, py::handle device) {
  const std::string file = path_from_python(path, "path");
  tensordict::FromSafetensorsOptions options;
  options.device(device_from_python(device));
  Root out;
  {
    py::gil_scoped_release release;
    out = tensordict::from_safetensors_any(file, options);
  }
  return root_to_python(out);
}

}  // namespace

void bind_storage(py::module_& m) {
  m.def(
      "load_memmap",
      &load_memmap,
      py::arg("prefix"),
      py::arg("device") = py::none(),
      py::arg("non_blocking") = false,
      py::kw_only(),
      py::arg("robust_key") = true,
      py::arg("subpath") = py::none(),
      py::arg("mode") = py::none(),
      py::arg("num_threads") = 0,
      "Loads a memmap directory (or .tdz archive) written by Python "
      "tensordict or TensorDict for C++, as tensordict.load_memmap: returns "
      "a tensordict.TensorDict (a LazyStackedTensorDict for a stack's tree) "
      "whose leaves map the files. Raises with the nested key on any "
      "inconsistency.");
  m.def(
      "load",
      &load_memmap,
      py::arg("prefix"),
      py::arg("device") = py::none(),
      py::arg("non_blocking") = false,
      py::kw_only(),
      py::arg("robust_key") = true,
      py::arg("subpath") = py::none(),
      py::arg("mode") = py::none(),
      py::arg("num_threads") = 0,
      "Same as load_memmap (tensordict.load).");
  bind_save(
      m,
      "memmap",
      /*with_existsok=*/true,
      "Writes data as a memmap directory under prefix (a .tdz prefix: one "
      "archive), in Python tensordict's layout, as tensordict.memmap; "
      "returns a new locked TensorDict whose leaves map the files. A "
      "complete earlier save at prefix is replaced atomically; an "
      "interrupted save never loads as a complete one; durable=True also "
      "fsyncs.");
  bind_save(
      m,
      "save",
      /*with_existsok=*/false,
      "Same as memmap without existsok (tensordict.save).");
  m.def(
      "consolidate",
      &consolidate,
      py::arg("data"),
      py::arg("filename") = py::none(),
      py::kw_only(),
      py::arg("num_threads") = 0,
      py::arg("device") = py::none(),
      py::arg("share_memory") = false,
      py::arg("pin_memory") = false,
      py::arg("durable") = false,
      "Copies data's leaves into one storage in Python's consolidated "
      "layout (data.consolidate(filename=...)); with filename, the storage "
      "maps that file. Returns the consolidated TensorDict, its leaves "
      "views of the storage.");
  m.def(
      "from_consolidated",
      &from_consolidated,
      py::arg("filename"),
      "Maps a file written by consolidate (here or by Python tensordict) "
      "and returns a TensorDict (or LazyStackedTensorDict) of views of it; "
      "every offset, size, dtype and shape is checked against the file.");
  m.def(
      "to_safetensors",
      &to_safetensors,
      py::arg("data"),
      py::arg("path"),
      "Writes data as a safetensors file with its tensordict structure "
      "(tensordict.to_safetensors), beside path and renamed over it.");
  m.def(
      "from_safetensors",
      &from_safetensors,
      py::arg("path"),
      py::kw_only(),
      py::arg("device") = py::none(),
      "Loads a safetensors file (tensordict.from_safetensors): with its "
      "tensordict structure when tensordict wrote it, else split on '.'.");
}
