#pragma once

// Collective communication between the ranks of one training job, behind a small
// interface so the trainer runs the same code single-process, over Gloo (CPU tensors) and
// over NCCL (CUDA tensors), and so gradient bucketing/overlap (step/gradient_reducer.h) is
// layered on top without knowing the backend.
//
// Contract for every collective: all ranks issue the same collectives in the same order
// with tensors of the same shape and dtype, on device(). Threading: calls on one
// Communicator are never concurrent. The training thread issues them, except that during
// backward() the GradientReducer starts all-reduces from LibTorch's autograd thread while
// the training thread is blocked inside backward().

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::trainer {

// A collective in flight (async work). Destroying it without Wait() is allowed (the
// collective still completes, its result is then unspecified to this rank).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;

  // Blocks until this rank's part is complete and the result may be read: on the host for
  // CPU tensors; for CUDA tensors, work queued afterwards on the current CUDA stream is
  // ordered after the collective (the host may return earlier). UNAVAILABLE if the
  // collective failed or timed out (a peer exited or hung). Call at most once.
  virtual absl::Status Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Where collective tensors live: CPU (local, Gloo) or this rank's GPU (NCCL).
  virtual c10::Device device() const = 0;
  // "local", "gloo" or "nccl", for logs.
  virtual std::string backend() const = 0;
  // Whether sums of this dtype are supported (LibTorch 1.13's Gloo has no bfloat16).
  virtual bool CanReduce(c10::ScalarType dtype) const = 0;

  // Starts replacing `tensor` (dense, contiguous, on device()) with its elementwise sum
  // over all ranks and returns without waiting. The tensor must not be touched until the
  // returned collective's Wait() returned. UNAVAILABLE if the collective could not be
  // started (a peer is gone); INVALID_ARGUMENT for a tensor the backend cannot reduce.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(
      at::Tensor tensor) = 0;

  // Replaces `tensor` on every rank with rank `root`'s value (blocking). Errors as
  // StartAllReduceSum + Wait; INVALID_ARGUMENT if root is not a rank.
  virtual absl::Status Broadcast(at::Tensor& tensor, int root) = 0;

  // StartAllReduceSum + Wait; for CUDA tensors the host is not blocked (see Wait()).
  absl::Status AllReduceSum(at::Tensor& tensor);
};

// World of one: collectives are identities, on `device` (CPU unless given).
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(c10::Device device = c10::Device(c10::kCPU)) : device_(device) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  c10::Device device() const override { return device_; }
  std::string backend() const override { return "local"; }
  bool CanReduce(c10::ScalarType /*dtype*/) const override { return true; }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(
      at::Tensor tensor) override;
  absl::Status Broadcast(at::Tensor& tensor, int root) override;

 private:
  c10::Device device_;
};

// Replaces each parameter's gradient with the mean over ranks with one blocking flat
// all-reduce per dtype (the simple reference for GradientReducer). A parameter without a
// gradient contributes zeros (and gets a zero gradient), so every rank's buffer has the
// same layout. No-op for a world of one.
absl::Status AverageGradients(const std::vector<at::Tensor>& parameters, Communicator& comm);

// Overwrites `tensors` (parameters and buffers, on comm.device(); in place, without
// recording autograd history) with rank `root`'s values: one flat Broadcast per dtype.
absl::Status BroadcastParameters(const std::vector<at::Tensor>& tensors, int root,
                                 Communicator& comm);

}  // namespace baton::trainer
