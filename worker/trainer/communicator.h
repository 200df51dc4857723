#pragma once

// Collective communication between the ranks of one training job, behind a small
// interface so the trainer runs the same code single-process, over Gloo (CPU) and later
// over NCCL, and so gradient bucketing/overlap can be layered on top.
//
// Contract for every collective: all ranks call it in the same order with tensors of the
// same shape and dtype; it blocks until this rank's part is complete. Implementations are
// used by one thread at a time.

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace baton::trainer {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Replaces `tensor` (dense, contiguous, CPU) in place with its elementwise sum over all
  // ranks. UNAVAILABLE if a peer is gone or the collective timed out.
  virtual absl::Status AllReduceSum(at::Tensor& tensor) = 0;

  // Replaces `tensor` on every rank with rank `root`'s value. Errors as AllReduceSum;
  // INVALID_ARGUMENT if root is not a rank.
  virtual absl::Status Broadcast(at::Tensor& tensor, int root) = 0;
};

// World of one: collectives are identities.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(at::Tensor& tensor) override;
  absl::Status Broadcast(at::Tensor& tensor, int root) override;
};

// Replaces each parameter's gradient with the mean over ranks: all gradients are copied
// into one flat buffer, summed with a single AllReduceSum, divided by the world size and
// copied back. A parameter without a gradient contributes zeros (and gets a zero gradient),
// so every rank's buffer has the same layout. No-op for a world of one.
absl::Status AverageGradients(const std::vector<at::Tensor>& parameters, Communicator& comm);

// Overwrites `parameters` (in place, without recording autograd history) with rank
// `root`'s values, in one flat Broadcast.
absl::Status BroadcastParameters(const std::vector<at::Tensor>& parameters, int root,
                                 Communicator& comm);

}  // namespace baton::trainer
