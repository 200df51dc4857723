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

  // As StartAllReduceSum, but `tensor` becomes the elementwise mean over the ranks, bit for
  // bit what at::div_out(sum, sum, MeanDivisor(world_size())) makes of the sum (the
  // gradient average). Floating-point dtypes only, else INVALID_ARGUMENT. This default
  // divides in Wait(), after the sum; a backend may divide in its own last pass over the
  // data instead (shm does, on its communication thread: one memory pass fewer for the
  // rank that waits).
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceMean(at::Tensor tensor);

  // Replaces `tensor` on every rank with rank `root`'s value (blocking). Errors as
  // StartAllReduceSum + Wait; INVALID_ARGUMENT if root is not a rank.
  virtual absl::Status Broadcast(at::Tensor& tensor, int root) = 0;

  // Reduce-scatter (ZeRO-2's gradient sharding). `input` is a flat buffer of world_size() equal
  // chunks: input.numel() == world_size() * output.numel(), chunk r being elements [r *
  // output.numel(), (r + 1) * output.numel()). Starts writing into `output` (this rank's chunk:
  // output == sum over ranks of their input's chunk rank()) and returns without waiting. Both
  // tensors dense, contiguous, on device(), of one dtype that CanReduce(); they must not overlap
  // and must not be touched until Wait() returned. Afterwards `input`'s contents are unspecified
  // (backends may reduce in it); `output` is the only result. Every rank's output for its chunk is
  // the same sum a StartAllReduceSum of the inputs would produce up to the order of additions (per
  // backend: see the backends' headers). INVALID_ARGUMENT for sizes, dtypes, devices or layouts
  // that do not fit (checked before anything is sent, so every rank fails alike when all pass the
  // same shapes); UNAVAILABLE as StartAllReduceSum.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) = 0;

  // All-gather (ZeRO's re-assembly of updated parameter shards). output.numel() == world_size() *
  // input.numel(); after Wait(), chunk r of `output` (elements [r * input.numel(), (r + 1) *
  // input.numel())) holds rank r's `input`, bit for bit. Any dtype of 1, 2, 4 or 8 bytes per
  // element (a copy, no arithmetic: CanReduce does not apply), except where a backend says
  // otherwise. Tensors and errors as StartReduceScatterSum; `input` is left unchanged.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                            at::Tensor output) = 0;

  // ---- Point to point (pipeline parallelism: activations and their gradients) ----------
  //
  // Unlike the collectives above, only the two ranks of a transfer take part. Contract:
  // - The k-th StartSend from rank a to rank b matches the k-th StartRecv on b from a (FIFO
  //   per ordered pair; transfers between other pairs, or in the other direction, are
  //   independent of it). Both sides pass tensors of the same dtype and number of elements
  //   (a backend may check the byte count and fail the Recv with INVALID_ARGUMENT; none
  //   checks the shape), dense, contiguous, on device(). The bytes arrive bit for bit.
  // - Starting never waits for the peer. A Send's Wait() may block until the peer started
  //   the matching Recv (Gloo and NCCL do; shm returns once the bytes are in its buffer), so
  //   a rank must start its sends before it waits on receives that depend on its peer having
  //   received them: start every transfer first, then wait (pipeline/executor.h does).
  // - The tensor must not be touched until Wait() returned (a Recv's result is valid then).
  // - INVALID_ARGUMENT (at once, nothing sent) for a peer that is not a rank or is this
  //   rank, and for a tensor that does not fit; UNAVAILABLE from Start* or Wait() when the
  //   peer is gone (exited, destroyed its communicator) or the transfer timed out
  //   (collective_timeout); UNIMPLEMENTED where a backend cannot reach that peer.
  // Threading: as the collectives (the training thread; never concurrent calls), and
  // independent of collectives in flight.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor,
                                                                       int dst) = 0;
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor,
                                                                       int src) = 0;

  // StartSend + Wait, StartRecv + Wait (blocking; mind the ordering rule above).
  absl::Status Send(at::Tensor tensor, int dst);
  absl::Status Recv(at::Tensor tensor, int src);

  // StartAllReduceSum + Wait, StartAllReduceMean + Wait; for CUDA tensors the host is not
  // blocked (see Wait()).
  absl::Status AllReduceSum(at::Tensor& tensor);
  absl::Status AllReduceMean(at::Tensor& tensor);
  // StartReduceScatterSum + Wait, StartAllGather + Wait (same host-blocking caveat).
  absl::Status ReduceScatterSum(at::Tensor input, at::Tensor output);
  absl::Status AllGather(at::Tensor input, at::Tensor output);
};

// What a mean over `world` ranks divides the sum by: a 0-dim double tensor, so the division
// runs in the summed tensor's own dtype.
at::Tensor MeanDivisor(int world);

// For backends: INVALID_ARGUMENT unless `tensor` can be averaged (StartAllReduceMean: a
// floating-point dtype).
absl::Status CheckMeanDtype(const at::Tensor& tensor);

// For backends: a dtype of `element_size` bytes (1, 2, 4 or 8) that every CPU backend moves,
// Gloo included (byte, half, int, long), so that any dtype's elements can be moved bit for bit
// as it (tensor.view(type)).
c10::ScalarType CopyTypeOfSize(int64_t element_size);

// For backends: INVALID_ARGUMENT unless `input` and `output` fit a reduce-scatter
// (reduce_scatter = true) or an all-gather on `comm` as the contracts above say: same dtype,
// dense and contiguous, on comm.device(), not overlapping, the sizes; for a reduce-scatter
// comm.CanReduce(dtype), for an all-gather 1, 2, 4 or 8 bytes per element.
absl::Status CheckShardedCollective(const Communicator& comm, const at::Tensor& input,
                                    const at::Tensor& output, bool reduce_scatter);

// For backends: INVALID_ARGUMENT unless `peer` is another rank of `comm` and `tensor` is
// defined, dense, contiguous and on comm.device(). `what` ("send", "recv") names the call.
absl::Status CheckPointToPoint(const Communicator& comm, const at::Tensor& tensor, int peer,
                               const char* what);

// World of one: collectives are identities, on `device` (CPU unless given).
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(c10::Device device = c10::Device(c10::kCPU)) : device_(device) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  c10::Device device() const override { return device_; }
  std::string backend() const override { return "local"; }
  bool CanReduce(c10::ScalarType /*dtype*/) const override { return true; }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(at::Tensor tensor) override;
  absl::Status Broadcast(at::Tensor& tensor, int root) override;
  // Both copy input into output (a world of one); the usual checks apply.
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                    at::Tensor output) override;
  // INVALID_ARGUMENT: a world of one has no peer.
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor,
                                                               int dst) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor,
                                                               int src) override;

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
