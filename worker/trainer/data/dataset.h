#pragma once

// The dataset interface of the native trainer and the factory that opens one from the
// TrainerSpec's data fields.
//
// A Dataset is an indexable, immutable collection of samples [0, size()). Get() builds a
// whole batch; it is thread-safe (the Loader calls it from several threads at once) and a
// pure function of (indices, augment_seed): the data order comes from the
// DistributedSampler and random augmentation from the seed, never from thread timing.
//
// Batch layout by kind (DatasetInfo::language_model):
//   classification: input float32 [B, C, H, W] (normalised), target int64 [B] in
//                   [0, num_classes).
//   language model: input int64 [B, T] token ids, target int64 [B, T] = input shifted by
//                   one (target[b][t] is the token after input[b][t]).
// Tensors are freshly allocated, contiguous and on the CPU.
//
// Datasets (DataOptions::dataset):
//   "mnist"        <data_dir>/train-{images-idx3,labels-idx1}-ubyte, test split from the
//                  optional t10k-* pair. Input [1, rows, cols], x/255 normalised with
//                  MNIST's mean 0.1307 and std 0.3081. 10 classes.
//   "cifar10"      <data_dir>/data_batch_1.bin .. data_batch_5.bin (all five required),
//                  test split from test_batch.bin; <data_dir>/cifar-10-batches-bin/ is
//                  used when data_dir itself holds no batches. Records are 1 label byte +
//                  3072 bytes (R, G, B planes of 32x32). Input [3, 32, 32] normalised with
//                  mean (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616). Train
//                  augmentation (when DataOptions::augment): random crop from the image
//                  zero-padded by 4 pixels, then horizontal flip with p = 0.5.
//   "image_folder" <data_dir>/<class>/*.{jpg,jpeg,png} (extension case-insensitive;
//                  other files are ignored), classes sorted by name, files by name, as
//                  torchvision's ImageFolder. If <data_dir>/train/ exists the layout is
//                  split: train = <data_dir>/train/<class>/..., test = <data_dir>/val/
//                  <class>/... (optional; same class names); otherwise the whole folder is
//                  the train split and there is no test split. Decoded with stb_image
//                  (forced to RGB) at Get() time. Input [3, S, S], S = image_size.
//                  Train (augment): RandomResizedCrop(S, scale 0.08..1, ratio 3/4..4/3,
//                  torchvision's sampling) + horizontal flip p = 0.5. Test (or augment =
//                  false): resize the shorter side to round(S * 256 / 224), centre-crop S.
//                  Resampling is antialiased bilinear (PIL's). Normalised with ImageNet
//                  mean (0.485, 0.456, 0.406), std (0.229, 0.224, 0.225).
//   "tokens"       <data_dir>/train.bin (test split: optional val.bin): little-endian
//                  uint16 token ids, memory-mapped. With T = context_length, sample i is
//                  tokens [i*T, i*T + T] (T + 1 tokens): input = the first T, target = the
//                  last T; size() = (tokens - 1) / T. Every id must be < vocab_size
//                  (checked once when opened).
//   "synthetic"    No files (data_dir must be empty). Learnable and a pure function of
//                  (seed, split, index). Images (default): [3, S, S], S = image_size
//                  (default 32 here), label = a hash of the index mod num_classes, pixels =
//                  the class's smooth random prototype + N(0, 1) noise. Tokens
//                  (synthetic_tokens): arithmetic sequences (start + t * stride) mod
//                  min(vocab_size, 256), start and stride drawn per sample. The train split
//                  has synthetic_samples samples, the test split synthetic_samples / 8
//                  (at least 1), from another stream of the same seed.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/spec/trainer_spec_defaults.h"

namespace baton::trainer {

// One batch of samples; see the layout above.
struct Batch {
  at::Tensor input;
  at::Tensor target;
};

// What a model needs to know about the data.
struct DatasetInfo {
  std::string name;                  // The DataOptions::dataset that opened it.
  bool language_model = false;       // Token sequences (true) or classification (false).
  int64_t num_classes = 0;           // Classification: labels are in [0, num_classes).
  std::vector<int64_t> input_shape;  // One sample: {C, H, W} images, {T} tokens.
  int64_t vocab_size = 0;            // Language model: every token id is < vocab_size.
};

enum class Split { kTrain, kTest };

// The data fields of TrainerSpec (proto/baton/v1/job.proto). A numeric field <= 0 means
// its default (the value shown, except image_size).
// The data fields of TrainerSpec; defaults and allowed values:
// common/spec/trainer_spec_defaults.h. A numeric field <= 0 means the table's default.
struct DataOptions {
  std::string dataset;  // "mnist", "cifar10", "image_folder", "tokens" or "synthetic".
  std::string data_dir;
  // 0: the dataset's default, kImageFolderImageSize or kSyntheticImageSize (synthetic).
  int64_t image_size = trainer_spec::kImageSize.default_value;
  int64_t context_length = trainer_spec::kContextLength.default_value;
  int64_t synthetic_samples = trainer_spec::kSyntheticSamples.default_value;
  // synthetic only; the others know their classes.
  int64_t num_classes = trainer_spec::kNumClasses.default_value;
  int64_t vocab_size = trainer_spec::kVocabSize.default_value;
  // synthetic: generate token sequences (set it when the model is a language model:
  // model "gpt", or "torchscript" with task "language_model").
  bool synthetic_tokens = false;
  // Random train-split augmentation of cifar10 and image_folder (see above); when false
  // the train split is transformed like the test split.
  bool augment = true;
  uint64_t seed = trainer_spec::kSeed.default_value;  // synthetic content.
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual const DatasetInfo& info() const = 0;

  // The samples at `indices` (each in [0, size()), duplicates allowed), in that order, as
  // one batch; sample j is augmented with a generator derived from (augment_seed, j), so
  // the batch is a pure function of the arguments. Thread-safe.
  // Errors: OUT_OF_RANGE for a bad index or an empty `indices`, DATA_LOSS when a file
  // turns out unreadable or corrupt (image_folder decodes at this point), naming the file.
  virtual absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices,
                                    uint64_t augment_seed) const = 0;
};

// Opens `split` of the dataset `options` describe, reading and checking its files (the
// token files' ids, image files' presence; images are decoded lazily by Get()).
// Returns nullptr (OK) for Split::kTest when the dataset has no test split.
// Errors: INVALID_ARGUMENT naming the DataOptions field (unknown dataset, data_dir given
// for synthetic, token id >= vocab_size, ...), NOT_FOUND naming a missing file or
// directory, DATA_LOSS naming a corrupt/truncated file, FAILED_PRECONDITION for an
// unreadable file or an incomplete layout (e.g. only one of the t10k files).
absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const DataOptions& options, Split split);

}  // namespace baton::trainer
