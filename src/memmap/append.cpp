// append_memmap: rows added to a saved tree along its first batch dim, in
// the files and order of Python tensordict 0.15's `append_memmap`, and the
// recovery of an append that was killed. See NOTE [Appending rows].

#include "memmap/append.h"

#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/key_path.h"
#include "core/tensor_dict_impl.h"
#include "io/atomic_file.h"
#include "io/file_io.h"
#include "io/format.h"
#include "tensordict/memmap.h"
#include "tensordict/non_tensor.h"
#include "util/python_spelling.h"

TENSORDICT_BEGIN_NAMESPACE
namespace detail {

// NOTE [Appending rows]: `append_memmap(prefix, rows)` writes what Python's
// does, in the same order. First each leaf file grows: the new rows' bytes
// go right after the saved ones (a file can be longer than its leaf, and
// loads accept that). Then, for every dict directory, top first, a new
// meta.json with the new first batch dim is written beside the old one as
// `.meta.json.append.tmp`. Only once all are written is each renamed over
// its meta.json, the top one (`_tensordict/` for a tensorclass) first. An
// error puts the old meta.json files and leaf sizes back. A killed append
// is recovered by tensordict main's rule (`_finish_killed_append`): the
// temporaries replace the meta.json beside them (the new rows) only when
// the top directory no longer holds `.meta.json.append.tmp` (so the top
// meta.json was replaced) and the top meta.json's first batch dim is the
// row count of every temporary; otherwise every temporary is removed (the
// old rows). The count guards against temporaries that another append left
// behind, or a top temporary removed by hand: renaming those in would give
// the nested levels another number of rows than the top. A temporary that
// cannot be read counts as a mismatch. `append_memmap` applies the rule on
// disk before it appends; loads apply it to what they read without writing
// (Python's loads ignore the temporaries, so there a killed append can
// load as a mix of old and new levels, or not at all). 0.15.3's rule
// (roll forward whenever the top temporary is gone) gives the same result
// for every state an append of ours or of Python's leaves behind.

namespace {

constexpr const char* kAppendTemporary = ".meta.json.append.tmp";
// The deepest directory nesting searched for temporaries.
constexpr int kMaxAppendDepth = 128;
// The largest meta.json an append rewrites.
constexpr int64_t kMaxAppendMetaBytes = int64_t{64} << 20;

struct AppendLeaf {
  std::string file;
  int64_t saved_nbytes = 0;
  at::Tensor rows;
  std::string what;
};

std::string where_of(const KeyPath& key) {
  return key.empty() ? "the saved tensordict" : "the entry " + key.to_string();
}

std::string quoted_sorted_keys(const TensorDictImpl& impl) {
  std::vector<std::string> keys;
  for (const auto& node : impl.nodes()) {
    keys.push_back("'" + node->key + "'");
  }
  std::sort(keys.begin(), keys.end());
  return "[" + join_parts(keys, ", ") + "]";
}

// The values a non-tensor entry of the rows holds: one, or a stack's.
std::vector<Json> non_tensor_values(const Value& value) {
  if (value.is_non_tensor_data()) {
    return {value.non_tensor_data().data()};
  }
  const NonTensorStack& stack = value.non_tensor_stack();
  std::vector<Json> out;
  const int64_t count = c10::multiply_integers(stack.batch_size());
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(stack.at(i));
  }
  return out;
}

// The directory holding a loaded dict's entries.
std::string entries_dir(const TensorDictImpl& impl) {
  return impl.python_class.empty()
             ? impl.memmap.prefix
             : join_path(impl.memmap.prefix, "_tensordict");
}

// Python's `_check_append`: fills `leaves` and `meta_files` (top first).
void check_append(
    const TensorDict& saved,
    const TensorDict& rows,
    KeyPath& key,
    std::vector<AppendLeaf>& leaves,
    std::vector<std::string>& meta_files) {
  const std::string where = where_of(key);
  const TensorDictImpl& old_impl = *saved.unsafeGetImpl();
  const TensorDictImpl& new_impl = *rows.unsafeGetImpl();
  TORCH_CHECK_VALUE(
      rows.batch_size().slice(1) == saved.batch_size().slice(1) &&
          rows.batch_size().size() == saved.batch_size().size(),
      "Cannot append rows of batch size ",
      size_repr(rows.batch_size()),
      " to ",
      where,
      ", of batch size ",
      size_repr(saved.batch_size()),
      ": they differ beyond the first dimension.");
  TORCH_CHECK_VALUE(
      old_impl.python_class == new_impl.python_class,
      "Cannot append a ",
      new_impl.python_class.empty() ? "TensorDict" : new_impl.python_class,
      " to ",
      where,
      ", a ",
      old_impl.python_class.empty() ? "TensorDict" : old_impl.python_class,
      ".");
  std::set<std::string> old_keys;
  std::set<std::string> new_keys;
  for (const auto& node : old_impl.nodes()) {
    old_keys.insert(node->key);
  }
  for (const auto& node : new_impl.nodes()) {
    new_keys.insert(node->key);
  }
  TORCH_CHECK_VALUE(
      old_keys == new_keys,
      "Cannot append rows with the keys ",
      quoted_sorted_keys(new_impl),
      " to ",
      where,
      ", which has the keys ",
      quoted_sorted_keys(old_impl),
      ".");
  const std::string dir = entries_dir(old_impl);
  TORCH_CHECK(
      !old_impl.memmap.prefix.empty(),
      "append_memmap: ",
      where,
      " was not loaded from a directory");
  meta_files.push_back(join_path(dir, "meta.json"));
  for (const auto& node : old_impl.nodes()) {
    const PathPart part(key, node->key);
    const std::string entry = where_of(key);
    const Value& old_value = node->value;
    const Value& new_value = new_impl.find(node->key)->value;
    if (old_value.is_non_tensor()) {
      TORCH_CHECK_VALUE(
          old_value.is_non_tensor_data(),
          "Cannot append to ",
          entry,
          ", a NonTensorStack: a stack of non-tensor values cannot grow.");
      const Json& data = old_value.non_tensor_data().data();
      bool equal = new_value.is_non_tensor();
      if (equal) {
        for (const Json& value : non_tensor_values(new_value)) {
          equal = equal && value == data;
        }
      }
      TORCH_CHECK_VALUE(
          equal,
          "Cannot append to ",
          entry,
          ": the saved non-tensor value ",
          data.dump(),
          " stays as it is, so the rows must hold the same value, not ",
          new_value.is_non_tensor_data()
              ? new_value.non_tensor_data().data().dump()
              : new_value.type_name(),
          ".");
    } else if (old_value.is_lazy_stack()) {
      TORCH_CHECK_VALUE(
          false, "Cannot append to ", entry, ": a lazy stack cannot grow.");
    } else if (old_value.is_tensordict()) {
      TORCH_CHECK_VALUE(
          new_value.is_tensordict(),
          "Cannot append a ",
          new_value.type_name(),
          " to ",
          entry,
          ", a TensorDict.");
      check_append(
          old_value.tensordict(),
          new_value.tensordict(),
          key,
          leaves,
          meta_files);
    } else {
      TORCH_CHECK_VALUE(
          new_value.is_tensor(),
          "Cannot append a ",
          new_value.type_name(),
          " to ",
          entry,
          ", a tensor.");
      const at::Tensor& old_tensor = old_value.tensor();
      const at::Tensor& new_tensor = new_value.tensor();
      TORCH_CHECK_VALUE(
          !old_tensor.is_nested() && !new_tensor.is_nested(),
          "Cannot append to ",
          entry,
          ": a nested tensor cannot grow.");
      TORCH_CHECK_VALUE(
          new_tensor.scalar_type() == old_tensor.scalar_type() &&
              new_tensor.dim() == old_tensor.dim() &&
              new_tensor.sizes().slice(1) == old_tensor.sizes().slice(1),
          "Cannot append rows of dtype ",
          dtype_name(new_tensor.scalar_type()),
          " and shape ",
          python_tuple(new_tensor.sizes()),
          " to ",
          entry,
          ", of dtype ",
          dtype_name(old_tensor.scalar_type()),
          " and shape ",
          python_tuple(old_tensor.sizes()),
          ".");
      // A leaf with no elements has no file.
      std::optional<std::string> file = mapped_filename(old_tensor);
      if (!file) {
        file = join_path(dir, encode_key(node->key) + ".memmap");
      }
      leaves.push_back(
          {*file,
           static_cast<int64_t>(old_tensor.nbytes()),
           new_tensor,
           key.to_string()});
    }
  }
}

// Writes `nbytes` from `data` at `offset` of `fd`.
void write_at(
    int fd,
    const char* data,
    size_t nbytes,
    off_t offset,
    const AppendLeaf& leaf) {
  const WriteProgress done = write_fully(fd, data, nbytes, offset);
  TORCH_CHECK(
      done.written == nbytes,
      "append_memmap: could not write the rows of ",
      leaf.what,
      " to ",
      leaf.file,
      ": ",
      done.reason());
}

// True if an append replaces `_tensordict/meta.json` first: the root is a
// tensorclass (not a dict with a key of that name), or its meta.json cannot
// be read.
bool fields_are_top(const std::string& prefix) {
  try {
    const std::string meta_path = join_path(prefix, "meta.json");
    const Json meta = parse_meta_json(
        read_small_file(meta_path, kMaxAppendMetaBytes),
        kMaxAppendDepth,
        meta_path);
    const auto type = meta.find("_type");
    return type == meta.end() || *type != kTensorDictType;
  } catch (const c10::Error&) {
    return true;
  }
}

// True if the top directory, whose meta.json an append replaces first
// (`_tensordict` for a tensorclass, else `prefix`), holds a temporary.
bool top_temporary_exists(const std::string& prefix) {
  if (path_kind(join_path(prefix, kAppendTemporary)) != PathKind::kMissing) {
    return true;  // a dict's; a tensorclass's own meta.json is never replaced
  }
  const std::string fields = join_path(prefix, "_tensordict");
  return path_kind(join_path(fields, kAppendTemporary)) != PathKind::kMissing &&
         fields_are_top(prefix);
}

// The append temporaries below `dir` (not through symlinks).
void find_temporaries(
    const std::string& dir, int depth, std::vector<std::string>& out) {
  if (depth > kMaxAppendDepth) {
    return;
  }
  for (const auto& [name, kind] : list_directory(dir)) {
    if (kind == PathKind::kDirectory) {
      find_temporaries(join_path(dir, name), depth + 1, out);
    } else if (kind == PathKind::kFile && name == kAppendTemporary) {
      out.push_back(dir);
    }
  }
}

// The first batch dim that the dict meta.json at `path` records, or none
// when it cannot be read or records none.
std::optional<int64_t> recorded_rows(const std::string& path) {
  try {
    const Json meta = parse_meta_json(
        read_small_file(path, kMaxAppendMetaBytes), kMaxAppendDepth, path);
    const auto shape = meta.find("shape");
    if (shape == meta.end() || !shape->is_array() || shape->empty() ||
        !shape->front().is_number_integer()) {
      return std::nullopt;
    }
    return shape->front().get<int64_t>();
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

// The meta.json an append replaces first: `_tensordict/meta.json` when the
// root is a tensorclass, else the root's.
std::string top_meta_json(const std::string& prefix) {
  const std::string fields =
      join_path(join_path(prefix, "_tensordict"), "meta.json");
  return path_kind(fields) == PathKind::kFile && fields_are_top(prefix)
             ? fields
             : join_path(prefix, "meta.json");
}

}  // namespace

bool append_rolls_forward(
    const std::string& prefix, const std::vector<std::string>& dirs) {
  if (dirs.empty() || top_temporary_exists(prefix)) {
    return false;
  }
  const std::optional<int64_t> rows = recorded_rows(top_meta_json(prefix));
  if (!rows) {
    return false;
  }
  for (const auto& dir : dirs) {
    if (recorded_rows(join_path(dir, kAppendTemporary)) != rows) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> append_temporaries(const std::string& prefix) {
  std::vector<std::string> dirs;
  find_temporaries(prefix, 0, dirs);
  return dirs;
}

std::string append_temporary(const std::string& dir) {
  return join_path(dir, kAppendTemporary);
}

void recover_append(const std::string& prefix) {
  std::vector<std::string> dirs;
  find_temporaries(prefix, 0, dirs);
  if (dirs.empty()) {
    return;
  }
  const bool forward = append_rolls_forward(prefix, dirs);
  for (const auto& dir : dirs) {
    const std::string temporary = join_path(dir, kAppendTemporary);
    if (forward) {
      rename_path(temporary, join_path(dir, "meta.json"));
    } else {
      remove_file(temporary);
    }
  }
}

}  // namespace detail

void append_memmap(const std::string& prefix, const TensorDict& rows) {
  TORCH_CHECK_VALUE(
      detail::path_kind(prefix) == detail::PathKind::kDirectory,
      "append_memmap appends to a directory written by save or memmap, and ",
      prefix,
      " is not one. An archive cannot grow: unpack it with unpack_memmap "
      "first.");
  detail::recover_append(prefix);
  std::vector<detail::AppendLeaf> leaves;
  std::vector<std::string> meta_files;
  int64_t num_rows = 0;
  {
    LoadedTree tree = load_memmap_any(prefix);
    const auto* saved = std::get_if<TensorDict>(&tree);
    TORCH_CHECK_VALUE(
        saved != nullptr,
        "Cannot append a TensorDict to the saved tensordict, a "
        "LazyStackedTensorDict.");
    TORCH_CHECK_VALUE(
        saved->batch_dims() > 0 && rows.batch_dims() > 0,
        "append_memmap appends along the first batch dimension, which the "
        "saved tensordict (batch size ",
        detail::size_repr(saved->batch_size()),
        ") and the rows (batch size ",
        detail::size_repr(rows.batch_size()),
        ") must both have.");
    detail::KeyPath key;
    detail::check_append(*saved, rows, key, leaves, meta_files);
    num_rows = saved->batch_size()[0] + rows.batch_size()[0];
  }  // the saved tree is unmapped here

  // Grow the leaf files; on an error they get their old sizes back.
  std::vector<std::pair<std::string, std::optional<off_t>>> old_sizes;
  // (temporary, meta.json, old content)
  std::vector<std::tuple<std::string, std::string, std::string>> replacements;
  size_t replaced = 0;
  try {
    for (const auto& leaf : leaves) {
      if (leaf.rows.numel() == 0) {
        continue;
      }
      struct stat st {};
      const bool exists = ::lstat(leaf.file.c_str(), &st) == 0;
      TORCH_CHECK(
          !exists || S_ISREG(st.st_mode),
          "append_memmap: the memmap file of ",
          leaf.what,
          " (",
          leaf.file,
          ") is not a regular file");
      old_sizes.emplace_back(
          leaf.file, exists ? std::optional<off_t>(st.st_size) : std::nullopt);
      const at::Tensor bytes =
          leaf.rows.detach().cpu().resolve_conj().resolve_neg().contiguous();
      const int fd = ::open(
          leaf.file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
      TORCH_CHECK(
          fd >= 0,
          "append_memmap: could not open ",
          leaf.file,
          ": ",
          std::strerror(errno));
      try {
        detail::write_at(
            fd,
            static_cast<const char*>(bytes.data_ptr()),
            bytes.nbytes(),
            static_cast<off_t>(leaf.saved_nbytes),
            leaf);
      } catch (...) {
        ::close(fd);
        throw;
      }
      ::close(fd);
    }
    // Every new meta.json is written before the first replaces the old.
    for (const auto& meta_file : meta_files) {
      std::string old_content =
          detail::read_small_file(meta_file, detail::kMaxAppendMetaBytes);
      Json meta = detail::parse_meta_json(
          old_content, detail::kMaxAppendDepth, meta_file);
      TORCH_CHECK(
          meta.contains("shape") && meta["shape"].is_array() &&
              !meta["shape"].empty(),
          "append_memmap: ",
          meta_file,
          " changed while appending: it has no batch dims");
      meta["shape"][0] = num_rows;
      for (auto& entry : meta) {
        if (entry.is_object() && entry.contains("dtype") &&
            entry.contains("shape") && entry["shape"].is_array() &&
            !entry["shape"].empty()) {
          entry["shape"][0] = num_rows;
        }
      }
      const std::string dir = meta_file.substr(0, meta_file.rfind('/'));
      const std::string temporary = detail::append_temporary(dir);
      replacements.emplace_back(temporary, meta_file, std::move(old_content));
      // Python's json.dumps: spaced, ASCII.
      detail::write_whole_file(
          temporary, detail::dump_json(meta, /*spaced=*/true, /*ascii=*/true));
    }
    for (const auto& replacement : replacements) {
      detail::rename_path(std::get<0>(replacement), std::get<1>(replacement));
      ++replaced;
    }
  } catch (...) {
    // Put back the meta.json files already replaced, then the leaves.
    try {
      for (size_t i = 0; i < replaced; ++i) {
        detail::write_file_atomically(
            std::get<1>(replacements[i]), std::get<2>(replacements[i]), false);
      }
      for (const auto& replacement : replacements) {
        detail::remove_file(std::get<0>(replacement));
      }
      for (const auto& [file, size] : old_sizes) {
        if (size) {
          const int status = ::truncate(file.c_str(), *size);
          (void)status;  // best effort, as the rest of the undo
        } else {
          detail::remove_file(file);
        }
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error counts
    }
    throw;
  }
}

TENSORDICT_END_NAMESPACE
