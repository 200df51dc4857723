#pragma once

// Failure classes and restart accounting: one table that the coordinator (budgets,
// messages), `baton describe` and the metrics share.

#include <cstdint>

#include "baton/v1/job.pb.h"

namespace baton {

// One failure class: its names and where its restarts are counted and budgeted.
struct FailureClassInfo {
  baton::v1::FailureClass value;
  // Short name, for tables and labels: "infra", "user", "stall", "planned".
  const char* name;
  // As messages say it: "infrastructure", "user-code", "stall", "planned".
  const char* description;
  // RestartStats counter of the class: in the job's life, and since its last healthy
  // progress (budgeted; nullptr for planned resizes).
  int32_t (baton::v1::RestartStats::*used)() const;
  void (baton::v1::RestartStats::*set_used)(int32_t);
  int32_t (baton::v1::RestartStats::*recent)() const;
  void (baton::v1::RestartStats::*set_recent)(int32_t);
  // RestartPolicy budget of the class; nullptr: unbudgeted (planned resizes).
  int32_t (baton::v1::RestartPolicy::*budget)() const;
};

inline constexpr FailureClassInfo kFailureClasses[] = {
    {baton::v1::FAILURE_CLASS_INFRA, "infra", "infrastructure", &baton::v1::RestartStats::infra,
     &baton::v1::RestartStats::set_infra, &baton::v1::RestartStats::recent_infra,
     &baton::v1::RestartStats::set_recent_infra, &baton::v1::RestartPolicy::max_infra_restarts},
    {baton::v1::FAILURE_CLASS_USER, "user", "user-code", &baton::v1::RestartStats::user,
     &baton::v1::RestartStats::set_user, &baton::v1::RestartStats::recent_user,
     &baton::v1::RestartStats::set_recent_user, &baton::v1::RestartPolicy::max_user_restarts},
    {baton::v1::FAILURE_CLASS_STALL, "stall", "stall", &baton::v1::RestartStats::stall,
     &baton::v1::RestartStats::set_stall, &baton::v1::RestartStats::recent_stall,
     &baton::v1::RestartStats::set_recent_stall, &baton::v1::RestartPolicy::max_stall_restarts},
    {baton::v1::FAILURE_CLASS_PLANNED, "planned", "planned", &baton::v1::RestartStats::planned,
     &baton::v1::RestartStats::set_planned, nullptr, nullptr, nullptr},
};

// The class's entry; nullptr for FAILURE_CLASS_UNSPECIFIED or an unknown value.
inline const FailureClassInfo* FindFailureClass(baton::v1::FailureClass c) {
  for (const FailureClassInfo& info : kFailureClasses) {
    if (info.value == c) return &info;
  }
  return nullptr;
}

// The restarts failures caused a job (infra + user + stall). The coordinator counts a
// restart against its class exactly when a failure moves the job to RESTARTING, so this
// equals those transitions. Planned resizes (drain, scale-up: `planned`) also pass through
// RESTARTING but are not failures and are not counted here, so alerts on restarts do not
// fire on an elastic cluster's normal churn. A failure that ended the job (budget spent,
// crash loop) is in `failures` but is not a restart.
inline int64_t TotalRestarts(const baton::v1::RestartStats& stats) {
  int64_t total = 0;
  for (const FailureClassInfo& info : kFailureClasses) {
    if (info.budget != nullptr) total += (stats.*info.used)();
  }
  return total;
}

// The restarts since the job's last healthy progress, over the budgeted classes: the n of
// the next backoff.
inline int64_t RecentRestarts(const baton::v1::RestartStats& stats) {
  int64_t total = 0;
  for (const FailureClassInfo& info : kFailureClasses) {
    if (info.recent != nullptr) total += (stats.*info.recent)();
  }
  return total;
}

}  // namespace baton
