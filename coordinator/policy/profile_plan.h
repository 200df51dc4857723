#pragma once

// `baton profile`'s decision (pure): whether a request can be served now and, if so, which
// ranks on which workers record which steps, and until when the coordinator waits. The
// Coordinator gathers the facts, calls PlanProfile, and only then writes and sends.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"

namespace baton::coordinator {

// `baton profile` limits (JobService.ProfileJob).
inline constexpr int64_t kMaxProfileSteps = 1000;
// Without ProfileJobRequest.timeout: this, or twice the expected time to the window's end
// if longer (at most kMaxProfileTimeout).
inline constexpr absl::Duration kDefaultProfileTimeout = absl::Minutes(2);
inline constexpr absl::Duration kMaxProfileTimeout = absl::Hours(1);
// A profile window starts log_every steps and then this long (by the median step time)
// after the newest reported step; the latter at most kMaxProfileLeadSteps steps (1% of that
// without a step time yet).
inline constexpr absl::Duration kProfileLeadTime = absl::Seconds(3);
inline constexpr int64_t kMaxProfileLeadSteps = 1000;

// What PlanProfile needs to know about the job's workers.
struct ProfileWorkerFacts {
  bool connected = false;
  uint32_t protocol_version = 0;
};

// The facts about the job, read by the coordinator at the request.
struct ProfileFacts {
  const baton::v1::Job* job = nullptr;  // Its record (Peek); not null.
  std::optional<int64_t> last_step;     // Newest step any rank reported, this generation.
  absl::Duration median_step_time;      // Zero when unknown.
  std::map<std::string, ProfileWorkerFacts> workers;  // Every worker the job's ranks are on.
};

struct ProfilePlan {
  std::map<int32_t, std::string> rank_workers;            // rank -> its worker
  std::map<std::string, std::vector<int32_t>> by_worker;  // worker -> its ranks, ascending
  int64_t start_step = 0;                                 // first step of the window
  absl::Duration timeout;                                 // how long the coordinator waits
};

// The plan for `request`, or why it cannot be served:
//   INVALID_ARGUMENT: steps outside [1, kMaxProfileSteps], a rank outside [0, world), a
//     timeout outside (0, kMaxProfileTimeout];
//   FAILED_PRECONDITION: the job is not RUNNING, runs a command, has not reported a step
//     this generation (its ranks may not handle the signal yet), or a worker speaks a
//     protocol older than kProfileProtocolVersion;
//   UNAVAILABLE: a worker of the asked ranks is not connected.
// No ranks asked: every rank.
absl::StatusOr<ProfilePlan> PlanProfile(const baton::v1::ProfileJobRequest& request,
                                        const ProfileFacts& facts);

}  // namespace baton::coordinator
