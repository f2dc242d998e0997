# Writes a ctest file with one test per gtest suite of a test binary, as
# gtest_discover_tests writes one per test: starting a binary that loads
# libtorch costs about 0.4 s, most of the run when paid 900 times.
# Run after each link of the binary (tensordict_gtest_suites in
# tests/CMakeLists.txt):
#
#   cmake -DBINARY=<test binary> -DOUTPUT=<ctest file> -DLABELS=<labels>
#         -DWORKING_DIRECTORY=<dir> -P this file
#
# Each test runs `BINARY --gtest_filter=<suite>.* --all_skipped_exit_code=77`
# (tests/gtest_main.cpp): a suite whose every test skipped itself is
# reported skipped, not passed.

foreach(variable BINARY OUTPUT LABELS WORKING_DIRECTORY)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "gtest_suites.cmake: pass -D${variable}=...")
  endif()
endforeach()

execute_process(
  COMMAND "${BINARY}" --gtest_list_tests
  WORKING_DIRECTORY "${WORKING_DIRECTORY}"
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE errors
  RESULT_VARIABLE result
  TIMEOUT 120)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests exited with '${result}':\n"
                      "${listing}\n${errors}")
endif()

# A suite's line is its name and a dot, at the start of the line (a typed
# suite's line adds "  # TypeParam = ..."); its tests follow, indented.
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
set(count 0)
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.( |$)")
    continue()
  endif()
  set(suite "${CMAKE_MATCH_1}")
  # gtest runs no disabled test unless asked to.
  if(suite MATCHES "(^|/)DISABLED_")
    continue()
  endif()
  string(APPEND content
    "add_test([==[${suite}]==] [==[${BINARY}]==] [==[--gtest_filter=${suite}.*]==] "
    "--all_skipped_exit_code=77)\n"
    "set_tests_properties([==[${suite}]==] PROPERTIES LABELS [==[${LABELS}]==] "
    "WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==] SKIP_RETURN_CODE 77)\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests listed no suite:\n${listing}")
endif()
file(WRITE "${OUTPUT}" "${content}")
