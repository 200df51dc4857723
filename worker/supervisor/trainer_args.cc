#include "worker/supervisor/trainer_args.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/trainer_spec.h"
#include "common/spec/trainer_spec_defaults.h"
#include "worker/process/path_lookup.h"

namespace baton::worker {

std::vector<std::string> TrainerArgv(const std::string& trainer_path,
                                     const baton::v1::TrainerSpec& trainer,
                                     const baton::v1::Budget& budget,
                                     const std::string& checkpoint_dir) {
  namespace ts = ::baton::trainer_spec;
  std::vector<std::string> argv = {trainer_path};
  for (std::string& flag : TrainerSpecFlags(TrainerSpecWithDefaults(trainer))) {
    argv.push_back(std::move(flag));
  }
  argv.push_back(absl::StrCat(ts::FlagLabel(ts::kMaxSteps), "=", budget.max_steps()));
  argv.push_back(absl::StrCat(ts::FlagLabel(ts::kMaxEpochs), "=", budget.max_epochs()));
  argv.push_back(absl::StrCat(ts::FlagLabel(ts::kCheckpointDir), "=", checkpoint_dir));
  return argv;
}

absl::StatusOr<std::string> ResolveTrainerPath(const std::string& flag_value,
                                               const std::string& self_exe,
                                               const std::string& path_env) {
  if (!flag_value.empty()) return flag_value;
  std::vector<std::string> tried;
  const size_t slash = self_exe.rfind('/');
  if (slash != std::string::npos) {
    const std::string dir = self_exe.substr(0, slash);
    for (const std::string& candidate :
         {absl::StrCat(dir, "/baton-trainer"), absl::StrCat(dir, "/trainer/baton-trainer")}) {
      if (IsExecutableFile(candidate)) return candidate;
      tried.push_back(candidate);
    }
  }
  absl::StatusOr<std::string> on_path = FindExecutable("baton-trainer", path_env);
  if (on_path.ok()) return on_path;
  tried.push_back("$PATH");
  return absl::NotFoundError(absl::StrCat("baton-trainer not found (tried ",
                                          absl::StrJoin(tried, ", "), "); pass --trainer"));
}

}  // namespace baton::worker
