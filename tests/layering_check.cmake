# The floors as a check: fails when a file of src/ or a public header of
# include/tensordict/ includes a header of a higher floor (or of a sibling
# folder on its own floor), so a climb back up fails the build instead of
# waiting for a review to find it.
#
#   cmake -DSOURCE_DIR=<dir holding src/ and include/> -P tests/layering_check.cmake
#
# The floors, their folders and the floor of each public header are declared
# once, in cmake/Floors.cmake (read from this script's own checkout, so the
# tests can point SOURCE_DIR at small trees). The rule is written there.

include(${CMAKE_CURRENT_LIST_DIR}/../cmake/Floors.cmake)

# Climbs known and not removed yet, as "<path from SOURCE_DIR> -> <header>"
# ("src/core/value.cpp -> repr/value_repr.h"; none today, and a new one needs
# a reason here). A listed climb that no longer occurs fails the check too,
# so the list only shrinks.
set(known_climbs)
if(DEFINED KNOWN_CLIMBS)  # for tests/layering_check_test.cmake
  set(known_climbs "${KNOWN_CLIMBS}")
endif()

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "layering_check: pass -DSOURCE_DIR=<the directory holding src/>")
endif()

# floor_of_<folder>: the floor's number; top (the umbrella and python.h) is
# above every floor. public_folder_of_<header>: the folder whose floor a
# public header stands on ("/" in names spelled "__").
foreach(folder IN LISTS TENSORDICT_FLOOR_FOLDERS)
  set(floor_of_${folder} ${TENSORDICT_FLOOR_OF_${folder}})
endforeach()
set(floor_of_top 1000)
set(TENSORDICT_PUBLIC_HEADERS_top ${TENSORDICT_TOP_HEADERS})
foreach(folder IN LISTS TENSORDICT_FLOOR_FOLDERS ITEMS top)
  foreach(header IN LISTS TENSORDICT_PUBLIC_HEADERS_${folder})
    string(REPLACE "/" "__" header_var "${header}")
    set(public_folder_of_${header_var} ${folder})
  endforeach()
endforeach()

set(errors "")
set(seen_climbs "")
set(checked 0)

# Checks the quoted includes of `file` (a path under SOURCE_DIR), which
# stands on the floor of `folder`; a public header (`public` true) may
# include only public headers.
function(check_includes file folder public)
  file(STRINGS "${SOURCE_DIR}/${file}" includes REGEX "^#include \"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
    math(EXPR checked "${checked} + 1")
    if(header MATCHES "^tensordict/(.+)\\.h$")
      string(REPLACE "/" "__" header_var "${CMAKE_MATCH_1}")
      if(NOT DEFINED public_folder_of_${header_var})
        string(APPEND errors "  ${file} includes ${header}, which has no floor: "
                             "list it in cmake/Floors.cmake\n")
        continue()
      endif()
      set(target ${public_folder_of_${header_var}})
    elseif(public)
      string(APPEND errors "  ${file} includes \"${header}\": a public header "
                           "includes public headers only (src/ is not installed)\n")
      continue()
    elseif(header MATCHES "^([^/]+)/")
      set(target ${CMAKE_MATCH_1})
    else()
      string(APPEND errors "  ${file} includes \"${header}\": include src/ headers "
                           "by their folder (\"core/walk.h\")\n")
      continue()
    endif()
    if(NOT DEFINED floor_of_${target})
      string(APPEND errors "  ${file} includes ${header} from src/${target}/, "
                           "which is not a floor\n")
      continue()
    endif()
    if("${file} -> ${header}" IN_LIST known_climbs)
      list(APPEND seen_climbs "${file} -> ${header}")
      continue()
    endif()
    if(NOT target STREQUAL folder AND NOT floor_of_${target} LESS floor_of_${folder})
      if(floor_of_${target} EQUAL floor_of_${folder})
        set(why "a sibling on the same floor as")
      else()
        set(why "a higher floor than")
      endif()
      string(APPEND errors "  ${file} includes ${header}: ${target}/ is ${why} "
                           "${folder}/\n")
    endif()
    if(header IN_LIST TENSORDICT_FORBIDDEN_${folder})
      string(APPEND errors "  ${file} includes ${header}, which ${folder}/ must not "
                           "include (see its FORBIDDEN list in cmake/Floors.cmake)\n")
    endif()
  endforeach()
  set(errors "${errors}" PARENT_SCOPE)
  set(seen_climbs "${seen_climbs}" PARENT_SCOPE)
  set(checked ${checked} PARENT_SCOPE)
endfunction()

# src/: a file stands on the floor of its folder.
file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}/src"
     "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cpp")
list(SORT sources)
foreach(source IN LISTS sources)
  if(NOT source MATCHES "^([^/]+)/")
    string(APPEND errors "  src/${source} is in no floor: put it in one of the folders "
                         "declared in cmake/Floors.cmake\n")
    continue()
  endif()
  set(folder ${CMAKE_MATCH_1})
  if(NOT DEFINED floor_of_${folder} OR folder STREQUAL "top")
    string(APPEND errors "  src/${folder}/ is not a floor: declare it in "
                         "cmake/Floors.cmake\n")
    continue()
  endif()
  check_includes("src/${source}" ${folder} FALSE)
endforeach()

# include/tensordict/: a header stands on the floor Floors.cmake lists it on.
file(GLOB_RECURSE headers RELATIVE "${SOURCE_DIR}/include/tensordict"
     "${SOURCE_DIR}/include/tensordict/*.h")
list(SORT headers)
foreach(header IN LISTS headers)
  string(REGEX REPLACE "\\.h$" "" name "${header}")
  string(REPLACE "/" "__" header_var "${name}")
  if(NOT DEFINED public_folder_of_${header_var})
    string(APPEND errors "  include/tensordict/${header} has no floor: list it in "
                         "the PUBLIC_HEADERS of a floor in cmake/Floors.cmake\n")
    continue()
  endif()
  check_includes("include/tensordict/${header}" ${public_folder_of_${header_var}} TRUE)
endforeach()

foreach(climb IN LISTS known_climbs)
  if(NOT climb IN_LIST seen_climbs)
    string(APPEND errors "  known climb \"${climb}\" no longer occurs: remove it "
                         "from known_climbs\n")
  endif()
endforeach()

if(errors)
  message(FATAL_ERROR "layering_check: includes that break the floors:\n${errors}")
endif()
list(LENGTH sources source_count)
list(LENGTH headers header_count)
list(LENGTH known_climbs climb_count)
message(STATUS "layering_check: ${checked} includes in ${source_count} files of src/ "
               "and ${header_count} public headers keep to their floors "
               "(${climb_count} known climbs left)")
