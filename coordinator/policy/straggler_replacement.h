#pragma once

// Which stragglers a restarting job leaves behind (pure). A worker whose rank stays slow
// (StragglerDetector::Persistent: above the threshold at each of its last points) is
// replaced at the job's next restart or scale event when a healthy spare exists; once left
// out it is not taken back into that job for a cool-down, unless the job needs it to reach
// workers.min (hysteresis: a worker that is slow now and then does not flap in and out).

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/policy/scheduler.h"

namespace baton::coordinator {

struct SlowWorker {
  std::string worker_id;
  int rank = 0;
  double ratio = 0;  // its rank's slowdown ratio (recent step time / the ranks' median)
};

struct StragglerReplacement {
  std::string worker_id;  // left out
  std::string evidence;   // for the event and `baton describe`
};

// The slow workers of `previous` (the failed generation's gang) to leave out of the next
// generation: slowest first, each only while a spare is left for it. A spare is a worker of
// `workers` (READY, with its free slots, benched ones already left out: WithoutBenched)
// outside `previous`, with `slots_per_worker` free slots. `threshold` and `window` are the
// straggler rule's, for the evidence.
std::vector<StragglerReplacement> StragglersToReplace(const std::vector<SlowWorker>& slow,
                                                      const std::vector<std::string>& previous,
                                                      const std::vector<WorkerCapacity>& workers,
                                                      int slots_per_worker, double threshold,
                                                      int window);

// `workers` without those benched until after `now` (a map of worker -> until).
std::vector<WorkerCapacity> WithoutBenched(std::vector<WorkerCapacity> workers,
                                           const std::map<std::string, absl::Time>& benched,
                                           absl::Time now);

}  // namespace baton::coordinator
