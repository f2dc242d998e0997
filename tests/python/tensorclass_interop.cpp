// The C++ side of tensorclass_interop.py: loads the tensorclasses Python
// saved as registered C++ structs, checks every field and the repr against
// Python's, then saves structs for Python to load. Prints each failed check
// and exits 1.

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

TENSORDICT_PYTHON_CLASS(TcInner, "<class 'tensorclass_interop_classes.TcInner'>");
TENSORDICT_PYTHON_CLASS(
    TcTrajectory,
    "<class 'tensorclass_interop_classes.TcTrajectory'>");
TENSORDICT_PYTHON_CLASS(TcCounts, "<class 'tensorclass_interop_classes.TcCounts'>");

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

void check_python_trees(const std::string& work) {
  TcTrajectory traj = TcTrajectory::load_memmap(work + "/py_traj");
  expect(traj.batch_size() == c10::IntArrayRef({4}), "py_traj batch size");
  expect(
      torch::equal(traj.obs(), torch::arange(12, torch::kFloat).reshape({4, 3})),
      "py_traj.obs");
  expect(torch::equal(traj.action(), torch::arange(4) * 2), "py_traj.action");
  expect(torch::equal(traj.inner().x(), torch::full({4, 2}, 3.0)), "py_traj.inner.x");
  expect(traj.inner().tag() == "grip", "py_traj.inner.tag");
  expect(traj.task() == "reach", "py_traj.task");
  expect(!traj.note().has_value(), "py_traj.note is None");
  expect(!traj.mask().has_value(), "py_traj.mask is None");
  // The repr of the same struct built in C++ as Python built it (a loaded
  // tree prints MemoryMappedTensor in Python).
  TcTrajectory same(
      {{"obs", torch::arange(12, torch::kFloat).reshape({4, 3})},
       {"action", torch::arange(4) * 2},
       {"inner", TcInner({{"x", torch::full({4, 2}, 3.0)}, {"tag", "grip"}}, {4})},
       {"task", "reach"}},
      {4});
  const std::string py_repr = read_text(work + "/py_traj_repr.txt");
  expect(same.repr() == py_repr, "py_traj repr:\n" + same.repr() + "\nPython:\n" + py_repr);

  TcCounts counts = TcCounts::load_memmap(work + "/py_counts");
  expect(counts.step() == 7, "py_counts.step");
  expect(counts.ratio() == 0.25, "py_counts.ratio");
  expect(counts.done(), "py_counts.done");
  const TcCounts same_counts({{"step", 7}, {"ratio", 0.25}, {"done", true}});
  const std::string counts_repr = read_text(work + "/py_counts_repr.txt");
  expect(
      same_counts.repr() == counts_repr,
      "py_counts repr:\n" + same_counts.repr() + "\nPython:\n" + counts_repr);
}

void write_cpp_trees(const std::string& work) {
  TcTrajectory traj(
      {{"obs", torch::tensor({{0.5, 1.5}, {2.5, 3.5}}, torch::kFloat)},
       {"action", torch::tensor({5, 6}, torch::kLong)},
       {"inner", TcInner({{"x", torch::zeros({2, 1})}, {"tag", "cpp-tag"}}, {2})},
       {"task", "from C++"},
       {"note", "a note"}},
      {2});
  (void)traj.memmap(MemmapOptions(work + "/cpp_traj"));
  TcCounts counts({{"step", 11}, {"ratio", 0.5}, {"done", false}});
  (void)counts.memmap(MemmapOptions(work + "/cpp_counts"));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tensorclass_interop WORK_DIR\n";
    return 2;
  }
  const std::string work = argv[1];
  try {
    check_python_trees(work);
    write_cpp_trees(work);
  } catch (const std::exception& e) {
    std::cerr << "C++ side threw: " << e.what() << "\n";
    return 1;
  }
  std::cout << "C++ side: " << (failures == 0 ? "ok" : "FAILED") << "\n";
  return failures == 0 ? 0 : 1;
}
