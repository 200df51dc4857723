#pragma once

// The bytes of an in-memory snapshot of the training state (snapshot_store.h keeps them).
// A snapshot holds exactly what a step checkpoint holds (checkpoint/checkpoint_codec.h:
// progress, parameters and buffers, optimizer state, RNG states) and decodes to the same
// DecodedCheckpoint, which ApplyCheckpoint applies; only the layout differs, made for a copy
// at every step rather than for torch.load: a text header naming each part, then each
// tensor's raw bytes, 64-byte aligned.
//
//   "BSNAP001" | u64 header bytes (host order) | header text | padding | tensor bytes
//   header lines:  progress <step> <epoch> <batch_in_epoch> <samples_seen> <world_size>
//                           <scaler_scale, %a> <scaler_growth_tracker>
//                  optimizer <type> <params>
//                  t <part> <key> <sub> <dtype> <ndim> <dims...> <offset>
//   parts: model (key = name), opt (key = parameter index, sub = state name), rng_cpu,
//   rng_cuda (key = device), rng_extra; "-" where a field does not apply.
//
// A snapshot never leaves its host (the transfer to another rank is a byte copy), so
// integers are in host order. Decoding trusts nothing: every offset and size is checked
// against the bytes, so a torn or hostile buffer is DATA_LOSS, never a crash.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/checkpoint/training_state.h"
#include "worker/trainer/device/host_staging.h"

namespace baton::trainer {

// One snapshot of a TrainingState, ready to be copied: the header is built and the RNG
// states captured when it is planned; the tensors are read by WriteTo. Plan and WriteTo at
// the same step boundary, with the live tensors held still in between.
class SnapshotImage {
 public:
  // INVALID_ARGUMENT as EncodeTrainingState (negative step, empty, duplicate or undefined
  // tensors, an optimizer other than SGD and AdamW), and for a tensor name with whitespace.
  // With `staging` (a GPU rank's; it must outlive the image's WriteTo), each device tensor's
  // copy to pinned host memory is queued now on a side stream (host_staging.h), so that it
  // overlaps the next step's compute; WriteTo waits for the copies first.
  static absl::StatusOr<SnapshotImage> Plan(const TrainingState& state,
                                            HostStaging* staging = nullptr);

  // Bytes WriteTo writes.
  size_t size() const { return size_; }
  int64_t step() const { return step_; }

  // Writes the snapshot into dst[0, size()): the header, then every tensor's bytes (staged
  // tensors once their copies landed; a CUDA tensor planned without staging is copied to
  // the host here, synchronously).
  void WriteTo(char* dst) const;

 private:
  struct Part {
    at::Tensor tensor;
    size_t offset = 0;
    size_t bytes = 0;
  };
  SnapshotImage() = default;

  int64_t step_ = 0;
  HostStaging* staging_ = nullptr;  // Waited for by WriteTo when set.
  std::string header_;              // Magic, length and text, unpadded.
  std::vector<Part> parts_;
  size_t size_ = 0;
};

// Decodes a snapshot's bytes into new tensors (nothing aliases `bytes`). DATA_LOSS naming
// what is wrong for anything that is not a whole snapshot of this format.
absl::StatusOr<DecodedCheckpoint> DecodeSnapshot(absl::string_view bytes);

}  // namespace baton::trainer
