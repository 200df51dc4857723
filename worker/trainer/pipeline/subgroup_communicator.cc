#include "worker/trainer/pipeline/subgroup_communicator.h"

#include <ATen/ATen.h>

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace baton::trainer::pipeline {
namespace {

class Done final : public PendingCollective {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SubgroupCommunicator>> SubgroupCommunicator::Create(
    Communicator& world, std::vector<int> members) {
  std::set<int> seen;
  int rank = -1;
  for (size_t g = 0; g < members.size(); ++g) {
    const int r = members[g];
    if (r < 0 || r >= world.world_size() || !seen.insert(r).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "subgroup member ", r, " is not a distinct rank of a world of ", world.world_size()));
    }
    if (r == world.rank()) rank = static_cast<int>(g);
  }
  if (rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world rank ", world.rank(), " is not a member of its subgroup"));
  }
  return std::unique_ptr<SubgroupCommunicator>(
      new SubgroupCommunicator(world, std::move(members), rank));
}

bool SubgroupCommunicator::CanReduce(c10::ScalarType dtype) const {
  // Sums are computed here, on the device, from copies moved bit for bit.
  return at::isFloatingType(dtype) || at::isIntegralType(dtype, /*includeBool=*/false);
}

absl::StatusOr<std::unique_ptr<PendingCollective>> SubgroupCommunicator::StartAllReduceSum(
    at::Tensor tensor) {
  if (world_size() > 1) {
    if (rank_ == 0) {
      at::Tensor other = at::empty_like(tensor);
      for (int g = 1; g < world_size(); ++g) {
        RETURN_IF_ERROR(Recv(other, g));
        tensor.add_(other);
      }
      std::vector<std::unique_ptr<PendingCollective>> sends;
      for (int g = 1; g < world_size(); ++g) {
        ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> sent, StartSend(tensor, g));
        sends.push_back(std::move(sent));
      }
      for (auto& sent : sends) RETURN_IF_ERROR(sent->Wait());
    } else {
      RETURN_IF_ERROR(Send(tensor, 0));
      RETURN_IF_ERROR(Recv(tensor, 0));
    }
  }
  return std::unique_ptr<PendingCollective>(new Done());
}

absl::Status SubgroupCommunicator::Broadcast(at::Tensor& tensor, int root) {
  if (root < 0 || root >= world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " is not a rank of a group of ", world_size()));
  }
  if (rank_ != root) return Recv(tensor, root);
  std::vector<std::unique_ptr<PendingCollective>> sends;
  for (int g = 0; g < world_size(); ++g) {
    if (g == root) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> sent, StartSend(tensor, g));
    sends.push_back(std::move(sent));
  }
  for (auto& sent : sends) RETURN_IF_ERROR(sent->Wait());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PendingCollective>> SubgroupCommunicator::StartReduceScatterSum(
    at::Tensor /*input*/, at::Tensor /*output*/) {
  return absl::UnimplementedError("a pipeline subgroup has no reduce-scatter");
}

absl::StatusOr<std::unique_ptr<PendingCollective>> SubgroupCommunicator::StartAllGather(
    at::Tensor /*input*/, at::Tensor /*output*/) {
  return absl::UnimplementedError("a pipeline subgroup has no all-gather");
}

absl::StatusOr<std::unique_ptr<PendingCollective>> SubgroupCommunicator::StartSend(
    at::Tensor tensor, int dst) {
  RETURN_IF_ERROR(CheckPointToPoint(*this, tensor, dst, "send"));
  return world_.StartSend(std::move(tensor), members_[dst]);
}

absl::StatusOr<std::unique_ptr<PendingCollective>> SubgroupCommunicator::StartRecv(
    at::Tensor tensor, int src) {
  RETURN_IF_ERROR(CheckPointToPoint(*this, tensor, src, "recv"));
  return world_.StartRecv(std::move(tensor), members_[src]);
}

}  // namespace baton::trainer::pipeline
