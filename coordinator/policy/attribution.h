#pragma once

// Which failure a failed generation is blamed for (pure). The first report is not always
// the first failure: a rank's peers notice it died and exit themselves, and their exits can
// reach the coordinator first, or a whole worker was lost before its ranks' peers failed.
// These correct the generation's Failure record (Job.restarts) when an earlier cause shows
// up; the Coordinator stores the record with a "FailureReattributed" event.

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// Whether `exit` (a failed exit, of a rank of `job`'s current generation) happened before
// the user failure recorded for that generation, so the failure is blamed on it. Checked on
// the record as is (most exits of a stopping generation change nothing).
bool ExitPrecedesRecordedFailure(const baton::v1::Job& job, const baton::v1::ProcessExit& exit);

// Blames the current generation's failure on `rank`'s exit (on `worker_id`), described by
// `what`. Requires ExitPrecedesRecordedFailure. Returns the event's message.
std::string ReattributeToExit(baton::v1::Job* job, int32_t rank, const std::string& worker_id,
                              const baton::v1::ProcessExit& exit, const std::string& what);

// Blames the current generation's user failure on the loss of `worker_id` (reason: a
// worker loss, FAILURE_REASON_WORKER_LOST or _LEASE_EXPIRED; cause; when it happened) if the loss
// came first and a rank of the generation ran there: the failure becomes an infrastructure one (a
// restart it used moves from the user's budget to infra's). Returns the event's message, or "" when
// nothing changes.
std::string ReattributeToWorkerLoss(baton::v1::Job* job, const std::string& worker_id,
                                    baton::v1::FailureReason reason, const std::string& cause,
                                    absl::Time occurred);

}  // namespace baton::coordinator
