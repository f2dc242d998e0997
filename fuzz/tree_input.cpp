#include "tree_input.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tensordict::fuzz {
namespace {

constexpr std::string_view kSeparator = "=== ";
// Bounds that keep one input's tree small: a few directories deep, a few
// dozen files.
constexpr size_t kMaxParts = 64;
constexpr size_t kMaxDepth = 8;
constexpr size_t kMaxComponent = 64;

// The relative path `path` split into safe components, or nothing.
std::vector<std::string> safe_components(std::string_view path) {
  std::vector<std::string> parts;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view()
                                           : path.substr(slash + 1);
    if (part.empty() || part == "." || part == ".." ||
        part.size() > kMaxComponent ||
        part.find('\0') != std::string_view::npos) {
      return {};
    }
    parts.emplace_back(part);
  }
  return parts.size() > kMaxDepth ? std::vector<std::string>() : parts;
}

// Where the next part begins at or after `from`: a separator at the start of
// the input or right after a newline.
size_t next_part(std::string_view text, size_t from) {
  if (from == 0 && text.substr(0, kSeparator.size()) == kSeparator) {
    return 0;
  }
  const size_t at = text.find(std::string("\n").append(kSeparator), from);
  return at == std::string_view::npos ? at : at + 1;
}

}  // namespace

ScratchDir::ScratchDir() {
  const char* base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string pattern = std::string(base) + "/tensordict-fuzz-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  root_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::string ScratchDir::fresh_tree() {
  for (const auto& entry : std::filesystem::directory_iterator(root_)) {
    std::filesystem::remove_all(entry.path());
  }
  std::string tree = root_ + "/tree";
  std::filesystem::create_directory(tree);
  return tree;
}

std::string ScratchDir::file(const std::string& name) const {
  return root_ + "/" + name;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return;  // e.g. the path names a directory an earlier part created
  }
  if (size != 0 && std::fwrite(data, 1, size, file) != size) {
    std::perror("fwrite");
    std::abort();
  }
  std::fclose(file);
}

void write_tree(const uint8_t* data, size_t size, const std::string& dir) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (next_part(text, 0) != 0) {
    write_file(dir + "/meta.json", data, size);
    return;
  }
  size_t at = 0;
  for (size_t count = 0; at != std::string_view::npos && count < kMaxParts;
       ++count) {
    const size_t header = at + kSeparator.size();
    const size_t newline = text.find('\n', header);
    if (newline == std::string_view::npos) {
      return;
    }
    const size_t end = next_part(text, newline + 1);
    const size_t stop = end == std::string_view::npos ? text.size() : end - 1;
    const std::vector<std::string> parts =
        safe_components(text.substr(header, newline - header));
    at = end;
    if (parts.empty()) {
      continue;
    }
    std::filesystem::path path(dir);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      path /= parts[i];
      std::error_code error;  // a file of that name: the part is skipped
      std::filesystem::create_directory(path, error);
    }
    path /= parts.back();
    const size_t begin = std::min(newline + 1, stop);
    write_file(path.string(), data + begin, stop - begin);
  }
}

}  // namespace tensordict::fuzz
