#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::worker {

// Which of the worker's accelerators each assignment's ranks use. The coordinator places
// jobs by slots, and two jobs may share a worker; every rank picks its GPU by LOCAL_RANK
// (baton-trainer and torchrun-style programs alike), so without this the second job's
// local rank 0 would land on the first job's GPU 0. The supervisor takes one device per
// local rank for each assignment and gives its ranks CUDA_VISIBLE_DEVICES listing them in
// local-rank order, so GPU LOCAL_RANK of each rank is its own device.
//
// Devices are named as CUDA_VISIBLE_DEVICES names them (indices, or UUIDs), in the order
// of the worker's own list. Not thread-safe (the supervisor guards it).
class DeviceTable {
 public:
  explicit DeviceTable(std::vector<std::string> devices);

  // Takes `count` devices for (job_id, generation): the first ones in the worker's order
  // that no assignment of another job holds. Devices held by another generation of the
  // same job count as free: the coordinator restarts a job in its old slots while the old
  // generation's processes may still be exiting. Returns them in order; an assignment that
  // holds devices gets the same ones again; a table without devices hands out none (an
  // empty list). RESOURCE_EXHAUSTED if fewer are free (how many are, and which jobs hold
  // the others) or the worker has fewer; INVALID_ARGUMENT if count < 1.
  absl::StatusOr<std::vector<std::string>> Acquire(const std::string& job_id, int64_t generation,
                                                   int count);
  // Frees what (job_id, generation) holds; nothing if it holds nothing.
  void Release(const std::string& job_id, int64_t generation);

 private:
  using Holder = std::pair<std::string, int64_t>;  // (job_id, generation)
  const std::vector<std::string> devices_;
  // Each holding assignment's devices (indices into devices_). Bounded by the assignments
  // of the worker; a device is held by one job (by two of its generations during a
  // restart).
  std::map<Holder, std::vector<size_t>> held_;
};

}  // namespace baton::worker
