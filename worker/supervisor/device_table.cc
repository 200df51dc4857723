#include "worker/supervisor/device_table.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::worker {

DeviceTable::DeviceTable(std::vector<std::string> devices)
    : devices_(std::move(devices)), holders_(devices_.size()) {}

absl::StatusOr<std::vector<std::string>> DeviceTable::Acquire(const std::string& job_id,
                                                              int64_t generation, int count) {
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("device count ", count, " is below 1"));
  }
  if (static_cast<size_t>(count) > devices_.size()) {
    return absl::ResourceExhaustedError(absl::StrCat("job ", job_id, " gen ", generation, " has ",
                                                     count, " ranks here but this worker has ",
                                                     devices_.size(), " GPUs"));
  }
  const Holder me(job_id, generation);
  std::vector<size_t> picked;
  if (auto it = held_.find(me); it != held_.end()) {
    picked = it->second;
  } else {
    std::set<std::string> busy_jobs;
    for (size_t d = 0; d < devices_.size() && static_cast<int>(picked.size()) < count; ++d) {
      const bool other_job = std::any_of(holders_[d].begin(), holders_[d].end(),
                                         [&](const Holder& h) { return h.first != job_id; });
      if (other_job) {
        for (const Holder& h : holders_[d]) busy_jobs.insert(h.first);
        continue;
      }
      picked.push_back(d);
    }
    if (static_cast<int>(picked.size()) < count) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job_id, " gen ", generation, " needs ", count, " of this worker's ",
          devices_.size(), " GPUs; ", picked.size(), " are free, the others are held by job(s) ",
          absl::StrJoin(busy_jobs, ", ")));
    }
    for (size_t d : picked) holders_[d].push_back(me);
    held_[me] = picked;
  }
  std::vector<std::string> out;
  out.reserve(picked.size());
  for (size_t d : picked) out.push_back(devices_[d]);
  return out;
}

void DeviceTable::Release(const std::string& job_id, int64_t generation) {
  const Holder me(job_id, generation);
  auto it = held_.find(me);
  if (it == held_.end()) return;
  for (size_t d : it->second) {
    std::vector<Holder>& h = holders_[d];
    h.erase(std::remove(h.begin(), h.end(), me), h.end());
  }
  held_.erase(it);
}

}  // namespace baton::worker
