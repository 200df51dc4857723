#include "coordinator/policy/restart_policy.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/job_spec.h"
#include "common/spec/restart_stats.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {
namespace {

// Delay before the n-th restart (n >= 1): min(initial x 2^(n-1), max).
absl::Duration Backoff(const baton::v1::RestartPolicy& p, int64_t n) {
  const absl::Duration max = FromProto(p.backoff_max());
  absl::Duration d = FromProto(p.backoff_initial());
  for (int64_t i = 1; i < n && d < max; ++i) d *= 2;
  return std::min(d, max);
}

bool IsCrashLoop(const baton::v1::Failure* previous, const baton::v1::Failure& f) {
  return f.failure_class() == baton::v1::FAILURE_CLASS_USER && previous != nullptr &&
         previous->failure_class() == baton::v1::FAILURE_CLASS_USER &&
         previous->generation() + 1 == f.generation() && previous->has_step() == f.has_step() &&
         previous->step() == f.step();
}

// Where the failed generation started: the step the previous failure's next generation
// resumed at (0 for the first generation, or when it reported none), and when it ran
// (the previous failure's running_time; the job's start for the first one).
struct GenerationStart {
  int64_t step = 0;
  std::optional<absl::Time> running;
};

GenerationStart StartOf(const baton::v1::Job& job, const baton::v1::Failure& failure) {
  GenerationStart start;
  const auto& failures = job.restarts().failures();
  if (!failures.empty() &&
      failures[failures.size() - 1].next_generation() == failure.generation()) {
    const baton::v1::Failure& previous = failures[failures.size() - 1];
    if (previous.has_resumed_step()) start.step = previous.resumed_step();
    if (previous.has_running_time()) start.running = FromProto(previous.running_time());
  } else if (failure.generation() == 1 && job.has_start_time()) {
    start.running = FromProto(job.start_time());
  }
  return start;
}

}  // namespace

bool MadeHealthyProgress(const baton::v1::Job& job, const baton::v1::Failure& failure,
                         const baton::v1::RestartPolicy& policy) {
  const GenerationStart start = StartOf(job, failure);
  if (policy.healthy_steps() > 0 && failure.has_step() &&
      failure.step() - start.step >= policy.healthy_steps()) {
    return true;
  }
  const absl::Duration healthy_time = FromProto(policy.healthy_time());
  if (healthy_time <= absl::ZeroDuration() || !start.running.has_value()) return false;
  const absl::Time ended = failure.has_occurred_time() ? FromProto(failure.occurred_time())
                                                       : FromProto(failure.fail_time());
  return ended - *start.running >= healthy_time;
}

baton::v1::Failure* LastFailure(baton::v1::Job* job) {
  auto* failures = job->mutable_restarts()->mutable_failures();
  return failures->empty() ? nullptr : &(*failures)[failures->size() - 1];
}

std::string StepText(const baton::v1::Failure& f) {
  return f.has_step() ? absl::StrCat("step ", f.step()) : std::string("no step reported");
}

RestartDecision DecideRestart(baton::v1::Job* job, baton::v1::Failure failure) {
  const baton::v1::RestartPolicy policy = RestartPolicyWithDefaults(job->spec().restart_policy());
  baton::v1::RestartStats* stats = job->mutable_restarts();
  const FailureClassInfo* info = FindFailureClass(failure.failure_class());
  const std::string cause = failure.cause();
  RestartDecision d;
  const baton::v1::Failure* previous = LastFailure(job);
  if (IsCrashLoop(previous, failure)) {
    d.kind = RestartDecision::Kind::kCrashLoop;
    d.reason = "CrashLoop";
    d.message = absl::StrCat("crash loop: generations ", previous->generation(), " and ",
                             failure.generation(), " both failed at ", StepText(failure),
                             "; last: ", cause);
    *stats->add_failures() = std::move(failure);
    return d;
  }
  // Healthy progress since the last restart wipes the slate: what the budgets judge is a
  // run of failures without progress between them, not a long job's lifetime count.
  if (MadeHealthyProgress(*job, failure, policy)) {
    failure.set_healthy_before(true);
    for (const FailureClassInfo& c : kFailureClasses) {
      if (c.set_recent != nullptr) (stats->*c.set_recent)(0);
    }
  }
  const bool budgeted = info != nullptr && info->budget != nullptr;
  const int32_t recent = budgeted ? (stats->*info->recent)() : 0;
  const int32_t budget = budgeted ? (policy.*info->budget)() : 0;
  const char* name = info == nullptr ? "unclassified" : info->description;
  if (recent >= budget) {
    d.kind = RestartDecision::Kind::kBudgetExhausted;
    d.reason = "RestartBudgetExhausted";
    d.message = absl::StrCat(name, " failure in generation ", failure.generation(),
                             " with the restart budget spent (", recent, " of ", budget, " ", name,
                             " restarts used since the job last made healthy progress): ", cause);
    *stats->add_failures() = std::move(failure);
    return d;
  }
  (stats->*info->set_used)((stats->*info->used)() + 1);
  (stats->*info->set_recent)(recent + 1);
  d.kind = RestartDecision::Kind::kRestart;
  d.reason = failure.reason();
  d.backoff = Backoff(policy, RecentRestarts(*stats));
  d.message = absl::StrCat("generation ", failure.generation(), " failed (", name, "): ", cause,
                           "; restart ", recent + 1, " of ", budget, " ", name,
                           " restarts since the last healthy progress, after ",
                           absl::FormatDuration(d.backoff));
  *failure.mutable_backoff() = ToProto(d.backoff);
  failure.set_next_generation(failure.generation() + 1);
  *stats->add_failures() = std::move(failure);
  return d;
}

void RecordPlannedRestart(baton::v1::Job* job, baton::v1::Failure failure) {
  baton::v1::RestartStats* stats = job->mutable_restarts();
  stats->set_planned(stats->planned() + 1);
  *failure.mutable_backoff() = ToProto(absl::ZeroDuration());
  failure.set_next_generation(failure.generation() + 1);
  *stats->add_failures() = std::move(failure);
}

bool KeepsWaitingRanks(const baton::v1::JobSpec& spec, baton::v1::FailureReason reason,
                       absl::Duration backoff) {
  if (!spec.has_trainer() || backoff > kKeepWaitingMaxBackoff) return false;
  const baton::v1::TrainerSpec& t = spec.trainer();
  if (t.snapshot_every() == -1 || t.pipeline().stages() > 1) return false;
  switch (reason) {
    case baton::v1::FAILURE_REASON_RANK_FAILED:
    case baton::v1::FAILURE_REASON_OOM_KILLED:
    case baton::v1::FAILURE_REASON_WORKER_LOST:
    case baton::v1::FAILURE_REASON_LEASE_EXPIRED:
      return true;
    default:
      return false;
  }
}

}  // namespace baton::coordinator
