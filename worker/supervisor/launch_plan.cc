#include "worker/supervisor/launch_plan.h"

#include "absl/strings/str_cat.h"
#include "worker/supervisor/job_paths.h"
#include "worker/supervisor/rank_env.h"
#include "worker/supervisor/trainer_args.h"

namespace baton::worker {
namespace {

RankEnvInput RankEnvInputFor(const baton::v1::StartAssignment& request,
                             const baton::v1::RankInfo& rank,
                             const std::vector<std::string>& base_env,
                             const std::vector<std::string>& devices) {
  RankEnvInput env;
  env.visible_devices = devices;
  env.base_env = base_env;
  env.job_id = request.job_id();
  env.generation = request.generation();
  env.world_size = request.world_size();
  env.master_addr = request.master_addr();
  env.master_port = request.master_port();
  env.rank = rank;
  env.spec_env.insert(request.spec().env().begin(), request.spec().env().end());
  env.metrics_fd = ProcessLauncher::kMetricsFd;
  if (request.spec().has_command()) env.checkpoint_dir = request.spec().checkpoint_dir();
  return env;
}

}  // namespace

absl::StatusOr<RankLaunchPlan> PlanRankLaunch(const baton::v1::StartAssignment& request,
                                              const baton::v1::RankInfo& rank,
                                              const std::vector<std::string>& devices,
                                              const LaunchPlanOptions& options) {
  RankLaunchPlan plan;
  const std::string job_dir = JobDir(options.work_dir, request.job_id());
  plan.rank_dir = absl::StrCat(job_dir, "/", RankSubdir(request.generation(), rank.rank()));
  plan.required_dirs.push_back(plan.rank_dir);
  LaunchRequest& launch = plan.request;
  launch.working_dir = plan.rank_dir;
  const baton::v1::JobSpec& spec = request.spec();
  if (spec.has_trainer()) {
    std::string checkpoint_dir = spec.checkpoint_dir();
    if (checkpoint_dir.empty()) {
      checkpoint_dir = job_dir + "/ckpt";
      plan.best_effort_dirs.push_back(checkpoint_dir);
    }
    launch.argv = TrainerArgv(options.trainer_path, spec.trainer(), spec.budget(), checkpoint_dir);
    launch.builtin_trainer = true;  // A warm standby may serve it; never a command job.
    // `baton profile` (Supervisor::ProfileDir): the trainer records steps on SIGUSR2.
    const std::string profile_dir = absl::StrCat(plan.rank_dir, "/", kRankProfileSubdir);
    plan.required_dirs.push_back(profile_dir);
    launch.argv.push_back(absl::StrCat("--profile_dir=", profile_dir));
  } else if (spec.has_command()) {
    if (spec.command().argv().empty()) {
      return absl::InvalidArgumentError("spec.command.argv is empty");
    }
    launch.argv.assign(spec.command().argv().begin(), spec.command().argv().end());
    if (!spec.command().working_dir().empty()) launch.working_dir = spec.command().working_dir();
  } else {
    return absl::InvalidArgumentError("spec has neither trainer nor command");
  }
  launch.env = BuildRankEnv(RankEnvInputFor(request, rank, options.base_env, devices),
                            &plan.ignored_env);
  return plan;
}

}  // namespace baton::worker
