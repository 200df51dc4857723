#include "worker/trainer/trainer.h"

#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/trainer/pipeline_session.h"
#include "worker/trainer/training_session.h"

namespace baton::trainer {

Trainer::Trainer(TrainerOptions options, TrainerContext context)
    : options_(std::move(options)), context_(context) {}

absl::StatusOr<TrainResult> Trainer::Run() {
  if (context_.train == nullptr || context_.comm == nullptr || context_.metrics == nullptr ||
      context_.clock == nullptr || context_.log == nullptr) {
    return absl::InvalidArgumentError("TrainerContext is missing a required collaborator");
  }
  try {
    return RunOrThrow();
  } catch (const std::exception& e) {  // c10::Error derives from std::exception.
    const std::string message = e.what();
    return absl::InternalError(
        absl::StrCat("training failed: ", message.substr(0, message.find('\n'))));
  }
}

absl::StatusOr<TrainResult> Trainer::RunOrThrow() {
  RETURN_IF_ERROR(ValidateTrainerOptions(options_));
  if (options_.pipeline_stages > 1) {
    PipelineSession session(options_, context_);
    RETURN_IF_ERROR(session.Setup());
    RETURN_IF_ERROR(session.Restore());
    return session.Train();
  }
  TrainingSession session(options_, context_);
  RETURN_IF_ERROR(session.Setup());
  RETURN_IF_ERROR(session.Restore());
  return session.Train();
}

}  // namespace baton::trainer
