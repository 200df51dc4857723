#pragma once

// How many times a job restarted: one definition for `baton describe`, the job record and
// the coordinator's baton_coordinator_job_restarts_total{job_id}.

#include <cstdint>

#include "proto/baton/v1/job.pb.h"

namespace baton {

// The restarts a job went through over all classes (infra + user + stall + planned). The
// coordinator counts a restart against its class exactly when it moves the job to
// RESTARTING, so this equals the job's RESTARTING transitions. A failure that ended the
// job (budget spent, crash loop) is in `failures` but is not a restart.
inline int64_t TotalRestarts(const baton::v1::RestartStats& stats) {
  return int64_t{stats.infra()} + stats.user() + stats.stall() + stats.planned();
}

}  // namespace baton
