#include "worker/trainer/pipeline/checkpoint_layout.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace baton::trainer::pipeline {
namespace {

namespace fs = std::filesystem;

bool IsCheckpointFile(const std::string& name) {
  return absl::StartsWith(name, "ckpt-") && absl::EndsWith(name, ".pt");
}

// True when `dir` holds a checkpoint file.
bool HasCheckpoints(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (IsCheckpointFile(it->path().filename().string())) return true;
  }
  return false;
}

}  // namespace

std::string StageCheckpointDir(const std::string& dir, int stage, int stages) {
  return absl::StrCat(dir, "/pipeline-", stages, "-stage-", stage);
}

absl::Status CheckCheckpointLayout(const std::string& dir, int stages) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::OkStatus();
  std::set<int> found;  // Stage counts with checkpoints.
  fs::directory_iterator it(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  for (fs::directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
    const std::string name = it->path().filename().string();
    if (IsCheckpointFile(name)) {
      found.insert(1);
      continue;
    }
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, "pipeline-") || !it->is_directory(ec)) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(rest, "-stage-");
    int n = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &n) || n < 2) continue;
    if (HasCheckpoints(it->path())) found.insert(n);
  }
  found.erase(stages);
  if (found.empty()) return absl::OkStatus();
  auto describe = [](int n) { return n == 1 ? std::string("1 (no pipeline)") : absl::StrCat(n); };
  std::vector<std::string> theirs;
  for (int n : found) theirs.push_back(describe(n));
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint_dir ", dir, " holds checkpoints of pipeline stages ", absl::StrJoin(theirs, ", "),
      " but this run has pipeline stages ", describe(stages),
      ": a checkpoint restores only into the same number of stages (resume with that "
      "pipeline.stages, or use another checkpoint_dir)"));
}

}  // namespace baton::trainer::pipeline
