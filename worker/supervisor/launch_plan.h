#pragma once

// A rank's launch as a plan (pure): what to run, with which environment, where, and which
// directories must exist first. The Supervisor makes the directories and files, adds the
// confinement (which resolves paths on disk) and spawns; this decides nothing by I/O.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "worker/process/process_launcher.h"

namespace baton::worker {

struct LaunchPlanOptions {
  std::string work_dir;      // The worker's (absolute).
  std::string trainer_path;  // baton-trainer.
  std::vector<std::string> base_env;  // The worker's variables a rank may see (rank_env.h).
};

struct RankLaunchPlan {
  // argv, env, working_dir and builtin_trainer; no isolation yet.
  LaunchRequest request;
  // <work_dir>/jobs/<job>/gen-<generation>/rank-<rank>: the logs, and the working directory
  // unless a command sets its own.
  std::string rank_dir;
  // Made (0700) before the launch, or the launch fails: the rank directory, and for the
  // built-in trainer its profile directory.
  std::vector<std::string> required_dirs;
  // Made if possible (the trainer reports a checkpoint directory it cannot use): the
  // default checkpoint directory <work_dir>/jobs/<job>/ckpt of a trainer job without one.
  std::vector<std::string> best_effort_dirs;
  // Names spec.env may not set (rank_env.h), left out of the environment.
  std::vector<std::string> ignored_env;
};

// The plan for `rank` of `request` with the GPUs `devices` (CUDA_VISIBLE_DEVICES).
// INVALID_ARGUMENT for a spec with neither trainer nor command, or an empty command.
absl::StatusOr<RankLaunchPlan> PlanRankLaunch(const baton::v1::StartAssignment& request,
                                              const baton::v1::RankInfo& rank,
                                              const std::vector<std::string>& devices,
                                              const LaunchPlanOptions& options);

}  // namespace baton::worker
