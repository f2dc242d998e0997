// The Python extension of the example: importing it registers
// "Corridor-v0" (corridor_env.cpp is compiled into it) in the registry of
// the libtensordict it shares with tensordict_cpp._C, so that
// tensordict_cpp.Collector(env="Corridor-v0", ...) and
// tensordict_cpp.envs.CppEnv("Corridor-v0", ...) find it.

#include <pybind11/pybind11.h>

PYBIND11_MODULE(corridor_envs, m) {
  m.doc() = "Registers the C++ env Corridor-v0 with tensordict_cpp";
}
