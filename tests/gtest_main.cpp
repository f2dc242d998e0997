// The main of unit_tests and rl_tests: gtest's, with one flag of ours.
// ctest runs these binaries a suite a process (tests/gtest_suites.cmake) and
// passes --all_skipped_exit_code=77: a suite whose every test skipped itself
// (CudaTest on a machine with no GPU) then reads "skipped" in ctest's summary
// instead of "passed". Run by hand or by the sanitizer shards, the flag is
// absent and the exit status is gtest's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  constexpr const char* kFlag = "--all_skipped_exit_code=";
  int all_skipped_exit_code = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      all_skipped_exit_code = std::atoi(argv[i] + std::strlen(kFlag));
    }
  }
  const int status = RUN_ALL_TESTS();
  const testing::UnitTest& run = *testing::UnitTest::GetInstance();
  if (status == 0 && all_skipped_exit_code >= 0 &&
      run.test_to_run_count() > 0 &&
      run.skipped_test_count() == run.test_to_run_count()) {
    return all_skipped_exit_code;
  }
  return status;
}
