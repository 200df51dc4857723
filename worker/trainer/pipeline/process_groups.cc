#include "worker/trainer/pipeline/process_groups.h"

#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace baton::trainer::pipeline {

absl::StatusOr<PipelineGroups> CreatePipelineGroups(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world, int stages,
                                                    const GroupFactory& make) {
  if (stages < 1 || world < 1 || world % stages != 0 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of ", world,
                                                   " cannot form pipelines of ", stages,
                                                   " stages (the world must be a multiple)"));
  }
  const int replicas = world / stages;
  PipelineGroups groups;
  groups.stage = rank % stages;
  groups.replica = rank / stages;
  try {
    auto pp =
        c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("pipeline/pp", groups.replica), store);
    ASSIGN_OR_RETURN(groups.pipeline, make(pp, groups.stage, stages));
    if (replicas > 1) {
      auto dp =
          c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("pipeline/dp", groups.stage), store);
      ASSIGN_OR_RETURN(groups.data_parallel, make(dp, groups.replica, replicas));
    }
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat("pipeline groups of rank ", rank, ": ",
                                               message.substr(0, message.find('\n'))));
  }
  return groups;
}

}  // namespace baton::trainer::pipeline
