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

// The gang of a restarting job's next generation, in group-rank order; empty if fewer
// than job.min_workers workers have job.slots_per_worker free slots. A pure function.
//
// `previous` is the failed generation's gang in group-rank order; `workers` are the READY
// workers with their free slots, the job's own old slots counted as free. Each surviving
// worker of `previous` keeps its group rank (hence its ranks); the place of a worker that
// is gone is taken by a new worker (lowest id first), or, with none left, the later
// survivors move down one place. Remaining new workers join at the end, up to
// job.max_workers (survivors are preferred over new workers when the gang is capped).
std::vector<std::string> PlaceRestart(const std::vector<std::string>& previous,
                                      const PendingJob& job,
                                      std::vector<WorkerCapacity> workers);

}  // namespace baton::coordinator
