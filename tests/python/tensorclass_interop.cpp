// The C++ side of tensorclass_interop.py: loads the tensorclasses Python
// saved as registered C++ structs, checks every field and the repr against
// Python's, checks its state dicts against Python's and loads Python's,
// then saves structs for Python to load. Prints each failed check and
// exits 1.

#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

using namespace tensordict;

namespace {

struct TcInner : TensorClass<TcInner> {
  TENSORDICT_FIELDS(TcInner, x, (std::string, tag))
};

struct TcTrajectory : TensorClass<TcTrajectory> {
  TENSORDICT_FIELDS(
      TcTrajectory,
      obs,
      action,
      (TcInner, inner),
      (std::string, task),
      (std::optional<std::string>, note),
      (std::optional<at::Tensor>, mask))
};

struct TcCounts : TensorClass<TcCounts, ClassFlags::kAutocast> {
  TENSORDICT_FIELDS(TcCounts, (int64_t, step), (double, ratio), (bool, done))
};

TENSORDICT_PYTHON_CLASS(
    TcInner, "<class 'tensorclass_interop_classes.TcInner'>");
TENSORDICT_PYTHON_CLASS(
    TcTrajectory, "<class 'tensorclass_interop_classes.TcTrajectory'>");
TENSORDICT_PYTHON_CLASS(
    TcCounts, "<class 'tensorclass_interop_classes.TcCounts'>");

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "C++ check failed: " << what << "\n";
    ++failures;
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The C++ struct Python built in write() (tensorclass_interop.py).
TcTrajectory python_trajectory() {
  return TcTrajectory(
      {{"obs", torch::arange(12, torch::kFloat).reshape({4, 3})},
       {"action", torch::arange(4) * 2},
       {"inner",
        TcInner({{"x", torch::full({4, 2}, 3.0)}, {"tag", "grip"}}, {4})},
       {"task", "reach"}},
      {4});
}

void check_python_trees(const std::string& work) {
  TcTrajectory traj = TcTrajectory::load_memmap(work + "/py_traj");
  expect(traj.batch_size() == c10::IntArrayRef({4}), "py_traj batch size");
  expect(
      torch::equal(
          traj.obs(), torch::arange(12, torch::kFloat).reshape({4, 3})),
      "py_traj.obs");
  expect(torch::equal(traj.action(), torch::arange(4) * 2), "py_traj.action");
  expect(
      torch::equal(traj.inner().x(), torch::full({4, 2}, 3.0)),
      "py_traj.inner.x");
  expect(traj.inner().tag() == "grip", "py_traj.inner.tag");
  expect(traj.task() == "reach", "py_traj.task");
  expect(!traj.note().has_value(), "py_traj.note is None");
  expect(!traj.mask().has_value(), "py_traj.mask is None");
  // The repr of the same struct built in C++ as Python built it (a loaded
  // tree prints MemoryMappedTensor in Python).
  const TcTrajectory same = python_trajectory();
  const std::string py_repr = read_text(work + "/py_traj_repr.txt");
  expect(
      same.repr_detailed() == py_repr,
      "py_traj repr:\n" + same.repr_detailed() + "\nPython:\n" + py_repr);
  const std::string py_compact = read_text(work + "/py_traj_repr_compact.txt");
  expect(
      same.repr() == py_compact,
      "py_traj compact repr:\n" + same.repr() + "\nPython:\n" + py_compact);

  const auto lazy =
      LazyStackedTensorClass<TcInner>::load_memmap(work + "/py_lazy");
  expect(lazy.batch_size() == c10::IntArrayRef({2, 2}), "py_lazy batch size");
  expect(torch::equal(lazy.at(0).x(), torch::ones({2, 3})), "py_lazy[0].x");
  expect(torch::equal(lazy.at(1).x(), torch::zeros({2, 4})), "py_lazy[1].x");
  expect(lazy.at(1).tag() == "b", "py_lazy[1].tag");

  const TensorDict holder = TensorDict::load_memmap(work + "/py_td_entry");
  expect(
      holder.get_tensordict("step").python_class() ==
          "<class 'tensorclass_interop_classes.TcInner'>",
      "py_td_entry['step'] keeps its class");
  const TcInner entry = get_as<TcInner>(holder, "step");
  expect(
      torch::equal(entry.x(), torch::full({4, 2}, 5.0)), "py_td_entry.step.x");
  expect(entry.tag() == "entry", "py_td_entry.step.tag");
  expect(
      torch::equal(holder.get("x"), torch::arange(4, torch::kFloat)),
      "py_td_entry.x");

  const TcTrajectory consolidated =
      TcTrajectory::from_consolidated(work + "/py_consolidated.bin");
  expect(
      torch::equal(consolidated.obs(), traj.obs()) &&
          torch::equal(consolidated.inner().x(), traj.inner().x()) &&
          consolidated.inner().tag() == "grip" &&
          consolidated.task() == "reach",
      "py_consolidated.bin read by from_consolidated");

  TcCounts counts = TcCounts::load_memmap(work + "/py_counts");
  expect(counts.step() == 7, "py_counts.step");
  expect(counts.ratio() == 0.25, "py_counts.ratio");
  expect(counts.done(), "py_counts.done");
  const TcCounts same_counts({{"step", 7}, {"ratio", 0.25}, {"done", true}});
  const std::string counts_repr = read_text(work + "/py_counts_repr.txt");
  expect(
      same_counts.repr_detailed() == counts_repr,
      "py_counts repr:\n" + same_counts.repr_detailed() + "\nPython:\n" +
          counts_repr);
  const std::string counts_compact =
      read_text(work + "/py_counts_repr_compact.txt");
  expect(
      same_counts.repr() == counts_compact,
      "py_counts compact repr:\n" + same_counts.repr() + "\nPython:\n" +
          counts_compact);
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
      return "torch.float32";
    case torch::kLong:
      return "torch.int64";
    default:
      return std::string("unexpected ") + c10::toString(dtype);
  }
}

c10::ScalarType dtype_from_name(const std::string& name) {
  if (name == "torch.float32") {
    return torch::kFloat;
  }
  if (name == "torch.int64") {
    return torch::kLong;
  }
  throw std::runtime_error("unexpected dtype " + name);
}

// The description tensorclass_interop.py's describe_state_dict writes.
Json describe(const StateDict& sd) {
  Json out = {
      {"keys", Json::array()},
      {"tensors", Json::object()},
      {"nested", Json::object()},
      {"metadata", Json::array()}};
  for (const auto& [key, entry] : sd.items()) {
    out["keys"].push_back(key);
    if (entry.kind() == StateDict::Kind::kNested) {
      out["nested"][key] = describe(entry.nested());
      continue;
    }
    const at::Tensor t = entry.tensor().contiguous();
    Json values = Json::array();
    const at::Tensor flat = t.flatten().to(torch::kDouble);
    for (int64_t i = 0; i < flat.numel(); ++i) {
      values.push_back(flat[i].item<double>());
    }
    out["tensors"][key] = {
        {"dtype", dtype_name(t.scalar_type())},
        {"shape", t.sizes().vec()},
        {"values", values}};
  }
  for (const auto& [prefix, md] : sd.metadata()) {
    Json entry = {{"batch_size", md.batch_size}, {"device", nullptr}};
    if (md.device) {
      entry["device"] = md.device->str();
    }
    if (!md.type.empty()) {
      entry["_type"] = md.type;
      entry["_non_tensor"] = *md.non_tensor_fields;
    }
    out["metadata"].push_back({prefix, entry});
  }
  return out;
}

// Rebuilds a state dict from Python's description.
StateDict rebuild(const Json& description) {
  StateDict sd;
  for (const auto& [key, spec] : description["tensors"].items()) {
    std::vector<double> values = spec["values"].get<std::vector<double>>();
    sd.insert(
        key,
        torch::tensor(values, torch::kDouble)
            .to(dtype_from_name(spec["dtype"].get<std::string>()))
            .reshape(spec["shape"].get<std::vector<int64_t>>()));
  }
  for (const auto& [key, nested] : description["nested"].items()) {
    sd.insert(key, rebuild(nested));
  }
  for (const auto& item : description["metadata"]) {
    StateDictMetadata md;
    md.batch_size = item[1]["batch_size"].get<std::vector<int64_t>>();
    if (item[1].contains("_type")) {
      md.type = item[1]["_type"].get<std::string>();
      md.non_tensor_fields =
          std::make_shared<const Json>(item[1]["_non_tensor"]);
    }
    sd.set_metadata(item[0].get<std::string>(), md);
  }
  return sd;
}

void check_state_dicts(const std::string& work) {
  const Json python = Json::parse(read_text(work + "/py_state_dict.json"));
  const TcTrajectory traj = python_trajectory();
  for (const char* form : {"flat", "nested"}) {
    const bool flatten = std::string(form) == "flat";
    const Json ours = describe(traj.state_dict(flatten));
    expect(
        ours == python[form],
        std::string(form) + " state dict:\n" + ours.dump() + "\nPython:\n" +
            python[form].dump());
    TcTrajectory target(
        {{"obs", torch::zeros({4, 3})},
         {"action", torch::zeros({4}, torch::kLong)},
         {"inner",
          TcInner({{"x", torch::zeros({4, 2})}, {"tag", "none"}}, {4})},
         {"task", "none"},
         {"note", "to be unset"}},
        {4});
    target.load_state_dict(rebuild(python[form]));
    expect(
        equal(target, traj),
        std::string("loading Python's ") + form + " state dict");
    expect(!target.note().has_value(), "Python's None unsets note");
  }
}

std::vector<double> values_of(const at::Tensor& t) {
  const at::Tensor flat = t.flatten().to(torch::kDouble).contiguous();
  return {flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()};
}

// Each case of py_strict_loads.json on the instance Python loaded into
// (strict_load_target): the same fields after the load, or a KeyError whose
// message starts with Python's (C++ adds why).
void check_strict_loads(const std::string& work) {
  const Json cases = Json::parse(read_text(work + "/py_strict_loads.json"));
  expect(cases.size() == 6, "py_strict_loads.json holds 6 cases");
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    TcTrajectory target(
        {{"obs", torch::zeros({4, 3})},
         {"action", torch::zeros({4}, torch::kLong)},
         {"inner",
          TcInner({{"x", torch::zeros({4, 2})}, {"tag", "none"}}, {4})},
         {"task", "none"}},
        {4});
    if (c["target_mask"].get<bool>()) {
      target.set_mask(torch::zeros({4}, torch::kLong));
    }
    LoadStateDictOptions options;
    options.strict(c["strict"].get<bool>());
    if (!c["from_flatten"].is_null()) {
      options.from_flatten(c["from_flatten"].get<bool>());
    }
    const Json& outcome = c["outcome"];
    try {
      target.load_state_dict(rebuild(c["state_dict"]), options);
    } catch (const KeyError& e) {
      std::string python = outcome.value("KeyError", std::string("(none)"));
      python.pop_back();  // Python ends with "."; C++ goes on after ":"
      expect(
          std::string(e.what_without_backtrace()).rfind(python, 0) == 0,
          name + ": C++ raised KeyError(" + e.what_without_backtrace() +
              "), Python " + outcome.dump());
      continue;
    }
    expect(!outcome.contains("KeyError"), name + ": Python raised, not C++");
    if (outcome.contains("KeyError")) {
      continue;
    }
    expect(
        values_of(target.obs()) == outcome["obs"].get<std::vector<double>>(),
        name + ": obs");
    expect(
        values_of(target.inner().x()) ==
            outcome["inner.x"].get<std::vector<double>>(),
        name + ": inner.x");
    expect(
        target.task() == outcome["task"].get<std::string>(), name + ": task");
    expect(
        outcome["mask"].is_null()
            ? !target.mask().has_value()
            : target.mask().has_value() &&
                  values_of(*target.mask()) ==
                      outcome["mask"].get<std::vector<double>>(),
        name + ": mask");
  }
}

void write_cpp_trees(const std::string& work) {
  TcTrajectory traj(
      {{"obs", torch::tensor({{0.5, 1.5}, {2.5, 3.5}}, torch::kFloat)},
       {"action", torch::tensor({5, 6}, torch::kLong)},
       {"inner",
        TcInner({{"x", torch::zeros({2, 1})}, {"tag", "cpp-tag"}}, {2})},
       {"task", "from C++"},
       {"note", "a note"}},
      {2});
  (void)traj.memmap(MemmapOptions(work + "/cpp_traj"));
  (void)lazy_stack(
      std::vector<TcInner>{
          TcInner({{"x", torch::full({1, 2}, 1.5)}, {"tag", "first"}}, {1}),
          TcInner({{"x", torch::full({1, 5}, 2.5)}, {"tag", "second"}}, {1})})
      .memmap(MemmapOptions(work + "/cpp_lazy"));
  TensorDict holder({{"y", torch::tensor({1, 2})}}, {2});
  holder.set("traj", traj);
  (void)holder.memmap(MemmapOptions(work + "/cpp_td_entry"));
  (void)traj.to_tensordict(/*retain_none=*/true)
      .memmap(MemmapOptions(work + "/cpp_retain_none"));
  TcCounts counts({{"step", 11}, {"ratio", 0.5}, {"done", false}});
  (void)counts.memmap(MemmapOptions(work + "/cpp_counts"));
  // memmap_ of a lazy stack writes what memmap writes.
  auto lazy = lazy_stack(std::vector<TcInner>{
      TcInner({{"x", torch::full({1, 3}, 4.5)}, {"tag", "in place"}}, {1}),
      TcInner({{"x", torch::full({1, 1}, 5.5)}, {"tag", "too"}}, {1})});
  lazy.memmap_(MemmapOptions(work + "/cpp_lazy_inplace"));
  // make_memmap adds the unset mask to a saved instance, in Python's
  // tensorclass layout.
  TcTrajectory made = traj.clone();
  made.memmap_(MemmapOptions(work + "/cpp_made"));
  made.make_memmap("mask", {2}, torch::kLong).copy_(torch::tensor({7, 8}));
  // The field order Python's dataclasses.fields gives.
  std::ofstream(work + "/cpp_fields.json") << Json{
      {"TcTrajectory", TcTrajectory::fields()},
      {"TcInner", TcInner::fields()},
      {"TcCounts", TcCounts::fields()}}.dump();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tensorclass_interop WORK_DIR\n";
    return 2;
  }
  const std::string work = argv[1];
  try {
    check_python_trees(work);
    check_state_dicts(work);
    check_strict_loads(work);
    write_cpp_trees(work);
  } catch (const std::exception& e) {
    std::cerr << "C++ side threw: " << e.what() << "\n";
    return 1;
  }
  std::cout << "C++ side: " << (failures == 0 ? "ok" : "FAILED") << "\n";
  return failures == 0 ? 0 : 1;
}
