#pragma once

// A communicator over some ranks of another (the world's), for the groups of a pipeline-
// parallel run when no store is at hand to build real sub-communicators (process_groups.h
// builds those). Group rank g is world rank members[g].
//
// Point to point is the world's, with the ranks mapped, so transfers keep the world's FIFO
// contract per ordered pair. The collectives the pipeline needs are built from it:
// AllReduceSum gathers to group rank 0, which adds the tensors in group-rank order and
// sends the sum back (2 (n - 1) transfers: meant for small groups and for parameters that
// fit in memory twice; every member gets the same bits); Broadcast sends from the root to
// each member. Reduce-scatter and all-gather: UNIMPLEMENTED.
//
// Two subgroups of one world must not share an ordered pair of world ranks while both have
// transfers in flight (their messages would interleave); the groups of a pipeline run never
// do: a pipeline's stages and a stage's replicas share no pair.
//
// Threading: as Communicator (the training thread). `world` must outlive it.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer::pipeline {

class SubgroupCommunicator final : public Communicator {
 public:
  // INVALID_ARGUMENT unless `members` are distinct ranks of `world` and include world's rank.
  static absl::StatusOr<std::unique_ptr<SubgroupCommunicator>> Create(Communicator& world,
                                                                      std::vector<int> members);

  int rank() const override { return rank_; }
  int world_size() const override { return static_cast<int>(members_.size()); }
  c10::Device device() const override { return world_.device(); }
  std::string backend() const override { return world_.backend(); }
  bool CanReduce(c10::ScalarType dtype) const override;
  // Blocking (the returned collective is complete).
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(at::Tensor tensor) override;
  absl::Status Broadcast(at::Tensor& tensor, int root) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                    at::Tensor output) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor, int dst) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor, int src) override;

 private:
  SubgroupCommunicator(Communicator& world, std::vector<int> members, int rank)
      : world_(world), members_(std::move(members)), rank_(rank) {}

  Communicator& world_;
  const std::vector<int> members_;
  const int rank_;
};

}  // namespace baton::trainer::pipeline
