#include "inspect.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "memmap/archive.h"
#include "tensordict/archive.h"
#include "tensordict/consolidate.h"
#include "util/python_spelling.h"
#include "util/sha256.h"

namespace tensordict::tools {
namespace {

using Key = std::vector<std::string>;

std::string tensor_sha256(const at::Tensor& tensor) {
  const at::Tensor bytes =
      tensor.detach().cpu().resolve_conj().resolve_neg().contiguous();
  return detail::sha256_hex(bytes.data_ptr(), bytes.nbytes());
}

Json names_json(const DimNames& names) {
  Json out = Json::array();
  for (const auto& name : names) {
    out.push_back(name ? Json(*name) : Json(nullptr));
  }
  return out;
}

void collect(
    const TensorDict& td,
    const Key& prefix,
    std::vector<std::pair<Key, Json>>& out) {
  for (const auto& [name, value] : td.items()) {
    Key key = prefix;
    for (size_t i = 0; i < name.size(); ++i) {
      key.emplace_back(name[i]);
    }
    Json entry = Json::object();
    entry["key"] = key;
    if (value.is_tensor()) {
      const at::Tensor& t = value.tensor();
      entry["kind"] = "tensor";
      entry["dtype"] = detail::dtype_name(t.scalar_type());
      entry["shape"] = t.sizes().vec();
      entry["sha256"] = tensor_sha256(t);
    } else if (value.is_tensordict()) {
      collect(value.tensordict(), key, out);
      continue;
    } else if (value.is_lazy_stack()) {
      const auto& elements = value.lazy_stack().tensordicts();
      for (size_t i = 0; i < elements.size(); ++i) {
        Key element_key = key;
        element_key.push_back(std::to_string(i));
        collect(elements[i], element_key, out);
      }
      continue;
    } else {
      entry["kind"] = "non_tensor";
      entry["value"] = value.is_non_tensor_data()
                           ? value.non_tensor_data().data()
                           : value.non_tensor_stack().tolist();
    }
    out.emplace_back(std::move(key), std::move(entry));
  }
}

Json sorted_entries(std::vector<std::pair<Key, Json>> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first < b.first;
  });
  Json out = Json::array();
  for (auto& [key, entry] : entries) {
    out.push_back(std::move(entry));
  }
  return out;
}

std::string shape_text(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

struct Totals {
  int64_t leaves = 0;
  int64_t bytes = 0;
};

void print_dict(
    std::ostream& out, const TensorDict& td, int depth, Totals& totals);

void print_elements(
    std::ostream& out,
    const LazyStackedTensorDict& stack,
    int depth,
    Totals& totals) {
  const std::string indent(static_cast<size_t>(depth) * 2, ' ');
  const auto& elements = stack.tensordicts();
  for (size_t i = 0; i < elements.size(); ++i) {
    out << indent << "[" << i
        << "]: TensorDict batch_size=" << shape_text(elements[i].batch_size())
        << "\n";
    print_dict(out, elements[i], depth + 1, totals);
  }
}

void print_dict(
    std::ostream& out, const TensorDict& td, int depth, Totals& totals) {
  const std::string indent(static_cast<size_t>(depth) * 2, ' ');
  for (const auto& [name, value] : td.items()) {
    const std::string key = detail::python_repr(std::string(name[0]));
    if (value.is_tensor()) {
      const at::Tensor& t = value.tensor();
      out << indent << key << ": tensor " << detail::dtype_name(t.scalar_type())
          << " " << shape_text(t.sizes()) << " " << t.nbytes() << " bytes\n";
      totals.leaves += 1;
      totals.bytes += static_cast<int64_t>(t.nbytes());
    } else if (value.is_tensordict()) {
      const TensorDict& child = value.tensordict();
      out << indent << key << ": "
          << (child.python_class().empty() ? "TensorDict"
                                           : child.python_class())
          << " batch_size=" << shape_text(child.batch_size()) << "\n";
      print_dict(out, child, depth + 1, totals);
    } else if (value.is_lazy_stack()) {
      const LazyStackedTensorDict& stack = value.lazy_stack();
      out << indent << key << ": LazyStackedTensorDict batch_size="
          << shape_text(stack.batch_size())
          << " stack_dim=" << stack.stack_dim() << "\n";
      print_elements(out, stack, depth + 1, totals);
    } else if (value.is_non_tensor_data()) {
      out << indent << key << ": NonTensorData "
          << value.non_tensor_data().data().dump() << "\n";
    } else {
      const auto& stack = value.non_tensor_stack();
      out << indent << key
          << ": NonTensorStack batch_size=" << shape_text(stack.batch_size())
          << " " << stack.tolist().dump() << "\n";
    }
  }
}

bool is_directory(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::is_directory(path, ignored);
}

// A `.tdz` archive: by its suffix (so that a damaged one gets the zip
// reader's message, not the consolidated reader's), or a zip holding a
// meta.json under another name.
bool is_archive(const std::string& path) {
  return detail::is_archive_path(path) || is_memmap_archive(path);
}

}  // namespace

LoadedTree load_any(const std::string& path) {
  if (is_directory(path) || is_archive(path)) {
    return load_memmap_any(path);
  }
  return from_consolidated_any(path);
}

std::vector<std::string> verify_any(const std::string& path) {
  if (is_directory(path)) {
    return verify_memmap(path);
  }
  if (is_archive(path)) {
    // The tree against its metadata, then every entry's CRC-32 (a load
    // maps the leaves without reading them, so it does not check those).
    std::vector<std::string> problems = verify_memmap(path);
    if (problems.empty()) {
      try {
        problems = detail::archive_crc_problems(path);
      } catch (const c10::Error& e) {
        problems.push_back(e.msg());
      }
    }
    return problems;
  }
  try {
    (void)from_consolidated_any(path);
  } catch (const c10::Error& e) {
    return {e.msg()};  // from_consolidated names the file
  }
  return {};
}

Json dump_tree(const LoadedTree& tree) {
  Json out = Json::object();
  std::vector<std::pair<Key, Json>> entries;
  if (const auto* td = std::get_if<TensorDict>(&tree)) {
    out["batch_size"] = td->batch_size().vec();
    if (td->has_names()) {
      out["names"] = names_json(td->names());
    }
    if (!td->python_class().empty()) {
      out["class"] = td->python_class();
    }
    collect(*td, {}, entries);
  } else {
    const auto& stack = std::get<LazyStackedTensorDict>(tree);
    out["batch_size"] = stack.batch_size().vec();
    out["stack_dim"] = stack.stack_dim();
    if (!stack.python_class().empty()) {
      out["class"] = stack.python_class();
    }
    const auto& elements = stack.tensordicts();
    if (stack.has_names()) {
      out["names"] = names_json(stack.names());
    }
    for (size_t i = 0; i < elements.size(); ++i) {
      collect(elements[i], {std::to_string(i)}, entries);
    }
  }
  out["entries"] = sorted_entries(std::move(entries));
  return out;
}

void print_info(
    std::ostream& out, const std::string& path, const LoadedTree& tree) {
  Totals totals;
  if (const auto* td = std::get_if<TensorDict>(&tree)) {
    out << path << ": "
        << (td->python_class().empty() ? "TensorDict" : td->python_class())
        << " batch_size=" << shape_text(td->batch_size());
    if (td->has_names()) {
      out << " names=" << detail::names_repr(td->names());
    }
    out << "\n";
    print_dict(out, *td, 1, totals);
  } else {
    const auto& stack = std::get<LazyStackedTensorDict>(tree);
    out << path << ": ";
    if (!stack.python_class().empty()) {
      out << stack.python_class() << " over a ";
    }
    out << "LazyStackedTensorDict batch_size=" << shape_text(stack.batch_size())
        << " stack_dim=" << stack.stack_dim() << "\n";
    print_elements(out, stack, 1, totals);
  }
  out << totals.leaves << " tensors, " << totals.bytes << " bytes\n";
}

void copy_tree(
    const std::string& source,
    const std::string& destination,
    const MemmapProgress& progress) {
  const LoadedTree tree = load_memmap_any(source);
  const MemmapOptions options =
      MemmapOptions(destination).copy_existing(true).progress(progress);
  if (const auto* td = std::get_if<TensorDict>(&tree)) {
    (void)td->memmap(options);  // an archive for a ".tdz" destination
  } else {
    (void)memmap(std::get<LazyStackedTensorDict>(tree), options);
  }
}

}  // namespace tensordict::tools
