#include "worker/trainer/comm/gloo_communicator.h"

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/trainer/comm/c10d_communicator.h"
#include "worker/trainer/device/compat.h"

namespace baton::trainer {

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const GlooOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in world of ", world_size));
  }
  try {
    auto group_options = c10d::ProcessGroupGloo::Options::create(
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options.collective_timeout)));
    if (!options.interface.empty()) {
      group_options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForInterface(options.interface));
    } else if (!options.hostname.empty()) {
      group_options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(options.hostname));
    } else {
      group_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, group_options);
    // ProcessGroupGloo's constructor returns once this rank's own connections are up, not
    // its peers': a rank that went on and destroyed its group at once (a refused setting, a
    // world of which it only checks the size) would fail a peer still connecting with
    // "Connection closed by peer". A barrier makes returning mean every rank is connected.
    group->barrier()->wait();
    return std::unique_ptr<Communicator>(new C10dCommunicator<c10d::ProcessGroupGloo>(
        std::move(group), c10::Device(c10::kCPU), "gloo", &compat::GlooReduces,
        C10dShardedCollectives::kEmulated));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("connecting Gloo peers (rank ", rank, " of ",
                                               world_size, "): ",
                                               C10dPending::FirstLine(e.what())));
  }
}

}  // namespace baton::trainer
