#include "worker/trainer_args.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/path_lookup.h"
#include "worker/trainer/contract.h"

namespace baton::worker {
namespace {

std::string FormatDouble(double v) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return std::string(buf, result.ptr);
}

}  // namespace

std::vector<std::string> TrainerArgv(const std::string& trainer_path,
                                     const baton::v1::TrainerSpec& trainer,
                                     const baton::v1::Budget& budget,
                                     const std::string& checkpoint_dir) {
  std::vector<std::string> argv = {trainer_path};
  auto add = [&argv](absl::string_view flag, const std::string& value) {
    argv.push_back(absl::StrCat("--", flag, "=", value));
  };
  if (!trainer.model().empty()) add(trainer::kFlagModel, trainer.model());
  if (!trainer.dataset().empty()) add(trainer::kFlagDataset, trainer.dataset());
  if (!trainer.data_dir().empty()) add(trainer::kFlagDataDir, trainer.data_dir());
  if (trainer.batch_size() != 0) add(trainer::kFlagBatchSize, absl::StrCat(trainer.batch_size()));
  if (trainer.lr() != 0) add(trainer::kFlagLr, FormatDouble(trainer.lr()));
  if (trainer.has_momentum()) add(trainer::kFlagMomentum, FormatDouble(trainer.momentum()));
  if (trainer.seed() != 0) add(trainer::kFlagSeed, absl::StrCat(trainer.seed()));
  if (trainer.hidden_size() > 0) add(trainer::kFlagHidden, absl::StrJoin(trainer.hidden(), ","));
  if (trainer.log_every() != 0) add(trainer::kFlagLogEvery, absl::StrCat(trainer.log_every()));
  if (trainer.threads() != 0) add(trainer::kFlagThreads, absl::StrCat(trainer.threads()));
  if (budget.max_steps() != 0) add(trainer::kFlagMaxSteps, absl::StrCat(budget.max_steps()));
  if (budget.max_epochs() != 0) add(trainer::kFlagMaxEpochs, absl::StrCat(budget.max_epochs()));
  if (!checkpoint_dir.empty()) add(trainer::kFlagCheckpointDir, checkpoint_dir);
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
