#include "coordinator/policy/attribution.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/time/proto_time.h"
#include "coordinator/policy/failure_reason.h"
#include "coordinator/policy/restart_policy.h"

namespace baton::coordinator {

bool ExitPrecedesRecordedFailure(const baton::v1::Job& job, const baton::v1::ProcessExit& exit) {
  const auto& failures = job.restarts().failures();
  if (failures.empty()) return false;
  const baton::v1::Failure& last = *failures.rbegin();
  const bool failed = exit.signal() != 0 || exit.exit_code() != 0;
  return last.generation() == job.generation() &&
         last.failure_class() == baton::v1::FAILURE_CLASS_USER && last.has_occurred_time() &&
         failed && exit.has_time() && FromProto(exit.time()) < FromProto(last.occurred_time());
}

std::string ReattributeToExit(baton::v1::Job* job, int32_t rank, const std::string& worker_id,
                              const baton::v1::ProcessExit& exit, const std::string& what) {
  baton::v1::Failure* f = LastFailure(job);
  std::string message = absl::StrCat("generation ", f->generation(), " failed first at ", what,
                                     " (reported after: ", f->cause(), ")");
  f->set_cause(what);
  f->set_rank(rank);
  f->set_worker_id(worker_id);
  *f->mutable_occurred_time() = exit.time();
  return message;
}

std::string ReattributeToWorkerLoss(baton::v1::Job* job, const std::string& worker_id,
                                    baton::v1::FailureReason reason, const std::string& cause,
                                    absl::Time occurred) {
  baton::v1::Failure* f = LastFailure(job);
  if (f == nullptr || f->generation() != job->generation() ||
      f->failure_class() != baton::v1::FAILURE_CLASS_USER || !f->has_occurred_time() ||
      occurred >= FromProto(f->occurred_time()) ||
      std::none_of(job->ranks().begin(), job->ranks().end(),
                   [&](const baton::v1::RankInfo& r) { return r.worker_id() == worker_id; })) {
    return "";
  }
  std::string message = absl::StrCat("generation ", f->generation(), " failed first at ", cause,
                                     " (its peers' exits followed: ", f->cause(), ")");
  baton::v1::RestartStats* stats = job->mutable_restarts();
  if (f->next_generation() != 0) {
    stats->set_user(stats->user() - 1);
    stats->set_infra(stats->infra() + 1);
  }
  f->set_failure_class(baton::v1::FAILURE_CLASS_INFRA);
  f->set_reason(std::string(FailureReasonName(reason)));
  f->set_reason_code(reason);
  f->set_cause(cause);
  f->clear_rank();
  f->set_worker_id(worker_id);
  *f->mutable_occurred_time() = ToProto(occurred);
  return message;
}

}  // namespace baton::coordinator
