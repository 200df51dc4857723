#pragma once

// How many times a job restarted: one definition for `baton describe`, the job record and
// the coordinator's baton_coordinator_job_restarts_total{job_id}.

#include <cstdint>

#include "proto/baton/v1/job.pb.h"

namespace baton {

// The restarts failures caused a job (infra + user + stall). The coordinator counts a
// restart against its class exactly when a failure moves the job to RESTARTING, so this
// equals those transitions. Planned resizes (drain, scale-up: `planned`) also pass through
// RESTARTING but are not failures and are not counted here, so alerts on restarts do not
// fire on an elastic cluster's normal churn. A failure that ended the job (budget spent,
// crash loop) is in `failures` but is not a restart.
inline int64_t TotalRestarts(const baton::v1::RestartStats& stats) {
  return int64_t{stats.infra()} + stats.user() + stats.stall();
}

}  // namespace baton
