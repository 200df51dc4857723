#include "worker/trainer/profile/profiler.h"

#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "worker/trainer/contract/profile_protocol.h"
#include "worker/trainer/data/formats/file_util.h"

namespace baton::trainer {
Profiler::Profiler(ProfilerOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), recorder_(options_.max_spans) {}

void Profiler::Arm(int64_t next_step) {
  // No file: the defaults. An unreadable one is a bad request, reported below.
  absl::StatusOr<std::string> line = ReadWholeFile(absl::StrCat(options_.dir, "/", kProfileRequestFile));
  absl::StatusOr<ProfileRequest> request =
      line.ok()                         ? ParseProfileRequest(*line, options_.default_steps)
      : absl::IsNotFound(line.status()) ? ParseProfileRequest("", options_.default_steps)
                                        : absl::StatusOr<ProfileRequest>(line.status());
  if (!request.ok()) {
    const std::string path =
        absl::StrCat(options_.dir, "/", ProfileUnknownRequestErrorFile(options_.rank));
    BATON_LOG(WARNING) << request.status() << " (written to " << path << ")";
    (void)WriteWholeFile(path, absl::StrCat(request.status().message(), "\n"));
    return;
  }
  if (request->start_step == 0 || request->start_step < next_step) {
    request->start_step = next_step;
  }
  pending_ = *std::move(request);
}

TraceRecorder* Profiler::BeforeStep(int64_t step) {
  if (!open_ && !pending_.has_value() && requested_.exchange(false)) Arm(step);
  if (!open_ && pending_.has_value() && step >= pending_->start_step) {
    open_ = true;
    id_ = pending_->id;
    first_step_ = step;
    last_step_ = step + pending_->steps - 1;
    steps_done_ = 0;
    pending_.reset();
    recorder_.Clear();
    BATON_LOG(INFO) << "profiling steps " << first_step_ << ".." << last_step_ << " (" << id_
                    << ")";
  }
  if (open_) requested_.store(false);  // One window at a time.
  return open_ ? &recorder_ : nullptr;
}

absl::StatusOr<std::optional<std::string>> Profiler::AfterStep(int64_t step) {
  if (!open_) return std::nullopt;
  ++steps_done_;
  if (step < last_step_) return std::nullopt;
  open_ = false;
  return Write(/*partial=*/false);
}

absl::StatusOr<std::optional<std::string>> Profiler::Finish() {
  if (!open_) return std::nullopt;
  open_ = false;
  return Write(/*partial=*/true);
}

void Profiler::Record(TraceSpan span) {
  if (open_) recorder_.Record(std::move(span));
}

absl::StatusOr<std::string> Profiler::Write(bool partial) {
  TraceProcess process;
  process.rank = options_.rank;
  process.job_id = options_.job_id;
  process.host = options_.host;
  process.dropped_spans = recorder_.dropped();
  process.first_step = first_step_;
  process.steps = steps_done_;
  process.partial = partial;
  const std::string path = absl::StrCat(options_.dir, "/", ProfileTraceFile(id_, options_.rank));
  const absl::Status written =
      WriteWholeFile(path, ChromeTraceJson({{process, recorder_.Spans()}}));
  recorder_.Clear();
  if (!written.ok()) return written;
  return path;
}

}  // namespace baton::trainer
