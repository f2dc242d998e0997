// tensordict_cpp._C: the C++ engine for Python users. Bound functions take
// and return Python's own tensordict.TensorDict through the casters of
// <tensordict/python.h>. tensordict_cpp/__init__.py checks torch's version
// before this module is loaded (a mismatched libtorch fails with missing
// symbols, not with a message, once the loader is at work).

#include <pybind11/pybind11.h>
#include <tensordict/memmap.h>
#include <tensordict/python.h>
#include <tensordict/tensor_dict.h>
#include <torch/version.h>

#include <string>

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "TensorDict for C++, bound on tensordict/python.h";
  // The torch this module was compiled against, from torch's own headers
  // (the Python check reads the version recorded at build time; the two
  // must agree).
  m.attr("TORCH_VERSION") = std::to_string(TORCH_VERSION_MAJOR) + "." +
                            std::to_string(TORCH_VERSION_MINOR) + "." +
                            std::to_string(TORCH_VERSION_PATCH);
  m.def(
      "load_memmap",
      [](const std::string& prefix) {
        return tensordict::TensorDict::load_memmap(prefix);
      },
      py::arg("prefix"),
      // The load is C++ work on files: other Python threads run meanwhile.
      py::call_guard<py::gil_scoped_release>(),
      "Loads a memmap directory (or .tdz archive) written by Python "
      "tensordict or TensorDict for C++ with the C++ reader; returns a "
      "tensordict.TensorDict whose leaves map the files. Raises with the "
      "nested key on any inconsistency.");
}
