#include "coordinator/policy/restart_policy.h"

#include <algorithm>
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

}  // namespace

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
  const int32_t used = info == nullptr ? 0 : (stats->*info->used)();
  const int32_t budget = info == nullptr || info->budget == nullptr ? 0 : (policy.*info->budget)();
  const char* name = info == nullptr ? "unclassified" : info->description;
  if (used >= budget) {
    d.kind = RestartDecision::Kind::kBudgetExhausted;
    d.reason = "RestartBudgetExhausted";
    d.message = absl::StrCat(name, " failure in generation ", failure.generation(),
                             " with the restart budget spent (", used, " of ", budget, " ", name,
                             " restarts used): ", cause);
    *stats->add_failures() = std::move(failure);
    return d;
  }
  (stats->*info->set_used)(used + 1);
  d.kind = RestartDecision::Kind::kRestart;
  d.reason = failure.reason();
  d.backoff = Backoff(policy, TotalRestarts(*stats));
  d.message = absl::StrCat("generation ", failure.generation(), " failed (", name, "): ", cause,
                           "; restart ", used + 1, " of ", budget, " ", name, " restarts after ",
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

}  // namespace baton::coordinator
