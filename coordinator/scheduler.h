#pragma once

#include <string>
#include <vector>

namespace baton::coordinator {

// A ready worker and the slots it has free.
struct WorkerCapacity {
  std::string worker_id;
  int free_slots = 0;
};

// A job waiting to start.
struct PendingJob {
  std::string job_id;
  int min_workers = 1;
  int max_workers = 1;
  int slots_per_worker = 1;
};

// The decision to start a job on these workers (sorted by worker id).
struct Placement {
  std::string job_id;
  std::vector<std::string> worker_ids;

  bool operator==(const Placement& o) const {
    return job_id == o.job_id && worker_ids == o.worker_ids;
  }
};

// Gang scheduling, a pure function of a snapshot.
//
// Jobs are considered in `queue` order (FIFO by submission). A job is placed only if at
// least `min_workers` workers each have `slots_per_worker` free slots; it then takes as
// many such workers as are available, up to `max_workers`, preferring lower worker ids
// (deterministic). Placed jobs consume the slots they take, so later jobs see what is
// left. A job that does not fit is skipped and later, smaller jobs may still start
// (backfill): a big job can wait behind a stream of small ones — acceptable until
// priorities exist.
std::vector<Placement> Schedule(const std::vector<PendingJob>& queue,
                                std::vector<WorkerCapacity> workers);

}  // namespace baton::coordinator
