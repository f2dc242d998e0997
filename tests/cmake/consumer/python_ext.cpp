// A Python extension built against the installed package with
// tensordict_add_python_module: a bound function takes and returns a
// `tensordict.TensorDict`. The consumer's build imports it and calls it.

#include <pybind11/pybind11.h>
#include <tensordict/python.h>

PYBIND11_MODULE(tensordict_consumer_ext, m) {
  m.def(
      "add_double",
      [](tensordict::TensorDict td) {
        td.set("double", td.get("obs") * 2);
        return td;
      },
      pybind11::call_guard<pybind11::gil_scoped_release>());
}
