// tensordict: inspect, verify, dump and copy memmap directories, `.tdz`
// archives and consolidated files.

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "inspect.h"
#include "tensordict/json.h"

namespace {

constexpr const char* kUsage =
    "usage: tensordict COMMAND ARGS\n"
    "PATH is a memmap directory, a .tdz archive (save(\"x.tdz\"),\n"
    "pack_memmap) or a consolidated file (Python's\n"
    "consolidate(filename=...)).\n"
    "  info PATH       the tree: keys, dtypes, shapes, bytes, batch sizes,\n"
    "                  non-tensor values\n"
    "  verify PATH     check every file against its metadata (and every\n"
    "                  CRC-32 of an archive); one line per problem, exit\n"
    "                  status 1 if any\n"
    "  dump PATH       canonical JSON of the tree on stdout\n"
    "  copy SRC DST    load SRC and save it again under DST (an archive if\n"
    "                  DST ends with .tdz)\n";

// Draws a one-line progress bar on stderr when it is a terminal.
void draw_progress(int64_t done, int64_t total) {
  constexpr int kWidth = 40;
  const double fraction = total > 0 ? static_cast<double>(done) / total : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::fprintf(
      stderr,
      "\r[%s%s] %3d%% %lld/%lld bytes",
      std::string(static_cast<size_t>(filled), '#').c_str(),
      std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(),
      static_cast<int>(fraction * 100),
      static_cast<long long>(done),
      static_cast<long long>(total));
  if (done >= total) {
    std::fprintf(stderr, "\n");
  }
}

int run(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "info") {
    tensordict::tools::print_info(
        std::cout, args[1], tensordict::tools::load_any(args[1]));
    return 0;
  }
  if (args.size() == 2 && args[0] == "verify") {
    const auto problems = tensordict::tools::verify_any(args[1]);
    for (const auto& problem : problems) {
      std::cout << problem << "\n";
    }
    if (problems.empty()) {
      std::cout << args[1] << ": ok\n";
    }
    return problems.empty() ? 0 : 1;
  }
  if (args.size() == 2 && args[0] == "dump") {
    std::cout << tensordict::tools::dump_tree(
                     tensordict::tools::load_any(args[1]))
                     .dump(1)
              << "\n";
    return 0;
  }
  if (args.size() == 3 && args[0] == "copy") {
    tensordict::MemmapProgress progress;
    if (::isatty(STDERR_FILENO) != 0) {
      progress = draw_progress;
    }
    tensordict::tools::copy_tree(args[1], args[2], progress);
    return 0;
  }
  std::cerr << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return run(args);
  } catch (const c10::Error& e) {
    std::cerr << "tensordict: " << e.msg() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "tensordict: " << e.what() << "\n";
  }
  return 2;
}
