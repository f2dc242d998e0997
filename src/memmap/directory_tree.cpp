// print_directory_tree: Python's `tensordict.utils.print_directory_tree`.

#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "tensordict/memmap.h"

TENSORDICT_BEGIN_NAMESPACE

namespace {

namespace fs = std::filesystem;

// The bytes of the regular files under `path` (os.walk does not follow
// symlinked directories, and neither does this).
uintmax_t tree_size(const fs::path& path) {
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(path, error))) {
    const uintmax_t size = fs::file_size(path, error);
    return error ? 0 : size;
  }
  uintmax_t total = 0;
  for (fs::recursive_directory_iterator it(path, error), end;
       !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file(error)) {
      const uintmax_t size = it->file_size(error);
      total += error ? 0 : size;
    }
  }
  return total;
}

// Python's `f"{size:.2f} {unit}"` over B, KB, MB, GB, TB.
std::string format_size(double size) {
  for (const char* unit : {"B", "KB", "MB", "GB", "TB"}) {
    if (size < 1024.0) {
      char text[64];
      std::snprintf(text, sizeof(text), "%.2f %s", size, unit);
      return text;
    }
    size /= 1024.0;
  }
  return "";  // Python returns None past a petabyte
}

std::string base_name(const fs::path& path) {
  // os.path.basename("dir/") is "": keep Python's answer for a trailing "/".
  return path.filename().string();
}

void tree_lines(
    const fs::path& path,
    const std::string& indent,
    std::vector<std::string>& lines) {
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    lines.push_back(indent + base_name(path));
    return;
  }
  lines.push_back(indent + base_name(path) + "/");
  std::vector<fs::path> children;
  for (fs::directory_iterator it(path, error), end; !error && it != end;
       it.increment(error)) {
    children.push_back(it->path());
  }
  std::sort(children.begin(), children.end());
  for (const fs::path& child : children) {
    tree_lines(child, indent + "    ", lines);
  }
}

}  // namespace

std::string print_directory_tree(
    const std::string& path, const std::string& indent, bool display_metadata) {
  std::vector<std::string> lines;
  if (display_metadata) {
    lines.push_back(
        "Directory size: " +
        format_size(static_cast<double>(tree_size(fs::path(path)))));
  }
  tree_lines(fs::path(path), indent, lines);
  return c10::Join("\n", lines);
}

TENSORDICT_END_NAMESPACE
