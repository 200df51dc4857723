#include "coordinator/control/job_ranks.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace baton::coordinator {

bool ExitFailed(const baton::v1::ProcessExit& exit) {
  return exit.signal() != 0 || exit.exit_code() != 0;
}

std::string DescribeExit(const baton::v1::ProcessExit& exit) {
  if (exit.kept_for_rejoin()) return "was kept alive for the next generation";
  if (exit.oom_killed()) {
    return absl::StrCat("was killed by the kernel's OOM killer (signal ", exit.signal(), ")");
  }
  if (exit.signal() != 0) return absl::StrCat("was killed by signal ", exit.signal());
  return absl::StrCat("exited with code ", exit.exit_code());
}

std::vector<std::string> WorkersOf(const baton::v1::Job& job) {
  std::vector<std::string> out;
  absl::flat_hash_set<absl::string_view> seen;
  seen.reserve(job.ranks_size());
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (seen.insert(r.worker_id()).second) out.push_back(r.worker_id());
  }
  return out;
}

bool HasLiveRanksOn(const baton::v1::Job& job, const std::string& worker_id) {
  return std::any_of(job.ranks().begin(), job.ranks().end(), [&](const baton::v1::RankInfo& r) {
    return r.worker_id() == worker_id && !r.has_exit();
  });
}

bool HasRanksOn(const baton::v1::Job& job, const std::string& worker_id) {
  return std::any_of(job.ranks().begin(), job.ranks().end(),
                     [&](const baton::v1::RankInfo& r) { return r.worker_id() == worker_id; });
}

}  // namespace baton::coordinator
