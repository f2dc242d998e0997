// The C++ half of the memmap interop test (see run_memmap_interop.py):
// loads every tree of the corpus Python wrote, compares its canonical dump
// with the one Python computed, compares the bytes of what C++ writes back
// with Python's files, and leaves those trees for Python to load.
//
// usage: memmap_interop CORPUS_DIR OUT_DIR
//
// For append_interop.py:
//        memmap_interop append PY_BASE PY_TREE PY_ROWS CPP_TREE
//          appends the rows saved at PY_ROWS to PY_TREE (both written by
//          Python) and saves the tree at PY_BASE again as CPP_TREE;
//        memmap_interop append-check CPP_TREE EXPECTED_DUMP
//          compares the tree Python appended to with the expected dump.
//
// For step 4 of run_memmap_interop.py:
//        memmap_interop lazy-root PY_DIR CPP_DIR
//          loads the lazy stacks Python wrote with memmap_, memmap_like and
//          save("x.tdz") (PY_DIR/<case>/<api>), compares their dumps, and
//          writes each with the same member into CPP_DIR/<case>/<api>,
//          comparing the bytes of the directories with Python's.

#include <tensordict/memmap.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "inspect.h"
#include "util/sha256.h"

namespace {

using tensordict::Json;

Json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return Json::parse(in);
}

std::string file_sha256(const std::string& path, int64_t& size) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  size = static_cast<int64_t>(bytes.size());
  return tensordict::detail::sha256_hex(bytes.data(), bytes.size());
}

// Differences between two dumps, entry by entry.
int compare_dumps(
    const std::string& name, const Json& expected, const Json& actual) {
  int problems = 0;
  for (const char* member : {"batch_size", "names", "stack_dim", "class"}) {
    const Json want = expected.value(member, Json());
    const Json got = actual.value(member, Json());
    if (want != got) {
      std::cout << name << ": " << member << " expected " << want.dump()
                << ", got " << got.dump() << "\n";
      ++problems;
    }
  }
  std::map<Json, Json> want;
  std::map<Json, Json> got;
  for (const auto& entry : expected["entries"]) {
    want[entry["key"]] = entry;
  }
  for (const auto& entry : actual["entries"]) {
    got[entry["key"]] = entry;
  }
  for (const auto& [key, entry] : want) {
    const auto it = got.find(key);
    if (it == got.end()) {
      std::cout << name << ": " << key.dump() << " missing\n";
      ++problems;
    } else if (it->second != entry) {
      std::cout << name << ": " << key.dump() << " expected " << entry.dump()
                << ", got " << it->second.dump() << "\n";
      ++problems;
    }
  }
  for (const auto& [key, entry] : got) {
    if (want.count(key) == 0) {
      std::cout << name << ": " << key.dump() << " unexpected\n";
      ++problems;
    }
  }
  return problems;
}

// Compares the files C++ wrote with Python's, byte for byte.
int compare_files(
    const std::string& name, const Json& files, const std::string& dir) {
  int problems = 0;
  for (const auto& [relative, info] : files["files"].items()) {
    int64_t size = -1;
    const std::string path = dir + "/" + relative;
    if (!std::ifstream(path)) {
      continue;  // reported by the Python check as missing
    }
    const std::string sha = file_sha256(path, size);
    if (sha != info["sha256"].get<std::string>()) {
      std::cout << name << ": file " << relative << " differs from Python's ("
                << size << " bytes vs " << info["size"] << ")\n";
      ++problems;
    }
  }
  return problems;
}

// Trees this version cannot represent yet; each is reported, not failed.
const std::map<std::string, std::string> kKnownGaps = {};

}  // namespace

int append_main(int argc, char** argv) {
  const std::string mode = argv[1];
  try {
    if (mode == "append" && argc == 6) {
      tensordict::append_memmap(
          argv[3], tensordict::TensorDict::load_memmap(argv[4]));
      (void)tensordict::TensorDict::load_memmap(argv[2]).memmap(
          tensordict::MemmapOptions(argv[5]).copy_existing(true));
      return 0;
    }
    if (mode == "append-to" && argc == 4) {
      // A tree a killed append left: recovered, then appended to.
      tensordict::append_memmap(
          argv[2], tensordict::TensorDict::load_memmap(argv[3]));
      return 0;
    }
    if (mode == "append-check" && argc == 4) {
      const int problems = compare_dumps(
          argv[2],
          read_json(argv[3]),
          tensordict::tools::dump_tree(tensordict::load_memmap_any(argv[2])));
      std::cout << "C++ loads the tree Python appended to: " << problems
                << " problems\n";
      return problems > 0 ? 1 : 0;
    }
  } catch (const c10::Error& e) {
    std::cout << mode << ": " << e.msg() << "\n";
    return 1;
  }
  std::cerr << "usage: memmap_interop append PY_BASE PY_TREE PY_ROWS "
               "CPP_TREE | append-to TREE ROWS | append-check CPP_TREE "
               "EXPECTED_DUMP\n";
  return 2;
}

int lazy_root_main(const std::string& py_dir, const std::string& cpp_dir) {
  using tensordict::LazyStackedTensorDict;
  int failed = 0;
  int ok = 0;
  // Named: a range over a member of a temporary would dangle.
  const auto index = read_json(py_dir + "/index.json");
  for (const auto& entry : index["cases"]) {
    const std::string name = entry["name"];
    const auto style = entry["json_style"] == "orjson"
                           ? tensordict::JsonStyle::kCompact
                           : tensordict::JsonStyle::kSpaced;
    int problems = 0;
    try {
      for (const char* api : {"memmap_", "memmap_like", "save.tdz"}) {
        const std::string path = name + "/" + api;
        problems += compare_dumps(
            path,
            read_json(py_dir + "/" + path + ".expected.json"),
            tensordict::tools::dump_tree(
                LazyStackedTensorDict::load_memmap(py_dir + "/" + path)));
      }
      // The values to write: the stack Python memmapped in place, its
      // leaves mapping Python's files (hence copy_existing).
      const LazyStackedTensorDict loaded =
          LazyStackedTensorDict::load_memmap(py_dir + "/" + name + "/memmap_");
      const auto options = [&](const char* api) {
        return tensordict::MemmapOptions(cpp_dir + "/" + name + "/" + api)
            .copy_existing(true)
            .json_style(style);
      };
      std::vector<tensordict::TensorDict> copies;
      for (const auto& element : loaded.tensordicts()) {
        copies.push_back(element.clone());
      }
      LazyStackedTensorDict copy(
          copies, loaded.stack_dim(), loaded.stack_dim_name());
      copy.memmap_(options("memmap_"));
      (void)loaded.memmap_like(options("memmap_like"));
      (void)loaded.save(options("save.tdz"));
      for (const char* api : {"memmap_", "memmap_like"}) {
        const std::string path = name + "/" + api;
        problems += compare_files(
            path,
            read_json(py_dir + "/" + path + ".files.json"),
            cpp_dir + "/" + path);
      }
    } catch (const std::exception& e) {
      const auto* error = dynamic_cast<const c10::Error*>(&e);
      std::cout << name << ": " << (error ? error->msg() : e.what()) << "\n";
      ++problems;
    }
    if (problems > 0) {
      ++failed;
    } else {
      ++ok;
    }
  }
  std::cout << "C++ lazy stacks at the root: " << ok << " cases ok, " << failed
            << " failed\n";
  return failed > 0 || ok == 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]).rfind("append", 0) == 0) {
    return append_main(argc, argv);
  }
  if (argc == 4 && std::string(argv[1]) == "lazy-root") {
    return lazy_root_main(argv[2], argv[3]);
  }
  if (argc != 3) {
    std::cerr << "usage: memmap_interop CORPUS_DIR OUT_DIR\n";
    return 2;
  }
  const std::string corpus = argv[1];
  const std::string out = argv[2];
  const Json index = read_json(corpus + "/index.json");
  int failed = 0;
  int ok = 0;
  for (const auto& entry : index["cases"]) {
    const std::string name = entry["name"];
    const std::string path = corpus + "/" + name;
    if (const auto gap = kKnownGaps.find(name); gap != kKnownGaps.end()) {
      std::cout << name << ": known gap, not compared: " << gap->second << "\n";
      std::ofstream(out + "/" + name + ".refused")
          << "known gap: " << gap->second << "\n";
      continue;
    }
    int problems = 0;
    try {
      const tensordict::LoadedTree tree = tensordict::load_memmap_any(path);
      problems += compare_dumps(
          name,
          read_json(corpus + "/" + name + ".expected.json"),
          tensordict::tools::dump_tree(tree));
      const auto style = entry["json_style"] == "orjson"
                             ? tensordict::JsonStyle::kCompact
                             : tensordict::JsonStyle::kSpaced;
      const auto options = tensordict::MemmapOptions(out + "/" + name)
                               .copy_existing(true)
                               .json_style(style);
      try {
        if (const auto* td = std::get_if<tensordict::TensorDict>(&tree)) {
          (void)td->memmap(options);
        } else {
          (void)std::get<tensordict::LazyStackedTensorDict>(tree).memmap(
              options);
        }
        problems += compare_files(
            name,
            read_json(corpus + "/" + name + ".files.json"),
            out + "/" + name);
      } catch (const c10::Error& e) {
        // Keys named like meta.json members are refused on purpose.
        if (std::string(e.msg()).find("would collide with") ==
            std::string::npos) {
          throw;
        }
        std::ofstream(out + "/" + name + ".refused") << e.msg() << "\n";
      }
    } catch (const std::exception& e) {
      const auto* error = dynamic_cast<const c10::Error*>(&e);
      std::cout << name << ": " << (error ? error->msg() : e.what()) << "\n";
      ++problems;
    }
    if (problems > 0) {
      ++failed;
    } else {
      ++ok;
    }
  }
  std::cout << "C++: " << ok << " cases ok, " << failed << " failed\n";
  return failed > 0 ? 1 : 0;
}
