#include "worker/supervisor/device_table.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::worker {

DeviceTable::DeviceTable(std::vector<std::string> devices) : devices_(std::move(devices)) {}

absl::StatusOr<std::vector<std::string>> DeviceTable::Acquire(const std::string& job_id,
                                                              int64_t generation, int count) {
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("device count ", count, " is below 1"));
  }
  if (devices_.empty()) return std::vector<std::string>();
  if (static_cast<size_t>(count) > devices_.size()) {
    return absl::ResourceExhaustedError(absl::StrCat("job ", job_id, " gen ", generation, " has ",
                                                     count, " ranks here but this worker has ",
                                                     devices_.size(), " GPUs"));
  }
  const Holder me(job_id, generation);
  auto it = held_.find(me);
  if (it == held_.end()) {
    // The devices other jobs hold, and those jobs.
    std::vector<bool> taken(devices_.size());
    std::set<std::string> busy_jobs;
    for (const auto& [holder, held] : held_) {
      if (holder.first == job_id) continue;
      busy_jobs.insert(holder.first);
      for (size_t d : held) taken[d] = true;
    }
    std::vector<size_t> picked;
    for (size_t d = 0; d < devices_.size() && static_cast<int>(picked.size()) < count; ++d) {
      if (!taken[d]) picked.push_back(d);
    }
    if (static_cast<int>(picked.size()) < count) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job_id, " gen ", generation, " needs ", count, " of this worker's ",
          devices_.size(), " GPUs; ", picked.size(), " are free, the others are held by job(s) ",
          absl::StrJoin(busy_jobs, ", ")));
    }
    it = held_.emplace(me, std::move(picked)).first;
  }
  std::vector<std::string> out;
  out.reserve(it->second.size());
  for (size_t d : it->second) out.push_back(devices_[d]);
  return out;
}

void DeviceTable::Release(const std::string& job_id, int64_t generation) {
  held_.erase(Holder(job_id, generation));
}

}  // namespace baton::worker
