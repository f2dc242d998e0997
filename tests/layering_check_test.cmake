# Tests of tests/layering_check.cmake: small src/ and include/ trees that
# keep to the floors pass, and each kind of climb fails with a message that
# names the file and the header. The floors are the project's own
# (cmake/Floors.cmake).
#
#   cmake -DCHECK=<layering_check.cmake> -DWORK_DIR=<scratch dir> -P this file

if(NOT CHECK OR NOT WORK_DIR)
  message(FATAL_ERROR "pass -DCHECK=<layering_check.cmake> -DWORK_DIR=<dir>")
endif()

set(failures "")
set(case_count 0)

# Writes `files` ("path|line" items, one #include line each, or "path|" for
# a file with no include; paths under src/ unless they start with
# "include/") under a fresh tree, runs the check on it, and
# expects success (`expected` empty) or a failure whose output contains
# `expected`.
function(check_case name expected)
  set(root "${WORK_DIR}/${name}")
  file(REMOVE_RECURSE "${root}")
  foreach(item IN LISTS ARGN)
    string(FIND "${item}" "|" bar)
    string(SUBSTRING "${item}" 0 ${bar} path)
    math(EXPR start "${bar} + 1")
    string(SUBSTRING "${item}" ${start} -1 line)
    if(NOT path MATCHES "^include/")
      set(path "src/${path}")
    endif()
    file(APPEND "${root}/${path}" "${line}\n")
  endforeach()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${root} -P ${CHECK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(text "${out}${err}")
  if(expected STREQUAL "")
    if(NOT rc EQUAL 0)
      set(failures "${failures}\n${name}: expected to pass, failed:\n${text}" PARENT_SCOPE)
    endif()
  elseif(rc EQUAL 0)
    set(failures "${failures}\n${name}: expected to fail with '${expected}', passed" PARENT_SCOPE)
  else()
    string(FIND "${text}" "${expected}" at)
    if(at EQUAL -1)
      set(failures "${failures}\n${name}: expected '${expected}' in:\n${text}" PARENT_SCOPE)
    endif()
  endif()
  math(EXPR n "${case_count} + 1")
  set(case_count ${n} PARENT_SCOPE)
endfunction()

check_case(keeps_floors ""
  "util/sha256.cpp|#include \"util/sha256.h\""
  "core/walk.cpp|#include \"util/array_cache.h\""
  "io/format.h|#include \"core/key_path.h\""
  "tensor_dict/shape.cpp|#include \"core/walk.h\""
  "memmap/writer.cpp|#include \"tensordict/tensor_dict.h\""
  "distributed/wire.h|#include \"memmap/writer.h\"")
check_case(climb
  "src/core/walk.cpp includes memmap/writer.h: memmap/ is a higher floor than core/"
  "core/walk.cpp|#include \"memmap/writer.h\"")
check_case(climb_through_public_header
  "src/core/non_tensor.cpp includes tensordict/consolidate.h: consolidate/ is a higher floor"
  "core/non_tensor.cpp|#include \"tensordict/consolidate.h\"")
# Public headers stand on the floor cmake/Floors.cmake lists them on.
check_case(public_headers_keep_floors ""
  "include/tensordict/options.h|#include \"tensordict/nested_key.h\""
  "include/tensordict/tensor_class.h|#include \"tensordict/state_dict.h\""
  "include/tensordict/detail/tensor_class_impl.h|#include \"tensordict/tensor_dict.h\""
  "include/tensordict/rl.h|#include \"tensordict/nn.h\""
  "include/tensordict/tensordict.h|#include \"tensordict/rl.h\""
  "core/value.cpp|#include \"tensordict/state_dict.h\"")
check_case(public_header_climb
  "include/tensordict/tensor_dict.h includes tensordict/memmap.h: memmap/ is a higher floor than core/"
  "include/tensordict/tensor_dict.h|#include \"tensordict/memmap.h\"")
check_case(public_detail_header_climb
  "include/tensordict/detail/tensor_class_impl.h includes tensordict/consolidate.h: consolidate/ is a higher floor than tensor_class/"
  "include/tensordict/detail/tensor_class_impl.h|#include \"tensordict/consolidate.h\"")
check_case(public_header_sibling
  "include/tensordict/nn.h includes tensordict/tensor_class.h: tensor_class/ is a sibling on the same floor as nn/"
  "include/tensordict/nn.h|#include \"tensordict/tensor_class.h\"")
check_case(public_header_below_its_user
  "include/tensordict/options.h includes tensordict/print_options.h: repr/ is a higher floor than core/"
  "include/tensordict/options.h|#include \"tensordict/print_options.h\"")
check_case(public_header_includes_src
  "include/tensordict/value.h includes \"core/walk.h\": a public header includes public headers only"
  "include/tensordict/value.h|#include \"core/walk.h\"")
check_case(public_header_without_floor
  "include/tensordict/brand_new.h has no floor"
  "include/tensordict/brand_new.h|")
check_case(sibling
  "src/memmap/reader.cpp includes consolidate/layout.h: consolidate/ is a sibling on the same floor"
  "memmap/reader.cpp|#include \"consolidate/layout.h\"")
check_case(io_sees_no_tensor_dict
  "src/io/format.h includes core/walk.h, which io/ must not include"
  "io/format.h|#include \"core/walk.h\"")
# rl/ sees core through public headers only, its entry operations
# included, and takes policies by the module contract, not by package type.
check_case(rl_keeps_to_public_headers ""
  "rl/collector.cpp|#include \"tensordict/detail/entries.h\""
  "rl/step_mdp.cpp|#include \"tensordict/nn.h\""
  "rl/numpy_random.cpp|#include \"rl/numpy_ziggurat_tables.h\"")
check_case(rl_sees_no_core_internals
  "src/rl/collector.cpp includes core/tensor_dict_impl.h, which rl/ must not include"
  "rl/collector.cpp|#include \"core/tensor_dict_impl.h\"")
check_case(rl_walks_no_nodes
  "src/rl/step_mdp.cpp includes core/walk.h, which rl/ must not include"
  "rl/step_mdp.cpp|#include \"core/walk.h\"")
check_case(rl_knows_no_aoti_module
  "src/rl/collector.cpp includes tensordict/aoti.h, which rl/ must not include"
  "rl/collector.cpp|#include \"tensordict/aoti.h\"")
check_case(loose_file
  "src/loose.cpp is in no floor"
  "loose.cpp|")
check_case(unknown_folder
  "src/detail/ is not a floor"
  "detail/walk.h|")
check_case(unknown_public_header
  "includes tensordict/brand_new.h, which has no floor"
  "core/value.cpp|#include \"tensordict/brand_new.h\"")
check_case(umbrella_header
  "src/nn/module.cpp includes tensordict/tensordict.h: top/ is a higher floor"
  "nn/module.cpp|#include \"tensordict/tensordict.h\"")

# A known climb passes while it occurs, and must be struck from the list
# once it is gone.
foreach(present IN ITEMS yes no)
  file(REMOVE_RECURSE "${WORK_DIR}/known_${present}")
  set(line "#include \"core/walk.h\"")
  if(present)
    set(line "#include \"repr/value_repr.h\"")
  endif()
  file(WRITE "${WORK_DIR}/known_${present}/src/core/value.cpp" "${line}\n")
  execute_process(
    COMMAND ${CMAKE_COMMAND} "-DKNOWN_CLIMBS=src/core/value.cpp -> repr/value_repr.h"
            -DSOURCE_DIR=${WORK_DIR}/known_${present} -P ${CHECK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${out}${err}" "no longer occurs: remove it from known_climbs" at)
  if(present AND NOT rc EQUAL 0)
    set(failures "${failures}\nknown_climb: a listed climb failed:\n${out}${err}")
  elseif(NOT present AND (rc EQUAL 0 OR at EQUAL -1))
    set(failures "${failures}\nstale_known_climb: expected a failure naming the stale climb")
  endif()
  math(EXPR case_count "${case_count} + 1")
endforeach()

if(failures)
  message(FATAL_ERROR "layering_check_test:${failures}")
endif()
message(STATUS "layering_check_test: ${case_count} cases behave")
