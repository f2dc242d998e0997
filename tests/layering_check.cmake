# The floors of src/ as a check: fails when a file includes a header of a
# higher floor (or of another folder on its own floor), so a climb back up
# fails the build instead of waiting for a review to find it.
#
#   cmake -DSOURCE_DIR=<dir holding src/> -P tests/layering_check.cmake
#
# The rule (README, "Layout"): a folder is a floor; a file includes headers of
# its own folder and of lower floors only; a feature defines all its members,
# whichever class declares them. Public headers (tensordict/*.h) count as the
# floor of the folder that defines them. Folders on one floor are siblings:
# neither includes the other.

# Lowest first, one floor an item (folders on one floor separated by spaces).
# A new folder under src/ must be added here, or the check fails.
set(floors
  "util"
  "core"
  "io repr"
  "tensor_dict"
  "tensor_class nn"
  "memmap consolidate state_dict safetensors"
  "distributed"
  "rl")

# The folder whose sources define each public header's declarations.
set(public_util export fwd errors json options print_options)
set(public_core nested_key value non_tensor lazy_stack tensor_dict indexing detail/ops)
set(public_tensor_dict map data_loader pack)
set(public_tensor_class tensor_class lazy_stacked_tensor_class
    detail/tensor_class_impl detail/tensor_class_traits detail/tensor_class_ops
    detail/tensor_class_macros)
set(public_nn module tensor_dict_params vmap nn aoti probabilistic)
set(public_memmap memmap archive)
set(public_safetensors safetensors)
set(public_consolidate consolidate)
set(public_state_dict state_dict)
set(public_distributed distributed)
set(public_rl rl)
# The umbrella header belongs to users, never to src/.
# python.h too: header-only and opt-in (extensions include it, never src/),
# so no floor defines it; like the umbrella, it sits above every floor.
set(public_top tensordict python)

# Headers a folder must not include even though their floor is lower: io/
# reads and writes files by key path and must stay usable (and fuzzable)
# without a TensorDict, so of core/ it sees the key path and class names only.
set(forbidden_io core/walk.h core/tensor_dict_impl.h core/node_table.h
    core/batch_index.h tensordict/tensor_dict.h tensordict/lazy_stack.h
    tensordict/value.h tensordict/non_tensor.h tensordict/indexing.h)

# Climbs known and not removed yet, as "<file under src/> -> <header>" (none
# today; a new one needs a reason here). A listed climb that no longer occurs
# fails the check too, so the list only shrinks.
set(known_climbs)
if(DEFINED KNOWN_CLIMBS)  # for tests/layering_check_test.cmake
  set(known_climbs "${KNOWN_CLIMBS}")
endif()

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "layering_check: pass -DSOURCE_DIR=<the directory holding src/>")
endif()

set(floor_index 0)
set(known_folders "")
foreach(floor IN LISTS floors)
  separate_arguments(floor_folders UNIX_COMMAND "${floor}")
  foreach(folder IN LISTS floor_folders)
    set(floor_of_${folder} ${floor_index})
    list(APPEND known_folders ${folder})
  endforeach()
  math(EXPR floor_index "${floor_index} + 1")
endforeach()
set(floor_of_top 1000)
foreach(folder IN LISTS known_folders ITEMS top)
  foreach(header IN LISTS public_${folder})
    string(REPLACE "/" "__" header_var "${header}")
    set(public_folder_of_${header_var} ${folder})
  endforeach()
endforeach()

file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}/src"
     "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cpp")
list(SORT sources)
set(errors "")
set(seen_climbs "")
set(checked 0)
foreach(source IN LISTS sources)
  if(NOT source MATCHES "^([^/]+)/")
    string(APPEND errors "  src/${source} is in no floor: put it in one of the folders "
                         "listed in tests/layering_check.cmake\n")
    continue()
  endif()
  set(folder ${CMAKE_MATCH_1})
  if(NOT DEFINED floor_of_${folder})
    string(APPEND errors "  src/${folder}/ is not a floor: add it to the floors in "
                         "tests/layering_check.cmake\n")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/src/${source}" includes REGEX "^#include \"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
    math(EXPR checked "${checked} + 1")
    if(header MATCHES "^tensordict/(.+)\\.h$")
      string(REPLACE "/" "__" header_var "${CMAKE_MATCH_1}")
      if(NOT DEFINED public_folder_of_${header_var})
        string(APPEND errors "  src/${source} includes ${header}, which has no floor: "
                             "list it in tests/layering_check.cmake\n")
        continue()
      endif()
      set(target ${public_folder_of_${header_var}})
    elseif(header MATCHES "^([^/]+)/")
      set(target ${CMAKE_MATCH_1})
    else()
      string(APPEND errors "  src/${source} includes \"${header}\": include src/ headers "
                           "by their folder (\"core/walk.h\")\n")
      continue()
    endif()
    if(NOT DEFINED floor_of_${target})
      string(APPEND errors "  src/${source} includes ${header} from src/${target}/, "
                           "which is not a floor\n")
      continue()
    endif()
    if("${source} -> ${header}" IN_LIST known_climbs)
      list(APPEND seen_climbs "${source} -> ${header}")
      continue()
    endif()
    if(NOT target STREQUAL folder AND NOT floor_of_${target} LESS floor_of_${folder})
      if(floor_of_${target} EQUAL floor_of_${folder})
        set(why "a sibling on the same floor")
      else()
        set(why "a higher floor")
      endif()
      string(APPEND errors "  src/${source} includes ${header}: ${target}/ is ${why} "
                           "than ${folder}/\n")
    endif()
    if(header IN_LIST forbidden_${folder})
      string(APPEND errors "  src/${source} includes ${header}, which ${folder}/ must not "
                           "include (see forbidden_${folder})\n")
    endif()
  endforeach()
endforeach()

foreach(climb IN LISTS known_climbs)
  if(NOT climb IN_LIST seen_climbs)
    string(APPEND errors "  known climb \"${climb}\" no longer occurs: remove it "
                         "from known_climbs\n")
  endif()
endforeach()

if(errors)
  message(FATAL_ERROR "layering_check: includes that break the floors of src/:\n${errors}")
endif()
list(LENGTH sources file_count)
list(LENGTH known_climbs climb_count)
message(STATUS "layering_check: ${checked} includes in ${file_count} files keep to "
               "their floors (${climb_count} known climbs left)")
