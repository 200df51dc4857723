#include "worker/supervisor/snapshot_dirs.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/private_file.h"

namespace baton::worker {

std::string SnapshotDirs::DirName(const std::string& job_id, absl::Time created) {
  if (created == absl::InfinitePast()) return job_id;
  return absl::StrCat(job_id, ".", absl::ToUnixNanos(created));
}

std::string SnapshotDirs::DirOf(const std::string& name) const {
  return absl::StrCat(options_.root, "/", name);
}

absl::StatusOr<std::string> SnapshotDirs::Use(const std::string& name) {
  const std::string dir = DirOf(name);
  if (absl::Status made = MakePrivateDirs(dir); !made.ok()) {
    return absl::InternalError(absl::StrCat("snapshot directory: ", made.message()));
  }
  idle_since_.erase(name);
  in_use_.insert(name);
  return dir;
}

void SnapshotDirs::Idle(const std::string& name, absl::Time now) {
  in_use_.erase(name);
  idle_since_[name] = now;
}

void SnapshotDirs::Collect(absl::Time now) {
  if (!enabled()) return;
  std::error_code ec;
  if (!scanned_) {  // Left by an earlier run of the worker: idle from now.
    scanned_ = true;
    for (const auto& entry : std::filesystem::directory_iterator(options_.root, ec)) {
      const std::string job = entry.path().filename().string();
      if (!in_use_.contains(job) && !idle_since_.contains(job)) idle_since_[job] = now;
    }
  }
  std::vector<std::pair<absl::Time, std::string>> idle;
  for (const auto& [job, since] : idle_since_) idle.emplace_back(since, job);
  std::sort(idle.begin(), idle.end());
  for (size_t i = 0; i < idle.size(); ++i) {
    const auto& [since, job] = idle[i];
    const bool too_many = idle.size() - i > options_.max_idle;
    if (!too_many && now - since < options_.keep_idle) continue;
    std::filesystem::remove_all(DirOf(job), ec);
    if (ec) {
      BATON_LOG(WARNING) << "cannot remove the snapshots of job " << job << ": " << ec.message();
      continue;
    }
    idle_since_.erase(job);
  }
}

}  // namespace baton::worker
