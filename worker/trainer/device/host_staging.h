#pragma once

// Copies of device tensors into pinned host memory on a side stream, for the in-memory
// snapshots of a GPU rank (snapshot/snapshot_codec.h): Stage() orders a copy after the work
// queued so far on the current stream of the tensor's device and returns at once, so that
// the copy overlaps the compute queued next (the next step's forward and backward); Wait()
// blocks until every copy staged since the previous Wait() has landed. The host buffers are
// pinned and reused while the shapes repeat: a snapshot per step allocates nothing.
//
// What the caller guarantees: a staged tensor is not written by work queued after Stage()
// until Wait() returned (the trainer clones BatchNorm's buffers before staging them and
// fences the copy before the optimizer's update), and the host tensors of one round are
// read only between its Wait() and the next round's first Stage().
//
// CPU tensors need no staging: Stage() returns them as they are (a LibTorch without CUDA
// only has those). The CUDA part lives in device_cuda.cc, the CPU one in device_cpu.cc.
//
// Threading: Stage() on one thread (the training loop's); Wait() on one thread at a time
// (the snapshot writer's), after the round's Stage() calls returned.

#include <ATen/core/Tensor.h>

#include <memory>

namespace baton::trainer {

class HostStaging {
 public:
  HostStaging();
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // A host tensor that holds `tensor`'s values once Wait() returned: `tensor` itself when it
  // is on the CPU, else a pinned buffer its copy is queued into. LibTorch errors are thrown.
  at::Tensor Stage(const at::Tensor& tensor);

  // Ends the round: returns once all its copies completed (at once if there were none).
  void Wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::trainer
