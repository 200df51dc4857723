// make_mnist: writes a small, learnable dataset in the real MNIST IDX format.
//
//   make_mnist --out_dir=data/mnist [--train_size=6000] [--test_size=1000] [--seed=1]
//
// Produces train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte (28x28 uint8, byte-compatible with MNIST). The output depends only
// on the flags. See worker/trainer/data/synthetic_mnist.h for what the images look like.
// Exit status: 0 on success, 2 on bad flags, 1 on I/O errors.

#include <cstdint>
#include <iostream>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "worker/trainer/data/synthetic_mnist.h"

ABSL_FLAG(std::string, out_dir, "", "Directory to write the four IDX files into (created).");
ABSL_FLAG(int64_t, train_size, 6000, "Number of training samples.");
ABSL_FLAG(int64_t, test_size, 1000, "Number of test (t10k) samples.");
ABSL_FLAG(uint64_t, seed, 1, "Seed; the same seed gives byte-identical files.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Writes a synthetic, learnable MNIST-format dataset.");
  absl::ParseCommandLine(argc, argv);
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  const int64_t train_size = absl::GetFlag(FLAGS_train_size);
  const int64_t test_size = absl::GetFlag(FLAGS_test_size);
  constexpr int64_t kMaxSize = std::numeric_limits<uint32_t>::max();
  if (out_dir.empty()) {
    std::cerr << "make_mnist: --out_dir is required\n";
    return 2;
  }
  if (train_size <= 0 || train_size > kMaxSize || test_size < 0 || test_size > kMaxSize) {
    std::cerr << "make_mnist: --train_size must be > 0 and --test_size >= 0\n";
    return 2;
  }
  const absl::Status status = baton::trainer::WriteSyntheticMnistDir(
      out_dir, static_cast<uint32_t>(train_size), static_cast<uint32_t>(test_size),
      absl::GetFlag(FLAGS_seed));
  if (!status.ok()) {
    std::cerr << "make_mnist: " << status << "\n";
    return 1;
  }
  std::cout << "wrote " << train_size << " train and " << test_size << " test samples to "
            << out_dir << "\n";
  return 0;
}
