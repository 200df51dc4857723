// Fuzz target: a checkpoint's contents past its CRC (checkpoint_codec.h). A checkpoint directory
// is written by the job's own ranks, so a rank of a job (or whoever can write its checkpoint
// directory) controls the bytes the next generation's trainer decodes; the CRC only catches
// accidents. The input is an unsealed archive (the file without its 20-byte trailer); it is
// sealed here so that every input reaches LibTorch's ZIP reader and unpickler, our decoder of
// the pickled dict, and then ApplyCheckpoint into a small model with an optimizer (whose state
// is a second archive inside the first). Each entry's CRC in the ZIP's central directory is
// recomputed first (FixEntryCrcs): LibTorch's reader checks it, so without that nearly every
// mutation of an entry would stop there.
//
// Input: byte 0 picks the live optimizer (even: SGD with momentum, odd: AdamW), the rest is the
// archive. The seeds (fuzz_corpus/checkpoint_contents/) are checkpoints of that model, one per
// optimizer, written by EncodeTrainingState with the trailer removed.
//
// Invariants: no crash; decoding fails only with DATA_LOSS (or FAILED_PRECONDITION for
// format v1, which is never loaded); applying fails only with FAILED_PRECONDITION (does
// not fit the model) or INTERNAL (failed part-way); applying a checkpoint that fits leaves
// the model's tensors with their shapes and dtypes.
//
// Found: format v1 kept the optimizer state as a torch::serialize archive, which
// ApplyCheckpoint loaded with TorchScript's importer; a mutated one crashed it (SIGSEGV in
// ScriptTypeParser), and a crafted one is TorchScript code. Format v2 keeps that state as
// plain tensors (regression-v1-torchscript-optimizer-archive). Then (a campaign's first
// minute): a 15 KB file whose pickle claims a 2 GiB string made LibTorch's unpickler
// allocate 2 GiB before finding the stream short; pickle_scan.h now refuses it first
// (regression-pickle-length-2gib). Then (1,842 executions in): a ZIP directory pointing past
// the file's end made miniz read past the buffer through LibTorch's memory adapter, which
// copies without a check (a heap overflow under ASan); the file is now read through a
// bounded adapter (regression-zip-directory-past-the-end).

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"
#include "worker/trainer/checkpoint/little_endian.h"
#include "worker/trainer/checkpoint/training_state.h"

namespace {

using baton::trainer::NamedTensors;

uint32_t Load32(const std::vector<char>& b, size_t at) {
  return static_cast<uint32_t>(baton::trainer::LoadLittleEndian({b.data() + at, 4}));
}
uint16_t Load16(const std::vector<char>& b, size_t at) {
  return static_cast<uint16_t>(baton::trainer::LoadLittleEndian({b.data() + at, 2}));
}
void Store32(std::vector<char>& b, size_t at, uint32_t v) {
  baton::trainer::StoreLittleEndian(&b[at], v, 4);
}

// Sets the CRC-32 of every stored entry of `zip` (a ZIP ending in an end-of-central-directory
// record without a comment) in its central directory to that of its data. Entries whose
// offsets or sizes point outside the archive are left as they are.
void FixEntryCrcs(std::vector<char>& zip) {
  constexpr size_t kEocd = 22, kCentral = 46, kLocal = 30;
  if (zip.size() < kEocd || Load32(zip, zip.size() - kEocd) != 0x06054b50) return;
  size_t at = Load32(zip, zip.size() - kEocd + 16);
  const size_t entries = Load16(zip, zip.size() - kEocd + 10);
  for (size_t i = 0; i < entries && at + kCentral <= zip.size(); ++i) {
    if (Load32(zip, at) != 0x02014b50) return;
    const size_t data_size = Load32(zip, at + 20);
    const size_t local = Load32(zip, at + 42);
    if (local + kLocal <= zip.size() && Load32(zip, local) == 0x04034b50) {
      const size_t data = local + kLocal + Load16(zip, local + 26) + Load16(zip, local + 28);
      if (data <= zip.size() && data_size <= zip.size() - data) {
        Store32(zip, at + 16,
                baton::trainer::Crc32(absl::string_view(zip.data() + data, data_size)));
      }
    }
    at += kCentral + Load16(zip, at + 28) + Load16(zip, at + 30) + Load16(zip, at + 32);
  }
}

// The model every input is applied to: two parameters and a buffer.
NamedTensors FreshModel() {
  return {{"layer.weight", torch::zeros({2, 3}).requires_grad_()},
          {"layer.bias", torch::zeros({2}).requires_grad_()},
          {"steps", torch::zeros({1}, torch::kLong)}};
}

}  // namespace

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
// LibTorch 1.13's ZIP reader leaks 152 bytes when it refuses an archive (its constructor
// throws after miniz allocated); that is LibTorch's, bounded by the checkpoint files a
// trainer reads, and would stop every campaign at once. Leaks anywhere else still count.
extern "C" const char* __lsan_default_suppressions() { return "leak:libtorch_cpu.so\n"; }
#endif
#endif

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::trainer;
  if (size < 1) return 0;
  std::vector<char> archive(reinterpret_cast<const char*>(data) + 1,
                            reinterpret_cast<const char*>(data) + size);
  FixEntryCrcs(archive);
  if (!SealArchive(archive).ok()) return 0;  // Not a ZIP ending: the CRC's business.
  const absl::StatusOr<DecodedCheckpoint> decoded = DecodeCheckpoint(archive);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss ||
               decoded.status().code() == absl::StatusCode::kFailedPrecondition);
    return 0;
  }

  NamedTensors tensors = FreshModel();
  std::vector<at::Tensor> params = {tensors[0].second, tensors[1].second};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (data[0] % 2 == 0) {
    optimizer =
        std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  } else {
    optimizer = std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(0.1));
  }
  TrainingState state;
  state.tensors = tensors;
  state.optimizer = optimizer.get();
  const absl::Status applied = ApplyCheckpoint(*decoded, state, /*restore_rng=*/true);
  FUZZ_CHECK(applied.ok() || applied.code() == absl::StatusCode::kFailedPrecondition ||
             applied.code() == absl::StatusCode::kInternal);
  if (applied.ok()) {
    const NamedTensors fresh = FreshModel();
    for (size_t i = 0; i < fresh.size(); ++i) {
      FUZZ_CHECK(state.tensors[i].second.sizes() == fresh[i].second.sizes());
      FUZZ_CHECK(state.tensors[i].second.scalar_type() == fresh[i].second.scalar_type());
    }
  }
  return 0;
}
