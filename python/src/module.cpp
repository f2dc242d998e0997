// tensordict_cpp._C: the C++ engine for Python users. Bound functions take
// and return Python's own tensordict.TensorDict through the casters of
// <tensordict/python.h>. tensordict_cpp/__init__.py checks torch's version
// before this module is loaded (a mismatched libtorch fails with missing
// symbols, not with a message, once the loader is at work).
//
// The rooms: storage.cpp (memmap, .tdz, consolidated, safetensors),
// collector.cpp (the in-process collector) and envs.cpp (the env registry
// and C++ envs stepped from Python).
//
// Errors: c10's ValueError, TypeError, IndexError and NotImplementedError
// become Python's, tensordict::KeyError a KeyError, any other c10::Error a
// RuntimeError, each with the message and no C++ backtrace.

#include <pybind11/pybind11.h>
#include <tensordict/errors.h>
#include <torch/version.h>

#include <exception>
#include <string>

namespace py = pybind11;

void bind_storage(py::module_& m);
void bind_collector(py::module_& m);
void bind_envs(py::module_& m);

namespace {

// c10's error kinds as Python's, without the C++ backtrace (the context
// lines, "while ...", stay): registered for the whole module.
void translate_errors(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const tensordict::KeyError& e) {
    PyErr_SetString(PyExc_KeyError, e.what_without_backtrace());
  } catch (const c10::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
  } catch (const c10::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
  } catch (const c10::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  }
  // Anything else propagates to pybind11's own translators.
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
  py::register_local_exception_translator(&translate_errors);
  bind_collector(m);
  bind_envs(m);
  bind_storage(m);
}
