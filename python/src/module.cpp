// tensordict_cpp._C: the C++ engine for Python users. Bound functions take
// and return Python's own tensordict.TensorDict through the casters of
// <tensordict/python.h>. tensordict_cpp/__init__.py checks torch's version
// before this module is loaded (a mismatched libtorch fails with missing
// symbols, not with a message, once the loader is at work).
//
// The storage functions read and write Python tensordict's own formats
// (memmap directories and .tdz archives, consolidated files, safetensors),
// so either side reads what the other wrote. Each releases the GIL while
// the C++ side works on files; conversions hold it (NOTE [The GIL and the
// casters] in python.h).

#include <pybind11/pybind11.h>
#include <tensordict/consolidate.h>
#include <tensordict/memmap.h>
#include <tensordict/options.h>
#include <tensordict/python.h>
#include <tensordict/safetensors.h>
#include <tensordict/tensor_dict.h>
#include <torch/version.h>

#include <cstdint>
#include <string>

namespace py = pybind11;

// The in-process collector (collector.cpp).
void bind_collector(py::module_& m);

namespace {

using tensordict::TensorDict;

TensorDict load_memmap(const std::string& prefix) {
  return TensorDict::load_memmap(prefix);
}

TensorDict memmap(
    const TensorDict& td,
    const std::string& prefix,
    int64_t num_threads,
    bool copy_existing) {
  return td.memmap(tensordict::MemmapOptions(prefix)
                       .num_threads(num_threads)
                       .copy_existing(copy_existing));
}

TensorDict consolidate(
    const TensorDict& td, const std::string& filename, int64_t num_threads) {
  return td.consolidate(
      tensordict::ConsolidateOptions().filename(filename).num_threads(
          num_threads));
}

TensorDict from_consolidated(const std::string& filename) {
  return TensorDict::from_consolidated(filename);
}

void to_safetensors(const TensorDict& td, const std::string& path) {
  tensordict::to_safetensors(td, path);
}

TensorDict from_safetensors(const std::string& path) {
  return tensordict::from_safetensors(path);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "TensorDict for C++, bound on tensordict/python.h";
  // The torch this module was compiled against, from torch's own headers
  // (the Python check reads the version recorded at build time; the two
  // must agree).
  m.attr("TORCH_VERSION") = std::to_string(TORCH_VERSION_MAJOR) + "." +
                            std::to_string(TORCH_VERSION_MINOR) + "." +
                            std::to_string(TORCH_VERSION_PATCH);
  bind_collector(m);
  const auto release = py::call_guard<py::gil_scoped_release>();
  m.def(
      "load_memmap",
      &load_memmap,
      py::arg("prefix"),
      release,
      "Loads a memmap directory (or .tdz archive) written by Python "
      "tensordict or TensorDict for C++; returns a tensordict.TensorDict "
      "whose leaves map the files. Raises with the nested key on any "
      "inconsistency.");
  m.def(
      "memmap",
      &memmap,
      py::arg("td"),
      py::arg("prefix"),
      py::kw_only(),
      py::arg("num_threads") = 0,
      py::arg("copy_existing") = false,
      release,
      "Writes td as a memmap directory under prefix, in Python "
      "tensordict's layout (Python's td.memmap(prefix)); returns a new "
      "TensorDict whose leaves map the files.");
  m.def(
      "consolidate",
      &consolidate,
      py::arg("td"),
      py::arg("filename"),
      py::kw_only(),
      py::arg("num_threads") = 0,
      release,
      "Writes td into one file in Python's consolidated layout (Python's "
      "td.consolidate(filename=...)); returns the consolidated TensorDict, "
      "its leaves views of the mapped file.");
  m.def(
      "from_consolidated",
      &from_consolidated,
      py::arg("filename"),
      release,
      "Maps a file written by consolidate (here or by Python tensordict) "
      "and returns a TensorDict of views of it; every offset, size, dtype "
      "and shape is checked against the file.");
  m.def(
      "to_safetensors",
      &to_safetensors,
      py::arg("td"),
      py::arg("path"),
      release,
      "Writes td as a safetensors file with its tensordict structure "
      "(Python's tensordict.to_safetensors).");
  m.def(
      "from_safetensors",
      &from_safetensors,
      py::arg("path"),
      release,
      "Loads a safetensors file (Python's tensordict.from_safetensors): "
      "with its tensordict structure when tensordict wrote it, else split "
      "on '.'.");
}
