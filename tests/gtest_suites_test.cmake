# Tests of tests/gtest_suites.cmake and of tests/gtest_main.cpp's flag:
# which suites a listing gives, the errors of a listing that fails or lists
# nothing, and the exit status of a suite whose every test skipped itself.
#
#   cmake -DSCRIPT=<gtest_suites.cmake> -DUNIT_TESTS=<unit_tests binary>
#         -DWORK_DIR=<scratch dir> -P this file

foreach(variable SCRIPT UNIT_TESTS WORK_DIR)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "gtest_suites_test.cmake: pass -D${variable}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures "")

# A stand-in for a test binary: prints `listing` and exits with `status`.
function(fake_binary name listing status)
  file(WRITE "${WORK_DIR}/${name}.txt" "${listing}")
  file(WRITE "${WORK_DIR}/${name}"
       "#!/bin/sh\ncat '${WORK_DIR}/${name}.txt'\nexit ${status}\n")
  file(CHMOD "${WORK_DIR}/${name}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endfunction()

# Runs the script on binary `name`; sets `output` (the file written, empty
# if none), `result` and `errors` (its messages, spaces collapsed) in the
# caller.
function(list_suites name)
  set(out "${WORK_DIR}/${name}_suites.cmake")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DBINARY=${WORK_DIR}/${name} -DOUTPUT=${out} -DLABELS=unit
            -DWORKING_DIRECTORY=${WORK_DIR} -P ${SCRIPT}
    RESULT_VARIABLE run_result ERROR_VARIABLE run_errors OUTPUT_QUIET)
  set(content "")
  if(EXISTS "${out}")
    file(READ "${out}" content)
  endif()
  set(output "${content}" PARENT_SCOPE)
  set(result "${run_result}" PARENT_SCOPE)
  # CMake wraps a message's lines: compare its words.
  string(REGEX REPLACE "[ \n]+" " " run_errors "${run_errors}")
  set(errors "${run_errors}" PARENT_SCOPE)
endfunction()

# A listing with a plain, a value-parameterized, a typed and a disabled
# suite, after gtest_main's banner.
fake_binary(listing
  "Running main() from gtest_main.cc\nPlainTest.\n  First\n  Second\nInst/ParamTest.\n  Case/0\nTypedTest/0.  # TypeParam = int\n  Works\nDISABLED_OffTest.\n  Never\n"
  0)
list_suites(listing)
if(NOT result EQUAL 0)
  list(APPEND failures "a good listing failed: ${errors}")
endif()
foreach(suite PlainTest Inst/ParamTest TypedTest/0)
  if(NOT output MATCHES "add_test\\(\\[==\\[${suite}\\]==\\] [^\n]*--gtest_filter=${suite}\\.\\*\\]==\\] --all_skipped_exit_code=77\\)")
    list(APPEND failures "no test for suite ${suite}:\n${output}")
  endif()
endforeach()
if(output MATCHES "OffTest|Running")
  list(APPEND failures "a disabled suite or the banner became a test:\n${output}")
endif()
string(REGEX MATCHALL "add_test" added "${output}")
list(LENGTH added added_count)
if(NOT added_count EQUAL 3)
  list(APPEND failures "expected 3 tests, found ${added_count}:\n${output}")
endif()
if(NOT output MATCHES "SKIP_RETURN_CODE 77")
  list(APPEND failures "no SKIP_RETURN_CODE:\n${output}")
endif()

fake_binary(crashing "" 3)
list_suites(crashing)
if(result EQUAL 0 OR NOT errors MATCHES "--gtest_list_tests exited with '3'")
  list(APPEND failures "a failing listing: result ${result}, errors:\n${errors}")
endif()

fake_binary(empty "Running main() from gtest_main.cc\n" 0)
list_suites(empty)
if(result EQUAL 0 OR NOT errors MATCHES "listed no suite")
  list(APPEND failures "an empty listing: result ${result}, errors:\n${errors}")
endif()

# gtest_main.cpp: CrashSafetyStressTest skips each test unless
# TENSORDICT_KILL_ROUNDS is set.
unset(ENV{TENSORDICT_KILL_ROUNDS})
foreach(case "CrashSafetyStressTest|--all_skipped_exit_code=77|77"
             "CrashSafetyStressTest||0"
             "Sha256Test|--all_skipped_exit_code=77|0")
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 suite)
  list(GET case 1 flag)
  list(GET case 2 expected)
  execute_process(COMMAND ${UNIT_TESTS} --gtest_filter=${suite}.* ${flag}
                  RESULT_VARIABLE status OUTPUT_QUIET ERROR_QUIET)
  if(NOT status EQUAL expected)
    list(APPEND failures "unit_tests ${suite} '${flag}': exit ${status}, expected ${expected}")
  endif()
endforeach()

if(failures)
  string(REPLACE ";" "\n" failures "${failures}")
  message(FATAL_ERROR "gtest_suites_test: failures:\n${failures}")
endif()
message(STATUS "gtest_suites_test: all cases passed")
