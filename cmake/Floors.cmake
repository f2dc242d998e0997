# The floors of the library, declared once: the library's source list
# (CMakeLists.txt) and the include check (tests/layering_check.cmake) both
# read this file, so a folder, a source or a public header is added here and
# nowhere else.
#
# The rule (docs/architecture.md, "Layout"): a folder of src/ is a floor; a
# file includes headers of its own folder and of lower floors only; folders
# on one floor are siblings and include neither each other. A public header
# (include/tensordict/<name>.h) stands on the floor where its types are
# needed: it includes only headers of that floor and below, and src/ files
# below that floor cannot include it. Its members may be defined higher up
# (a feature defines all its members, whichever class declares them:
# TensorDict's memmap members live in src/memmap/).
#
#   tensordict_floor(<folder> [SIBLING_OF <folder>]
#                    [SOURCES <file>...] [SEPARATE_SOURCES <file>...]
#                    [PUBLIC_HEADERS <name>...] [FORBIDDEN <header>...])
#
# Declares src/<folder>/ as the floor above every folder declared before it,
# or, with SIBLING_OF, on the floor of a folder already declared. SOURCES
# (paths from the project root, under src/<folder>/) go into the library's
# unity batches; SEPARATE_SOURCES are compiled outside the batches, in one
# unity group of their folder (heavy headers, or opt-in code whose changes
# should rebuild no batch). PUBLIC_HEADERS names the headers of include/tensordict/ on this
# floor, without ".h" ("detail/ops" for a header under detail/). FORBIDDEN
# lists headers this folder must not include although their floor is lower.
#
# Results, for the callers:
#   TENSORDICT_FLOOR_FOLDERS           the folders, in declaration order
#   TENSORDICT_FLOOR_OF_<folder>       the floor's number, 0 for the lowest
#   TENSORDICT_PUBLIC_HEADERS_<folder> the folder's public headers
#   TENSORDICT_FORBIDDEN_<folder>      the folder's forbidden headers
#   TENSORDICT_SOURCES                 every source, in declaration order
#   TENSORDICT_SEPARATE_SOURCES        the SEPARATE_SOURCES of every floor
#   TENSORDICT_PUBLIC_HEADER_FILES     include/tensordict/... paths of every
#                                      public header, TENSORDICT_TOP_HEADERS
#                                      included (the install FILE_SET)
# Works in a project and in script mode (cmake -P), where the check runs.

set(TENSORDICT_FLOOR_FOLDERS "")
set(TENSORDICT_SOURCES "")
set(TENSORDICT_SEPARATE_SOURCES "")
set(TENSORDICT_PUBLIC_HEADER_FILES "")
set(TENSORDICT_FLOOR_COUNT 0)

function(tensordict_floor folder)
  cmake_parse_arguments(
    PARSE_ARGV 1 arg "" "SIBLING_OF"
    "SOURCES;SEPARATE_SOURCES;PUBLIC_HEADERS;FORBIDDEN")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tensordict_floor(${folder}): unexpected arguments "
                        "'${arg_UNPARSED_ARGUMENTS}'")
  endif()
  if(DEFINED TENSORDICT_FLOOR_OF_${folder})
    message(FATAL_ERROR "tensordict_floor(${folder}): declared twice")
  endif()
  if(arg_SIBLING_OF)
    if(NOT DEFINED TENSORDICT_FLOOR_OF_${arg_SIBLING_OF})
      message(FATAL_ERROR "tensordict_floor(${folder}): SIBLING_OF names "
                          "'${arg_SIBLING_OF}', which is not declared above")
    endif()
    set(floor ${TENSORDICT_FLOOR_OF_${arg_SIBLING_OF}})
  else()
    set(floor ${TENSORDICT_FLOOR_COUNT})
    math(EXPR count "${TENSORDICT_FLOOR_COUNT} + 1")
    set(TENSORDICT_FLOOR_COUNT ${count} PARENT_SCOPE)
  endif()
  # A source listed under the wrong folder would compile, but the check
  # would judge its includes by the folder it sits in, not this one.
  foreach(source IN LISTS arg_SOURCES arg_SEPARATE_SOURCES)
    if(NOT source MATCHES "^src/${folder}/[^/]+\\.cpp$")
      message(FATAL_ERROR "tensordict_floor(${folder}): source '${source}' "
                          "is not a .cpp file of src/${folder}/")
    endif()
  endforeach()
  foreach(header IN LISTS arg_PUBLIC_HEADERS)
    if(header MATCHES "\\.h$")
      message(FATAL_ERROR "tensordict_floor(${folder}): public header "
                          "'${header}' is named without its .h")
    endif()
    list(APPEND TENSORDICT_PUBLIC_HEADER_FILES "include/tensordict/${header}.h")
  endforeach()
  list(APPEND TENSORDICT_FLOOR_FOLDERS ${folder})
  list(APPEND TENSORDICT_SOURCES ${arg_SOURCES} ${arg_SEPARATE_SOURCES})
  list(APPEND TENSORDICT_SEPARATE_SOURCES ${arg_SEPARATE_SOURCES})
  set(TENSORDICT_FLOOR_OF_${folder} ${floor} PARENT_SCOPE)
  set(TENSORDICT_PUBLIC_HEADERS_${folder} ${arg_PUBLIC_HEADERS} PARENT_SCOPE)
  set(TENSORDICT_FORBIDDEN_${folder} ${arg_FORBIDDEN} PARENT_SCOPE)
  foreach(var FLOOR_FOLDERS SOURCES SEPARATE_SOURCES PUBLIC_HEADER_FILES)
    set(TENSORDICT_${var} ${TENSORDICT_${var}} PARENT_SCOPE)
  endforeach()
endfunction()

# Helpers that know no dict: hashing, huge pages, shared memory, recycled
# arrays, the Python spellings of torch types, the UTF-8 validator.
tensordict_floor(util
  SOURCES
    src/util/array_cache.cpp
    src/util/huge_pages.cpp
    src/util/python_spelling.cpp
    src/util/sha256.cpp
    src/util/shared_memory.cpp
    src/util/utf8.cpp
  PUBLIC_HEADERS export fwd errors json)

# The dict itself: storage, key paths, the walk engine, values, non-tensor
# data and lazy stacks. options.h is here because its option structs hold
# NestedKeys; state_dict.h because TensorDict and TensorClass return a
# StateDict (its members are defined in src/state_dict/, as TensorDict's
# are in src/tensor_dict/).
tensordict_floor(core
  SOURCES
    src/core/entries.cpp
    src/core/lazy_stack.cpp
    src/core/nested_key.cpp
    src/core/node_table.cpp
    src/core/non_tensor.cpp
    src/core/python_class.cpp
    src/core/value.cpp
    src/core/walk.cpp
  PUBLIC_HEADERS
    nested_key value non_tensor lazy_stack tensor_dict indexing options
    state_dict detail/ops detail/tensor_dict_inl detail/entries)

# File formats read and written by key path. io/ must stay usable (and
# fuzzable) without a TensorDict, so of core/ it sees the key path and the
# class names only.
tensordict_floor(io
  SOURCES
    src/io/atomic_file.cpp
    src/io/file_io.cpp
    src/io/format.cpp
    src/io/json_reader.cpp
    src/io/mapped_zip.cpp
    src/io/metadata_reader.cpp
    src/io/safetensors_format.cpp
    src/io/staged_tree.cpp
    src/io/zip_reader.cpp
    src/io/zip_writer.cpp
  SEPARATE_SOURCES
    src/io/pickle.cpp
  FORBIDDEN
    core/walk.h core/tensor_dict_impl.h core/node_table.h core/batch_index.h
    tensordict/tensor_dict.h tensordict/lazy_stack.h tensordict/value.h
    tensordict/non_tensor.h tensordict/indexing.h)

# Printing, as Python prints.
tensordict_floor(repr SIBLING_OF io
  SOURCES
    src/repr/class_repr.cpp
    src/repr/compact_repr.cpp
    src/repr/lazy_stack_repr.cpp
    src/repr/non_tensor_repr.cpp
    src/repr/print_options.cpp
    src/repr/python_repr.cpp
    src/repr/python_tensor_repr.cpp
    src/repr/tensor_dict_repr.cpp
    src/repr/value_repr.cpp
  PUBLIC_HEADERS print_options)

# TensorDict's ops, mirroring include/tensordict/tensor_dict.h.
tensordict_floor(tensor_dict
  SOURCES
    src/tensor_dict/apply.cpp
    src/tensor_dict/batch_transform.cpp
    src/tensor_dict/compare.cpp
    src/tensor_dict/construct.cpp
    src/tensor_dict/convert.cpp
    src/tensor_dict/fast_view.cpp
    src/tensor_dict/handle.cpp
    src/tensor_dict/indexing.cpp
    src/tensor_dict/keys.cpp
    src/tensor_dict/lock.cpp
    src/tensor_dict/map.cpp
    src/tensor_dict/math.cpp
    src/tensor_dict/names.cpp
    src/tensor_dict/pack.cpp
    src/tensor_dict/path.cpp
    src/tensor_dict/reduce.cpp
    src/tensor_dict/set.cpp
    src/tensor_dict/shape.cpp
    src/tensor_dict/stack.cpp
  PUBLIC_HEADERS map data_loader pack)

# Typed structs over a dict.
tensordict_floor(tensor_class
  SOURCES
    src/tensor_class/tensor_class.cpp
  PUBLIC_HEADERS
    tensor_class lazy_stacked_tensor_class detail/tensor_class_base
    detail/tensor_class_impl detail/tensor_class_traits
    detail/tensor_class_ops detail/tensor_class_macros)

# Modules that read and write dicts, their parameters as dicts, and
# Python-exported AOTInductor packages run as such modules. The
# distributions (tensordict/distributions.h) and the probabilistic modules
# (tensordict/probabilistic.h: ProbabilisticTensorDictModule/Sequential) are
# opt-in and compiled in a group of their own: changing them rebuilds no
# batch.
tensordict_floor(nn SIBLING_OF tensor_class
  SOURCES
    src/nn/aoti_module.cpp
    src/nn/aoti_package_meta.cpp
    src/nn/module.cpp
    src/nn/module_weights.cpp
    src/nn/tensor_dict_module.cpp
    src/nn/tensor_dict_params.cpp
    src/nn/tensor_dict_sequential.cpp
    src/nn/vmap.cpp
  SEPARATE_SOURCES
    src/nn/distributions.cpp
    src/nn/probabilistic.cpp
  PUBLIC_HEADERS module tensor_dict_params vmap nn aoti distributions probabilistic)

# Saving and loading directories, byte-compatible with Python.
tensordict_floor(memmap
  SOURCES
    src/memmap/append.cpp
    src/memmap/archive_files.cpp
    src/memmap/archive_sink.cpp
    src/memmap/directory_sink.cpp
    src/memmap/directory_tree.cpp
    src/memmap/lazy_stack.cpp
    src/memmap/load_into.cpp
    src/memmap/memory_mapped_tensor.cpp
    src/memmap/meta.cpp
    src/memmap/non_tensor.cpp
    src/memmap/plan.cpp
    src/memmap/reader.cpp
    src/memmap/save.cpp
    src/memmap/tensor_class.cpp
  PUBLIC_HEADERS memmap archive)

# Safetensors files of a tree: a sibling of memmap/, over io/'s format and
# atomic file.
tensordict_floor(safetensors SIBLING_OF memmap
  SOURCES
    src/safetensors/safetensors.cpp
  PUBLIC_HEADERS safetensors)

# One buffer for every leaf.
tensordict_floor(consolidate SIBLING_OF memmap
  SOURCES
    src/consolidate/device.cpp
    src/consolidate/reader.cpp
    src/consolidate/writer.cpp
  PUBLIC_HEADERS consolidate)

# State dicts, as Python names them (the StateDict type is on core).
tensordict_floor(state_dict SIBLING_OF memmap
  SOURCES
    src/state_dict/state_dict.cpp
    src/state_dict/tensor_class.cpp)

# TensorDicts over torch.distributed. c10d's Gloo header pulls in gloo's
# (Debian's libgloo-dev: headers only; the symbols are libtorch's), so these
# are compiled in a group of their own and no batch pays for it.
tensordict_floor(distributed
  SEPARATE_SOURCES
    src/distributed/collectives.cpp
    src/distributed/point_to_point.cpp
    src/distributed/process_group.cpp
  PUBLIC_HEADERS distributed)

# Reinforcement learning (tensordict/rl.h, opt-in like aoti.h): environments
# in TorchRL's layout, the collector and the TorchRL worker. rl/ reaches a
# dict through public headers only, core's entry operations included
# (tensordict/detail/entries.h): none of core's internals, so that a flag
# core adds to a dict reaches rl/ through core's own functions. It takes
# policies by their module contract (tensordict/nn.h), never by package type.
tensordict_floor(rl
  SEPARATE_SOURCES
    src/rl/collector.cpp
    src/rl/env.cpp
    src/rl/env_kit.cpp
    src/rl/envs.cpp
    src/rl/mlp.cpp
    src/rl/numpy_random.cpp
    src/rl/registry.cpp
    src/rl/spec.cpp
    src/rl/step_mdp.cpp
    src/rl/torchrl_worker.cpp
    src/rl/torchrl_worker_collector.cpp
  PUBLIC_HEADERS rl rl/spec rl/env rl/env_kit rl/modules rl/collector
    rl/torchrl_worker rl/numpy_random
  FORBIDDEN
    core/batch_index.h core/key_path.h core/lazy_stack_impl.h
    core/node_table.h core/python_class.h core/stacked.h
    core/tensor_dict_impl.h core/walk.h tensordict/aoti.h)

# Above every floor: the umbrella header belongs to users, never to src/;
# python.h too, header-only and opt-in (extensions include it, never src/).
set(TENSORDICT_TOP_HEADERS tensordict python)
foreach(header IN LISTS TENSORDICT_TOP_HEADERS)
  list(APPEND TENSORDICT_PUBLIC_HEADER_FILES "include/tensordict/${header}.h")
endforeach()
