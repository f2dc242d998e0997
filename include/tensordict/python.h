#pragma once

/// @file
/// pybind11 type casters between the C++ TensorDict and the installed Python
/// package's own classes: a bound function taking or returning a
/// `tensordict::TensorDict` takes or returns a real `tensordict.TensorDict`,
/// not a wrapper. Opt-in and header-only: <tensordict/tensordict.h> does not
/// include it, and only an extension module (which links torch_python and
/// Python, see `tensordict_add_python_module` in TensorDictPython.cmake)
/// should. Build extensions with that CMake helper; the README has a section
/// "Using TensorDicts from Python extensions".
//
// What crosses, both ways, with no copy of any tensor (the Python tensors are
// the C++ tensors' own Python objects, torch's THPVariable_Wrap / Unpack):
//   C++                          Python
//   TensorDict                   tensordict.TensorDict (nested dicts too)
//   LazyStackedTensorDict        tensordict.LazyStackedTensorDict (stack dim,
//                                stack dim name)
//   NonTensorData                tensordict.NonTensorData (the value as a
//                                Python object: None, bool, int, float, str,
//                                list, dict)
//   NonTensorStack               tensordict.NonTensorStack
//   a TensorClass                its dict, a tensordict.TensorDict; from
//                                Python, a tensorclass instance or a
//                                TensorDict (checked by `from_tensordict`)
// Batch size, device, dim names and the lock of every dict survive a round
// trip, as do key order and nested keys.
//
// NOTE [The GIL and the casters]
// The rule: conversions hold the GIL; C++ work on dicts releases it.
// - pybind11 runs casters with the GIL held, and every function of this
//   header needs it (it creates and reads Python objects).
// - A bound function that does real C++ work on the converted dicts should
//   release the GIL while it runs, so other Python threads proceed:
//   `m.def("step", &step, py::call_guard<py::gil_scoped_release>())`.
//   pybind11 converts the arguments before the guard takes effect and the
//   result after it ends, so the conversions still hold the GIL.
// - A C++ dict converted from Python shares its tensors with Python objects;
//   dropping the last C++ reference to such a tensor without the GIL is safe
//   (torch takes the GIL to free the Python object).
// - Two threads writing the same tensors, one from Python and one from C++,
//   need the same synchronisation as any shared at::Tensor.
//
// Differences from Python, for C++'s sake:
// - Python → C++ raises TypeError naming the key for an entry a C++ dict
//   cannot hold: a non-tensor value with no JSON form (any object only
//   pickle can save), a nested (jagged) tensor, another TensorDictBase kind
//   (`_SubTensorDict`, persistent dicts, ...), a lazy stack of lazy stacks,
//   or a lazy stack whose elements' batch sizes differ. A top-level argument
//   that is not a TensorDict makes pybind11's own TypeError (overloads are
//   still tried); `from_python` raises one naming the type.
// - Tuples inside non-tensor values come back as lists (JSON has no tuple),
//   and dict keys inside them must be strings.
// - A tensor subclass (`MemoryMappedTensor`, `nn.Parameter`) becomes a plain
//   at::Tensor in C++; the same C++ tensor goes back to Python as the
//   original Python object while that object lives.
// - The Python class of a tensorclass is not rebuilt: a C++ TensorClass, or
//   a dict loaded from a tensorclass, reaches Python as a TensorDict.
//   The other way, a tensorclass instance becomes its dict remembering the
//   class (`python_class()`), so that a save writes the class as Python's
//   own save does.
// - Memmap and shared-memory flags of Python dicts are not carried (the
//   tensors keep their storage either way).
//
// C++ → Python builds each dict as Python's `TensorDict._new_unsafe` does,
// without re-validating what the C++ dict already guarantees (shapes start
// with the batch size, names are unique, devices agree): a new instance
// whose `_tensordict`, `_batch_size`, `_device` and `_td_dim_names` are set
// directly. tests/python/python_casters.py checks every result with
// `tensordict.utils._check_invariants`.

#include <pybind11/gil_safe_call_once.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensordict/tensordict.h"

// Hidden like pybind11's own namespace: the casters hold pybind11 objects,
// and each extension module keeps its own copy.
#if defined(__GNUC__) || defined(__clang__)
#define TENSORDICT_PYTHON_HIDDEN __attribute__((visibility("hidden")))
#else
#define TENSORDICT_PYTHON_HIDDEN
#endif

TENSORDICT_BEGIN_NAMESPACE
/// Conversions to and from the Python package, for extension modules.
namespace TENSORDICT_PYTHON_HIDDEN python {

namespace detail {

namespace py = pybind11;

/// The Python classes and attribute names the casters use, looked up once
/// per process (with the GIL held, without deadlock: see pybind11's
/// gil_safe_call_once_and_store).
struct PythonClasses {
  py::object tensordict_cls;
  py::object lazy_stack_cls;
  py::object non_tensor_data_cls;
  py::object non_tensor_stack_cls;
  py::object tensor_collection_base;  // tensordict.base.TensorDictBase
  py::object is_tensorclass;
  py::object size_cls;  // torch.Size
  py::object empty_tuple;
  py::str attr_tensordict{"_tensordict"};
  py::str attr_batch_size{"_batch_size"};
  py::str attr_device{"_device"};
  py::str attr_names{"_td_dim_names"};
  py::str attr_is_locked{"_is_locked"};
  py::str attr_lock{"lock_"};
  py::str attr_tensordicts{"tensordicts"};
  py::str attr_stack_dim{"stack_dim"};
  py::str attr_stack_dim_name{"_td_dim_name"};
  py::str attr_data{"data"};
  py::str attr_tolist{"tolist"};
  py::str kw_data{"data"};
  py::str kw_batch_size{"batch_size"};
  py::str kw_device{"device"};
  py::str kw_stack_dim{"stack_dim"};
  py::str kw_stack_dim_name{"stack_dim_name"};
};

/// Returns the classes, importing tensordict on first use.
inline const PythonClasses& classes() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<PythonClasses>
      storage;
  return storage
      .call_once_and_store_result([] {
        PythonClasses c;
        py::module_ td = py::module_::import("tensordict");
        c.tensordict_cls = td.attr("TensorDict");
        c.lazy_stack_cls = td.attr("LazyStackedTensorDict");
        c.non_tensor_data_cls = td.attr("NonTensorData");
        c.non_tensor_stack_cls = td.attr("NonTensorStack");
        c.tensor_collection_base =
            py::module_::import("tensordict.base").attr("TensorDictBase");
        c.is_tensorclass = td.attr("is_tensorclass");
        c.size_cls = py::module_::import("torch").attr("Size");
        c.empty_tuple = py::tuple();
        return c;
      })
      .get_stored();
}

/// The key path of the entry being converted, for error messages.
class KeyPath {
 public:
  /// Enters `key`; leaves it when the returned guard dies.
  struct Scope {
    /// Appends `key` to `path`.
    Scope(KeyPath& path, std::string_view key) : path_(path) {
      path_.parts_.emplace_back(key);
    }
    /// Removes the key again.
    ~Scope() {
      path_.parts_.pop_back();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    KeyPath& path_;
  };
  /// Returns the key as Python spells it: 'a' or ('a', 'b').
  std::string repr() const {
    std::string out = parts_.size() == 1 ? "" : "(";
    for (size_t i = 0; i < parts_.size(); ++i) {
      out += (i == 0 ? "'" : ", '") + parts_[i] + "'";
    }
    return parts_.size() == 1 ? out : out + ")";
  }
  /// Returns true at the top level (no key entered).
  bool empty() const noexcept {
    return parts_.empty();
  }

 private:
  std::vector<std::string> parts_;
};

/// Raises TypeError naming the entry at `path`.
[[noreturn]] inline void throw_entry_error(
    const KeyPath& path, const std::string& what) {
  if (path.empty()) {
    throw py::type_error("cannot convert to a C++ TensorDict: " + what);
  }
  throw py::type_error(
      "cannot convert the entry at key " + path.repr() +
      " to a C++ TensorDict: " + what);
}

/// Returns the Python type name of `obj`.
inline std::string type_name(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__qualname__"));
}

// --- JSON <-> Python objects
// --------------------------------------------------

/// Returns the Python object of a JSON value (lists and dicts are new).
inline py::object json_to_python(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return py::none();
    case Json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case Json::value_t::number_integer:
      return py::int_(value.get<int64_t>());
    case Json::value_t::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case Json::value_t::number_float:
      return py::float_(value.get<double>());
    case Json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case Json::value_t::array: {
      py::list out(value.size());
      size_t i = 0;
      for (const Json& item : value) {
        out[i++] = json_to_python(item);
      }
      return std::move(out);
    }
    case Json::value_t::object: {
      py::dict out;
      for (const auto& [key, item] : value.items()) {
        out[py::str(key)] = json_to_python(item);
      }
      return std::move(out);
    }
    case Json::value_t::binary: {
      const auto& bytes = value.get_binary();
      return py::bytes(
          reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    case Json::value_t::discarded:
      break;
  }
  return py::none();
}

/// Returns the JSON form of a Python value; raises TypeError naming the
/// entry at `path` for a value with none.
inline Json python_to_json(py::handle obj, const KeyPath& path) {
  if (obj.is_none()) {
    return nullptr;
  }
  if (PyBool_Check(obj.ptr())) {
    return obj.ptr() == Py_True;
  }
  if (PyLong_Check(obj.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow == 0) {
      return static_cast<int64_t>(v);
    }
    const unsigned long long u = PyLong_AsUnsignedLongLong(obj.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw_entry_error(
          path,
          "the integer " + std::string(py::str(obj)) + " does not fit 64 bits");
    }
    return static_cast<uint64_t>(u);
  }
  if (PyFloat_Check(obj.ptr())) {
    return PyFloat_AS_DOUBLE(obj.ptr());
  }
  if (PyUnicode_Check(obj.ptr())) {
    return obj.cast<std::string>();
  }
  if (PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr())) {
    Json out = Json::array();
    for (py::handle item : obj) {
      out.push_back(python_to_json(item, path));
    }
    return out;
  }
  if (PyDict_Check(obj.ptr())) {
    Json out = Json::object();
    for (auto [key, item] : py::reinterpret_borrow<py::dict>(obj)) {
      if (!PyUnicode_Check(key.ptr())) {
        throw_entry_error(
            path,
            "a non-tensor dict has the key " + std::string(py::repr(key)) +
                "; C++ keeps non-tensor values as JSON, whose keys "
                "are strings");
      }
      out[key.cast<std::string>()] = python_to_json(item, path);
    }
    return out;
  }
  throw_entry_error(
      path,
      "the non-tensor value of type " + type_name(obj) +
          " has no JSON form (C++ keeps non-tensor values as JSON: "
          "None, bool, int, float, str, list, dict); only pickle "
          "could save it");
}

// --- C++ -> Python
// ------------------------------------------------------------

/// Converts one dict tree; keeps the batch sizes it made so nested dicts of
/// the same size share one torch.Size, as Python's `_new_unsafe` does.
class ToPython {
 public:
  ToPython() : c_(classes()) {}

  /// Returns a new `tensordict.TensorDict` sharing `td`'s tensors.
  py::object tensordict(const TensorDict& td) {
    PyTypeObject* cls =
        reinterpret_cast<PyTypeObject*>(c_.tensordict_cls.ptr());
    // object.__new__(TensorDict): TensorDict defines no __new__.
    py::object self = py::reinterpret_steal<py::object>(
        cls->tp_new(cls, c_.empty_tuple.ptr(), nullptr));
    if (!self) {
      throw py::error_already_set();
    }
    py::dict entries;
    for (const auto& [key, value] : td.items()) {
      const std::string_view name = key[0];
      py::object py_key = py::reinterpret_steal<py::object>(
          PyUnicode_FromStringAndSize(name.data(), name.size()));
      if (!py_key) {
        throw py::error_already_set();
      }
      py::object py_value = entry(value);
      if (value.is_non_tensor_stack() && td.has_names()) {
        // C++ stacks have no names; Python's take the parent's on set.
        name_non_tensor_stack(py_value, td.names());
      }
      if (PyDict_SetItem(entries.ptr(), py_key.ptr(), py_value.ptr()) != 0) {
        throw py::error_already_set();
      }
    }
    set_attr(self, c_.attr_tensordict, entries);
    set_attr(self, c_.attr_batch_size, size(td.batch_size()));
    set_attr(self, c_.attr_device, device(td.device()));
    set_attr(self, c_.attr_names, td.has_names() ? names(td.names()) : none());
    if (td.is_locked()) {
      self.attr(c_.attr_lock)();
    }
    return self;
  }

  /// Returns a new `tensordict.LazyStackedTensorDict` over new Python dicts
  /// sharing the elements' tensors.
  py::object lazy_stack(const LazyStackedTensorDict& stack) {
    const std::vector<TensorDict>& elements = stack.tensordicts();
    py::tuple args(elements.size());
    for (size_t i = 0; i < elements.size(); ++i) {
      args[i] = tensordict(elements[i]);
    }
    py::dict kwargs;
    kwargs[c_.kw_stack_dim] = stack.stack_dim();
    if (stack.stack_dim_name()) {
      kwargs[c_.kw_stack_dim_name] = *stack.stack_dim_name();
    }
    return c_.lazy_stack_cls(*args, **kwargs);
  }

  /// Returns a new `tensordict.NonTensorData`.
  py::object non_tensor_data(const NonTensorData& data) {
    return c_.non_tensor_data_cls(
        py::arg("data") = json_to_python(data.data()),
        py::arg("batch_size") = size(data.batch_size()),
        py::arg("device") = device(data.device()));
  }

  /// Returns a new `tensordict.NonTensorStack`: nested stacks along dim 0
  /// down to one NonTensorData per element.
  py::object non_tensor_stack(const NonTensorStack& stack) {
    const c10::IntArrayRef batch_size = stack.batch_size();
    if (batch_size.empty()) {
      return c_.non_tensor_data_cls(
          py::arg("data") = json_to_python(stack.at(0)),
          py::arg("batch_size") = size(batch_size),
          py::arg("device") = device(stack.device()));
    }
    size_t next = 0;
    return stack_level(stack, batch_size, next);
  }

  /// Returns the Python form of any entry.
  py::object entry(const Value& value) {
    switch (value.kind()) {
      case Value::Kind::kTensor:
        return py::reinterpret_steal<py::object>(
            THPVariable_Wrap(value.tensor()));
      case Value::Kind::kTensorDict:
        return tensordict(value.tensordict());
      case Value::Kind::kNonTensorData:
        return non_tensor_data(value.non_tensor_data());
      case Value::Kind::kNonTensorStack:
        return non_tensor_stack(value.non_tensor_stack());
      case Value::Kind::kLazyStack:
        return lazy_stack(value.lazy_stack());
    }
    return py::none();
  }

 private:
  static void set_attr(py::handle self, py::handle name, py::handle value) {
    // object.__setattr__, as Python's _new_unsafe's plain assignments reach.
    if (PyObject_GenericSetAttr(self.ptr(), name.ptr(), value.ptr()) != 0) {
      throw py::error_already_set();
    }
  }

  // Gives a NonTensorStack the parent's names for the dims they share, as
  // Python's TensorDict does when the stack is set into a named dict.
  static void name_non_tensor_stack(py::handle stack, const DimNames& names) {
    py::list full = py::reinterpret_steal<py::list>(
        detail::ToPython::names(names).release());
    const size_t ndim = py::len(stack.attr("batch_size"));
    while (py::len(full) < ndim) {
      full.append(py::none());
    }
    while (py::len(full) > ndim) {
      full.attr("pop")();
    }
    stack.attr("names") = full;
  }

  static py::object none() {
    return py::none();
  }

  py::object size(c10::IntArrayRef sizes) {
    for (const auto& [dims, obj] : sizes_) {
      if (c10::IntArrayRef(dims) == sizes) {
        return obj;
      }
    }
    py::tuple dims(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      dims[i] = py::int_(sizes[i]);
    }
    py::object obj = c_.size_cls(dims);
    sizes_.emplace_back(sizes.vec(), obj);
    return obj;
  }

  static py::object device(const std::optional<c10::Device>& device) {
    if (!device) {
      return py::none();
    }
    return py::reinterpret_steal<py::object>(THPDevice_New(*device));
  }

  static py::object names(const DimNames& names) {
    py::list out(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      out[i] = names[i] ? py::object(py::str(*names[i])) : py::none();
    }
    return std::move(out);
  }

  py::object stack_level(
      const NonTensorStack& stack, c10::IntArrayRef dims, size_t& next) {
    py::tuple args(dims[0]);
    for (int64_t i = 0; i < dims[0]; ++i) {
      if (dims.size() == 1) {
        args[i] = c_.non_tensor_data_cls(
            py::arg("data") = json_to_python(stack.at(next++)),
            py::arg("batch_size") = size({}),
            py::arg("device") = device(stack.device()));
      } else {
        args[i] = stack_level(stack, dims.slice(1), next);
      }
    }
    return c_.non_tensor_stack_cls(*args, py::arg("stack_dim") = 0);
  }

  const PythonClasses& c_;
  std::vector<std::pair<std::vector<int64_t>, py::object>> sizes_;
};

// --- Python -> C++
// ------------------------------------------------------------

/// What a Python object is, for the converter.
enum class PyKind {
  kTensor,
  kTensorDict,
  kLazyStack,
  kNonTensorData,
  kNonTensorStack,
  kTensorClass,
  kOther
};

/// Returns the kind of `obj`.
inline PyKind kind_of(py::handle obj) {
  const PythonClasses& c = classes();
  PyTypeObject* type = Py_TYPE(obj.ptr());
  if (THPVariable_Check(obj.ptr())) {
    return PyKind::kTensor;
  }
  if (type == reinterpret_cast<PyTypeObject*>(c.tensordict_cls.ptr())) {
    return PyKind::kTensorDict;
  }
  // NonTensorStack derives from LazyStackedTensorDict: test it first.
  if (py::isinstance(obj, c.non_tensor_stack_cls)) {
    return PyKind::kNonTensorStack;
  }
  if (py::isinstance(obj, c.non_tensor_data_cls)) {
    return PyKind::kNonTensorData;
  }
  if (py::isinstance(obj, c.lazy_stack_cls)) {
    return PyKind::kLazyStack;
  }
  if (py::isinstance(obj, c.tensordict_cls)) {
    return PyKind::kTensorDict;  // a subclass of TensorDict
  }
  if (c.is_tensorclass(obj).cast<bool>()) {
    return PyKind::kTensorClass;
  }
  return PyKind::kOther;
}

/// Returns the ints of a torch.Size (or any sequence of ints).
inline std::vector<int64_t> int_list(py::handle obj) {
  std::vector<int64_t> out;
  for (py::handle item : obj) {
    out.push_back(item.cast<int64_t>());
  }
  return out;
}

/// Returns the device of a Python `_device` attribute (None or a
/// torch.device).
inline std::optional<c10::Device> device_of(py::handle obj) {
  if (obj.is_none()) {
    return std::nullopt;
  }
  if (!THPDevice_Check(obj.ptr())) {
    return obj.cast<c10::Device>();
  }
  return reinterpret_cast<THPDevice*>(obj.ptr())->device;
}

/// Returns dim names from a list of str/None.
inline DimNames names_of(py::handle obj) {
  DimNames out;
  for (py::handle item : obj) {
    if (item.is_none()) {
      out.emplace_back(std::nullopt);
    } else {
      out.emplace_back(item.cast<std::string>());
    }
  }
  return out;
}

inline TensorDict tensordict_from_python(py::handle obj, KeyPath& path);
inline TensorDict tensorclass_from_python(py::handle obj, KeyPath& path);
inline LazyStackedTensorDict lazy_stack_from_python(
    py::handle obj, KeyPath& path);

/// Returns the C++ NonTensorData of a Python NonTensorData.
inline NonTensorData non_tensor_data_from_python(
    py::handle obj, const KeyPath& path) {
  return NonTensorData(
      python_to_json(obj.attr(classes().attr_data), path),
      int_list(obj.attr("batch_size")),
      device_of(obj.attr("device")));
}

/// Flattens `depth` levels of nested lists into `out`, row-major.
inline void flatten_into(
    py::handle list,
    int64_t depth,
    std::vector<Json>& out,
    const KeyPath& path) {
  if (depth == 0) {
    out.push_back(python_to_json(list, path));
    return;
  }
  for (py::handle item : list) {
    flatten_into(item, depth - 1, out, path);
  }
}

/// Returns the C++ NonTensorStack of a Python NonTensorStack.
inline NonTensorStack non_tensor_stack_from_python(
    py::handle obj, const KeyPath& path) {
  std::vector<int64_t> batch_size = int_list(obj.attr("batch_size"));
  std::vector<Json> values;
  flatten_into(
      obj.attr(classes().attr_tolist)(),
      static_cast<int64_t>(batch_size.size()),
      values,
      path);
  try {
    return NonTensorStack(
        std::move(values), batch_size, device_of(obj.attr("device")));
  } catch (const std::exception& e) {
    throw_entry_error(path, e.what());
  }
}

/// Returns the C++ form of one entry; raises TypeError naming `path` for
/// what C++ cannot hold.
inline Value value_from_python(py::handle obj, KeyPath& path) {
  switch (kind_of(obj)) {
    case PyKind::kTensor: {
      const at::Tensor& tensor = THPVariable_Unpack(obj.ptr());
      if (tensor.is_nested()) {
        throw_entry_error(
            path,
            "a nested (jagged) tensor has no C++ TensorDict form; "
            "pad it (torch.nested.to_padded_tensor) or store its parts");
      }
      return Value(tensor);
    }
    case PyKind::kTensorDict:
      return Value(tensordict_from_python(obj, path));
    case PyKind::kTensorClass:
      return Value(tensorclass_from_python(obj, path));
    case PyKind::kLazyStack:
      return Value(lazy_stack_from_python(obj, path));
    case PyKind::kNonTensorData:
      return Value(non_tensor_data_from_python(obj, path));
    case PyKind::kNonTensorStack:
      return Value(non_tensor_stack_from_python(obj, path));
    case PyKind::kOther:
      break;
  }
  if (py::isinstance(obj, classes().tensor_collection_base)) {
    throw_entry_error(
        path,
        "a " + type_name(obj) +
            " has no C++ form without a copy; convert it with "
            ".to_tensordict() first");
  }
  throw_entry_error(
      path, "an entry of type " + type_name(obj) + " has no C++ form");
}

/// Returns the C++ dict of a Python TensorDict (a subclass's dict too),
/// sharing its tensors.
inline TensorDict tensordict_from_python(py::handle obj, KeyPath& path) {
  const PythonClasses& c = classes();
  py::object entries = obj.attr(c.attr_tensordict);
  py::object names = obj.attr(c.attr_names);
  TensorDict td;
  try {
    td = TensorDict(
        int_list(obj.attr(c.attr_batch_size)),
        device_of(obj.attr(c.attr_device)),
        names.is_none() ? DimNames{} : names_of(names));
  } catch (const std::exception& e) {
    throw_entry_error(path, e.what());
  }
  PyObject* key = nullptr;
  PyObject* item = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(entries.ptr(), &pos, &key, &item)) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(key, &size);
    if (data == nullptr) {
      throw py::error_already_set();
    }
    const std::string_view name(data, static_cast<size_t>(size));
    KeyPath::Scope scope(path, name);
    Value value = value_from_python(item, path);
    try {
      if (value.is_tensor()) {
        td.set(NestedKey(name), value.tensor());
      } else {
        td.set(NestedKey(name), value);
      }
    } catch (const std::exception& e) {
      throw_entry_error(path, e.what());
    }
  }
  py::object locked = py::getattr(obj, c.attr_is_locked, py::none());
  if (!locked.is_none() && locked.cast<bool>()) {
    td.lock_();
  }
  return td;
}

/// Returns the C++ dict of a tensorclass instance: its `_tensordict`,
/// remembering the class as Python's `_type` spells it (`str(type(obj))`),
/// so that a save writes the class and Python loads that class back.
inline TensorDict tensorclass_from_python(py::handle obj, KeyPath& path) {
  TensorDict td =
      tensordict_from_python(obj.attr(classes().attr_tensordict), path);
  td.set_python_class(py::str(py::type::handle_of(obj)));
  return td;
}

/// Returns the C++ lazy stack of a Python LazyStackedTensorDict, sharing
/// its elements' tensors.
inline LazyStackedTensorDict lazy_stack_from_python(
    py::handle obj, KeyPath& path) {
  const PythonClasses& c = classes();
  std::vector<TensorDict> elements;
  for (py::handle element : obj.attr(c.attr_tensordicts)) {
    const PyKind kind = kind_of(element);
    if (kind == PyKind::kTensorDict) {
      elements.push_back(tensordict_from_python(element, path));
    } else if (kind == PyKind::kTensorClass) {
      elements.push_back(tensorclass_from_python(element, path));
    } else {
      throw_entry_error(
          path,
          "a lazy stack of " + type_name(element) +
              " has no C++ form (C++ lazy stacks hold TensorDicts)");
    }
  }
  py::object name = py::getattr(obj, c.attr_stack_dim_name, py::none());
  try {
    return LazyStackedTensorDict(
        std::move(elements),
        obj.attr(c.attr_stack_dim).cast<int64_t>(),
        name.is_none() ? std::nullopt
                       : std::optional<std::string>(name.cast<std::string>()));
  } catch (const std::exception& e) {
    throw_entry_error(path, e.what());
  }
}

}  // namespace detail

/// Returns a new `tensordict.TensorDict` sharing `td`'s tensors (nested
/// dicts, non-tensor data and lazy stacks converted too). Needs the GIL.
inline pybind11::object to_python(const TensorDict& td) {
  return detail::ToPython().tensordict(td);
}
/// Returns a new `tensordict.LazyStackedTensorDict` over the elements.
/// Needs the GIL.
inline pybind11::object to_python(const LazyStackedTensorDict& stack) {
  return detail::ToPython().lazy_stack(stack);
}
/// Returns a new `tensordict.NonTensorData`. Needs the GIL.
inline pybind11::object to_python(const NonTensorData& data) {
  return detail::ToPython().non_tensor_data(data);
}
/// Returns a new `tensordict.NonTensorStack`. Needs the GIL.
inline pybind11::object to_python(const NonTensorStack& stack) {
  return detail::ToPython().non_tensor_stack(stack);
}
/// Returns the Python form of any entry (a tensor is its own Python
/// object). Needs the GIL.
inline pybind11::object to_python(const Value& value) {
  return detail::ToPython().entry(value);
}
/// Returns the Python object of a JSON value. Needs the GIL.
inline pybind11::object to_python(const Json& value) {
  return detail::json_to_python(value);
}

/// Returns the C++ dict of a Python `TensorDict` or tensorclass instance,
/// sharing its tensors; raises TypeError naming the type for anything else
/// and naming the key for an entry C++ cannot hold. Needs the GIL.
inline TensorDict tensordict_from_python(pybind11::handle obj) {
  detail::KeyPath path;
  const detail::PyKind kind = detail::kind_of(obj);
  if (kind == detail::PyKind::kTensorDict) {
    return detail::tensordict_from_python(obj, path);
  }
  if (kind == detail::PyKind::kTensorClass) {
    return detail::tensorclass_from_python(obj, path);
  }
  throw pybind11::type_error(
      "expected a tensordict.TensorDict or a tensorclass instance, got " +
      detail::type_name(obj));
}
/// Returns the C++ lazy stack of a Python `LazyStackedTensorDict`; raises
/// TypeError as `tensordict_from_python`. Needs the GIL.
inline LazyStackedTensorDict lazy_stack_from_python(pybind11::handle obj) {
  detail::KeyPath path;
  if (detail::kind_of(obj) != detail::PyKind::kLazyStack) {
    throw pybind11::type_error(
        "expected a tensordict.LazyStackedTensorDict, got " +
        detail::type_name(obj));
  }
  return detail::lazy_stack_from_python(obj, path);
}
/// Returns the C++ form of any Python entry (tensor, dict, lazy stack,
/// non-tensor data or stack, tensorclass as its dict); raises TypeError for
/// what C++ cannot hold. Needs the GIL.
inline Value value_from_python(pybind11::handle obj) {
  detail::KeyPath path;
  return detail::value_from_python(obj, path);
}
/// Returns the JSON form of a Python value (None, bool, int, float, str,
/// list, tuple, dict with str keys); raises TypeError otherwise. Needs the
/// GIL.
inline Json json_from_python(pybind11::handle obj) {
  detail::KeyPath path;
  return detail::python_to_json(obj, path);
}

}  // namespace python
TENSORDICT_END_NAMESPACE

namespace pybind11::detail {

/// How the caster of one tensordict type converts: the Python type it
/// names, the kinds of Python object it loads (anything else makes `load`
/// return false, so that pybind11 tries the next overload), and the two
/// conversions. One specialization per type, below.
template <typename T, typename Enable = void>
struct tensordict_cast_traits;

/// The one caster of the tensordict types, as pybind11's `list_caster` is of
/// the sequences: it holds the loaded value in an optional (the types need
/// no default constructor) and gives the cast operators and the pointer
/// `cast` that `PYBIND11_TYPE_CASTER` would.
template <typename T>
struct tensordict_caster {
  using Traits = tensordict_cast_traits<T>;
  static constexpr auto name = Traits::name;
  template <typename U>
  using cast_op_type = movable_cast_op_type<U>;

  /// Converts a Python object of one of the kinds the type takes; false for
  /// other types, and the conversion's error (naming the key) for an entry
  /// C++ cannot hold.
  bool load(handle src, bool /*convert*/) {
    if (!Traits::accepts(tensordict::python::detail::kind_of(src))) {
      return false;
    }
    value = Traits::from_python(src);
    return true;
  }
  /// Returns a new Python object sharing the tensors.
  static handle cast(
      const T& src, return_value_policy /*policy*/, handle /*parent*/) {
    return Traits::to_python(src).release();
  }
  /// A pointer: None for null, else the pointee (deleted after the cast
  /// under `take_ownership`), as `PYBIND11_TYPE_CASTER` does.
  template <
      typename U,
      enable_if_t<std::is_same<T, remove_cv_t<U>>::value, int> = 0>
  static handle cast(U* src, return_value_policy policy, handle parent) {
    if (src == nullptr) {
      return none().release();
    }
    if (policy == return_value_policy::take_ownership) {
      handle out = cast(*src, policy, parent);
      delete src;
      return out;
    }
    return cast(*src, policy, parent);
  }
  /// Returns the converted value (pybind11's cast_op).
  operator T*() {
    return &*value;
  }
  /// Returns the converted value (pybind11's cast_op).
  operator T&() {
    return *value;
  }
  /// Moves the converted value out (pybind11's cast_op).
  operator T&&() && {
    return std::move(*value);
  }

 private:
  std::optional<T> value;
};

/// True for the dict kinds: a TensorDict, or a tensorclass instance (as its
/// dict).
inline bool tensordict_cast_accepts_dict(
    tensordict::python::detail::PyKind kind) {
  return kind == tensordict::python::detail::PyKind::kTensorDict ||
         kind == tensordict::python::detail::PyKind::kTensorClass;
}

/// `tensordict::TensorDict` <-> `tensordict.TensorDict` (or a tensorclass
/// instance, as its dict), sharing tensors. See tensordict/python.h.
template <>
struct tensordict_cast_traits<tensordict::TensorDict> {
  static constexpr auto name = const_name("tensordict.TensorDict");
  static bool accepts(tensordict::python::detail::PyKind kind) {
    return tensordict_cast_accepts_dict(kind);
  }
  static tensordict::TensorDict from_python(handle src) {
    return tensordict::python::tensordict_from_python(src);
  }
  static object to_python(const tensordict::TensorDict& src) {
    return tensordict::python::to_python(src);
  }
};

/// `tensordict::LazyStackedTensorDict` <-> `tensordict.LazyStackedTensorDict`
/// (out: a new Python lazy stack over new Python dicts).
template <>
struct tensordict_cast_traits<tensordict::LazyStackedTensorDict> {
  static constexpr auto name = const_name("tensordict.LazyStackedTensorDict");
  static bool accepts(tensordict::python::detail::PyKind kind) {
    return kind == tensordict::python::detail::PyKind::kLazyStack;
  }
  static tensordict::LazyStackedTensorDict from_python(handle src) {
    return tensordict::python::lazy_stack_from_python(src);
  }
  static object to_python(const tensordict::LazyStackedTensorDict& src) {
    return tensordict::python::to_python(src);
  }
};

/// `tensordict::NonTensorData` <-> `tensordict.NonTensorData`.
template <>
struct tensordict_cast_traits<tensordict::NonTensorData> {
  static constexpr auto name = const_name("tensordict.NonTensorData");
  static bool accepts(tensordict::python::detail::PyKind kind) {
    return kind == tensordict::python::detail::PyKind::kNonTensorData;
  }
  static tensordict::NonTensorData from_python(handle src) {
    tensordict::python::detail::KeyPath path;
    return tensordict::python::detail::non_tensor_data_from_python(src, path);
  }
  static object to_python(const tensordict::NonTensorData& src) {
    return tensordict::python::to_python(src);
  }
};

/// `tensordict::NonTensorStack` <-> `tensordict.NonTensorStack`.
template <>
struct tensordict_cast_traits<tensordict::NonTensorStack> {
  static constexpr auto name = const_name("tensordict.NonTensorStack");
  static bool accepts(tensordict::python::detail::PyKind kind) {
    return kind == tensordict::python::detail::PyKind::kNonTensorStack;
  }
  static tensordict::NonTensorStack from_python(handle src) {
    tensordict::python::detail::KeyPath path;
    return tensordict::python::detail::non_tensor_stack_from_python(src, path);
  }
  static object to_python(const tensordict::NonTensorStack& src) {
    return tensordict::python::to_python(src);
  }
};

/// A C++ TensorClass <-> its dict: a Python TensorDict out; a tensorclass
/// instance or a TensorDict in, checked by `T::from_tensordict` (whose
/// error says which fields do not fit).
template <typename T>
struct tensordict_cast_traits<
    T,
    std::enable_if_t<tensordict::is_tensor_class_v<T>>> {
  static constexpr auto name = const_name("tensordict.TensorDict");
  static bool accepts(tensordict::python::detail::PyKind kind) {
    return tensordict_cast_accepts_dict(kind);
  }
  static T from_python(handle src) {
    return T::from_tensordict(tensordict::python::tensordict_from_python(src));
  }
  static object to_python(const T& src) {
    return tensordict::python::to_python(src.tensordict());
  }
};

/// The caster of `tensordict::TensorDict`.
template <>
struct type_caster<tensordict::TensorDict>
    : tensordict_caster<tensordict::TensorDict> {};
/// The caster of `tensordict::LazyStackedTensorDict`.
template <>
struct type_caster<tensordict::LazyStackedTensorDict>
    : tensordict_caster<tensordict::LazyStackedTensorDict> {};
/// The caster of `tensordict::NonTensorData`.
template <>
struct type_caster<tensordict::NonTensorData>
    : tensordict_caster<tensordict::NonTensorData> {};
/// The caster of `tensordict::NonTensorStack`.
template <>
struct type_caster<tensordict::NonTensorStack>
    : tensordict_caster<tensordict::NonTensorStack> {};
/// The caster of every C++ TensorClass.
template <typename T>
struct type_caster<T, std::enable_if_t<tensordict::is_tensor_class_v<T>>>
    : tensordict_caster<T> {};

}  // namespace pybind11::detail
