// The seed's dataset workflow: a dataset of a million 128x128 RGB images
// allocated on disk with memmap_like (sparse files: nothing is written until
// an item is filled), filled and preprocessed in place by TensorDict::map on
// two worker threads, three items read back with one gather per leaf, and
// the processed part served by torch::data::make_data_loader.
// Run: build/bin/dataset [N] [PROCESSED] [DIRECTORY]
//   N items are allocated (default 1000000: 49 GB apparent, almost nothing
//   on disk); the first PROCESSED (default 12000, 49 KB each on disk) are
//   filled and preprocessed. Ctrl-C stops the workers cleanly.

#include <sys/stat.h>
#include <tensordict/data_loader.h>
#include <tensordict/tensordict.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

namespace {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int /*signal*/) {
  interrupted = true;  // lock-free: safe in a signal handler
}

// The bytes a file occupies on disk (its apparent size may be far larger).
int64_t disk_usage(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return -1;
  }
  return static_cast<int64_t>(info.st_blocks) * 512;
}

}  // namespace

int main(int argc, char** argv) {
  using tensordict::MapCancelled;
  using tensordict::MapOptions;
  using tensordict::TensorDict;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int64_t processed =
      std::min<int64_t>(n, argc > 2 ? std::atoll(argv[2]) : 12000);
  const std::string dir =
      argc > 3 ? argv[3]
               : (std::filesystem::temp_directory_path() / "tensordict_dataset")
                     .string();
  if (n < 2 || processed < 1) {
    std::cerr << "usage: dataset [N >= 2] [PROCESSED >= 1] [DIRECTORY]\n";
    return 2;
  }
  std::filesystem::remove_all(dir);

  // --- allocate: one item's layout, expanded, then sparse files on disk -----
  TensorDict data = TensorDict(
                        {{"images", torch::zeros({128, 128, 3}, torch::kUInt8)},
                         {"labels", torch::zeros({}, torch::kLong)}},
                        /*batch_size=*/{})
                        .expand({n})
                        .memmap_like(tensordict::MemmapOptions(dir));
  const std::string images_file = dir + "/images.memmap";
  std::cout << "allocated " << n << " items: images.memmap is "
            << std::filesystem::file_size(images_file) << " bytes, "
            << disk_usage(images_file) << " on disk\n";

  // --- fill and preprocess the first `processed` items in place -------------
  std::signal(SIGINT, on_interrupt);
  const MapOptions options =
      MapOptions().num_workers(2).chunksize(1000).pbar(true).cancel(
          &interrupted);
  data.get("labels").copy_(torch::arange(n));
  TensorDict part = data.narrow(0, 0, processed);
  try {
    // Item i: label i, pixel (h, w, c) = (i + w) % 251.
    part.map(
        [](TensorDict& chunk) {
          const at::Tensor labels = chunk.get("labels").view({-1, 1, 1, 1});
          const at::Tensor w = torch::arange(128).view({1, 1, 128, 1});
          chunk.set_(
              "images",
              ((labels + w) % 251).to(torch::kUInt8).expand({-1, 128, 128, 3}));
        },
        options);
    // The seed's preprocessing: flip the images, cluster the labels.
    part.map(
        [](TensorDict& chunk) {
          chunk.set_("images", chunk.get("images").flip(-2));
          chunk.set_("labels", chunk.get("labels").div(10, "floor"));
        },
        options);
  } catch (const MapCancelled& e) {
    std::cerr << "\ninterrupted: " << e.msg() << "\n";
    return 130;
  }
  std::cout << "processed " << processed << " items: images.memmap uses "
            << disk_usage(images_file) << " bytes on disk\n";

  // --- read three items: one gather per leaf --------------------------------
  const TensorDict items = data.index({torch::tensor(
      {int64_t{1},
       std::min<int64_t>(10000, n - 1),
       std::min<int64_t>(500000, n - 1)})});
  std::cout
      << "labels " << items.get("labels") << "\n"
      << "first pixels of each row 0 "
      << items.get("images").index(
             {torch::indexing::Slice(), 0, torch::indexing::Slice(0, 4), 0})
      << "\n";

  // --- serve the processed part to a libtorch data loader -------------------
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          tensordict::TensorDictDataset(part),
          torch::data::DataLoaderOptions().batch_size(256).workers(2));
  int64_t batches = 0;
  int64_t images = 0;
  for (const TensorDict& batch : *loader) {
    ++batches;
    images += batch.batch_size()[0];
  }
  std::cout << "data loader: " << batches << " batches, " << images
            << " images\n";
  return 0;
}
