# tensordict_add_python_module(<name> <source>...): builds a Python extension
# module <name> whose bindings use <tensordict/python.h>, so bound functions
# take and return the installed Python package's own `tensordict.TensorDict`.
#
# Included by the build tree and by the installed TensorDictConfig.cmake, so
# both in-tree targets and find_package(TensorDict) consumers have it.
#
# What it uses, all from the Python environment torch is installed in:
# - Python's headers (find_package(Python3 ... Development.Module); pass
#   -DPython3_EXECUTABLE=<the python with torch> when several are installed);
# - pybind11 from torch's wheel (torch/include/pybind11, the version torch's
#   own casters are built with), else a find_package(pybind11) one (Debian's
#   pybind11-dev);
# - libtorch_python from torch's wheel (torch/lib), which holds torch's
#   Python bindings (THPVariable_Wrap, THPDevice_New).
# The module is named <name><Python's extension suffix> and links
# TensorDict::tensordict; add more sources or libraries to the target as
# usual. Import `torch` before the module in Python (torch loads the
# libraries the module links).

function(tensordict_add_python_module name)
  if(NOT ARGN)
    message(FATAL_ERROR "tensordict_add_python_module(${name}): no sources given")
  endif()
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
  if(NOT TORCH_INSTALL_PREFIX)
    message(FATAL_ERROR "tensordict_add_python_module: find_package(Torch) first "
                        "(TORCH_INSTALL_PREFIX is not set)")
  endif()
  find_library(TENSORDICT_TORCH_PYTHON_LIBRARY torch_python
               PATHS ${TORCH_INSTALL_PREFIX}/lib NO_DEFAULT_PATH)
  if(NOT TENSORDICT_TORCH_PYTHON_LIBRARY)
    message(FATAL_ERROR "tensordict_add_python_module: libtorch_python not found in "
                        "${TORCH_INSTALL_PREFIX}/lib (a libtorch without Python "
                        "bindings cannot build extensions: use torch's wheel)")
  endif()
  Python3_add_library(${name} MODULE WITH_SOABI ${ARGN})
  if(EXISTS ${TORCH_INSTALL_PREFIX}/include/pybind11/pybind11.h)
    target_include_directories(${name} SYSTEM PRIVATE ${TORCH_INSTALL_PREFIX}/include)
  else()
    find_package(pybind11 CONFIG REQUIRED)
    target_link_libraries(${name} PRIVATE pybind11::headers)
  endif()
  target_link_libraries(${name} PRIVATE TensorDict::tensordict
                        ${TENSORDICT_TORCH_PYTHON_LIBRARY})
  # pybind11's advice: hidden symbols, so two modules never clash.
  set_target_properties(${name} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_compile_definitions(${name} PRIVATE TORCH_EXTENSION_NAME=${name})
endfunction()
