#include "worker/trainer/checkpoint/checkpoint_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"

namespace baton::trainer {
namespace {

namespace fs = std::filesystem;

// Start records of this many of the newest generations are never pruned.
constexpr size_t kStartRecordsKept = 4;

}  // namespace

absl::StatusOr<CheckpointManager> CheckpointManager::Create(CheckpointManagerOptions options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("checkpoint directory is empty");
  namespace ts = ::baton::trainer_spec;
  RETURN_IF_ERROR(ts::Check(ts::kCheckpointEvery, options.checkpoint_every,
                            ts::SpecPath(ts::kCheckpointEvery)));
  RETURN_IF_ERROR(
      ts::Check(ts::kKeepCheckpoints, options.keep, ts::SpecPath(ts::kKeepCheckpoints)));
  if (options.generation < 0) {
    return absl::InvalidArgumentError("checkpoint generation: must be >= 0");
  }
  return CheckpointManager(std::move(options));
}

bool CheckpointManager::ShouldSave(int64_t step) const {
  return options_.checkpoint_every > 0 && step > 0 && step % options_.checkpoint_every == 0;
}

std::string CheckpointManager::PathForStep(int64_t step) const {
  return (fs::path(options_.dir) / CheckpointName(step, options_.generation)).string();
}

absl::StatusOr<std::vector<char>> CheckpointManager::EncodeCheckpoint(
    const TrainingState& state) const {
  return EncodeTrainingState(state);
}

absl::StatusOr<std::string> CheckpointManager::CommitCheckpoint(
    int64_t step, const std::vector<char>& sealed) const {
  const std::string path = PathForStep(step);
  RETURN_IF_ERROR(WriteFenced(path, absl::string_view(sealed.data(), sealed.size()),
                              absl::StrCat("refusing to commit ", path)));
  RETURN_IF_ERROR(CheckCommitted(step, path));
  Prune(step);
  return path;
}

absl::Status CheckpointManager::CheckNotSuperseded(absl::string_view what,
                                                   bool same_job_only) const {
  ASSIGN_OR_RETURN(Listing listing, ListWithRecords(options_.dir));
  if (const StartRecord* by =
          SupersededBy(listing.starts, options_.job, options_.generation, same_job_only)) {
    return Superseded(options_.generation, *by, what);
  }
  return absl::OkStatus();
}

absl::Status CheckpointManager::WriteFenced(const std::string& path, absl::string_view contents,
                                            absl::string_view refused) const {
  const absl::Status status =
      WriteFileAtomically(path, contents, [&] { return CheckNotSuperseded(refused); });
  if (status.ok() || absl::IsFailedPrecondition(status)) return status;
  // A newer generation's writer removes older writers' temporary files: maybe this one's.
  if (absl::Status fenced = CheckNotSuperseded(refused); absl::IsFailedPrecondition(fenced)) {
    return fenced;
  }
  return status;
}

absl::Status CheckpointManager::CheckCommitted(int64_t step, const std::string& path) const {
  absl::StatusOr<Listing> read = ListWithRecords(options_.dir);
  if (!read.ok()) {
    return absl::Status(read.status().code(),
                        absl::StrCat("after committing ", path, ": ", read.status().message()));
  }
  const Listing& listing = *read;
  const StartRecord* by_record =
      SupersededBy(listing.starts, options_.job, options_.generation);
  if (by_record == nullptr) return absl::OkStatus();
  const StartRecord newest = *by_record;
  // A newer generation started between the check before the rename and now. If it resumed
  // from an earlier step, the file is a fork it did not adopt: stale, so it goes. (If it
  // resumed from this step or later it may have restored this very file: it stays.)
  std::vector<StartRecord> newer;
  for (const StartRecord& start : listing.starts) {
    if (start.generation > options_.generation) newer.push_back(start);
  }
  std::string outcome = "kept it";
  if (const StartRecord* by = StaleBy(CheckpointFile{step, options_.generation, path}, newer)) {
    std::error_code ec;
    fs::remove(path, ec);
    outcome = ec ? absl::StrCat("cannot remove it (", ec.message(), ")")
                 : absl::StrCat("removed it (", StaleReason(*by), ")");
  }
  return Superseded(options_.generation, newest,
                    absl::StrCat("it started as ", path, " was committed; ", outcome));
}

absl::Status CheckpointManager::RemoveUnlessSuperseded(const std::string& path) const {
  RETURN_IF_ERROR(CheckNotSuperseded(absl::StrCat("refusing to delete ", path)));
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("removing ", path, ": ", ec.message()));
  return absl::OkStatus();
}

void CheckpointManager::Prune(int64_t committed_step) const {
  absl::StatusOr<Listing> listing = ListWithRecords(options_.dir);
  if (listing.ok() && SupersededBy(listing->starts, options_.job, options_.generation)) return;
  if (!listing.ok()) {
    BATON_LOG(WARNING) << "not pruning " << options_.dir << ": " << listing.status().message();
    return;
  }
  const int64_t own = options_.generation;
  std::vector<std::string> remove;
  std::vector<const CheckpointFile*> live;  // Ascending by (step, generation).
  for (const CheckpointFile& file : listing->checkpoints) {
    if (file.generation > own) continue;  // Never a newer generation's (none has started).
    if (StaleBy(file, listing->starts) != nullptr || file.step > committed_step) {
      remove.push_back(file.path);
    } else {
      live.push_back(&file);
    }
  }
  const size_t keep = static_cast<size_t>(options_.keep);
  for (size_t i = 0; i + keep < live.size(); ++i) remove.push_back(live[i]->path);
  for (const Temporary& temporary : listing->temporaries) {
    if (temporary.generation <= own && temporary.pid != ::getpid()) {
      remove.push_back(temporary.path);
    }
  }
  absl::flat_hash_set<std::string> removed;
  auto remove_one = [&](const std::string& path) {
    const absl::Status status = RemoveUnlessSuperseded(path);
    if (status.ok()) {
      removed.insert(path);
    } else {
      BATON_LOG(WARNING) << "pruning: " << status.message();
    }
    return status;
  };
  for (const std::string& path : remove) {
    if (absl::IsFailedPrecondition(remove_one(path))) return;  // Superseded: touch nothing.
  }
  // Start records: the newest kStartRecordsKept stay. An older one goes unless it is the
  // only record left that makes some remaining file stale (one whose deletion failed).
  std::vector<StartRecord> records = listing->starts;  // Those still there.
  for (size_t i = 0; i + kStartRecordsKept < records.size();) {
    std::vector<StartRecord> others = records;
    others.erase(others.begin() + static_cast<ptrdiff_t>(i));
    const bool needed = std::any_of(
        listing->checkpoints.begin(), listing->checkpoints.end(), [&](const CheckpointFile& f) {
          return !removed.contains(f.path) && StaleBy(f, {records[i]}) != nullptr &&
                 StaleBy(f, others) == nullptr;
        });
    const absl::Status status = needed ? absl::OkStatus() : remove_one(records[i].path);
    if (absl::IsFailedPrecondition(status)) return;
    if (!needed && status.ok()) {
      records.erase(records.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

absl::Status CheckpointManager::RecordStart(int64_t resumed_step) const {
  if (resumed_step < 0) return absl::InvalidArgumentError("resumed step must be >= 0");
  if (options_.generation == 0) return absl::OkStatus();
  const std::string path = (fs::path(options_.dir) / StartRecordName(options_.generation)).string();
  const std::string refused = absl::StrCat("refusing to record its start in ", path);
  RETURN_IF_ERROR(CheckNotSuperseded(refused, /*same_job_only=*/true));
  // An earlier job's records: this job adopts the directory (see the header). Its own
  // record, written next, fences that job's writers.
  ASSIGN_OR_RETURN(Listing listing, ListWithRecords(options_.dir));
  std::error_code ec;
  for (const StartRecord& start : listing.starts) {
    if (start.job == options_.job) continue;
    BATON_LOG(INFO) << "job " << options_.job << " adopts " << options_.dir << ": removing job "
                    << start.job << "'s start record " << start.path;
    fs::remove(start.path, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("removing ", start.path, ": ", ec.message()));
    }
  }
  if (fs::exists(path, ec)) {
    BATON_LOG(WARNING) << path << " exists already; it is kept (a generation starts once)";
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(WriteFenced(
      path, StartRecordText(options_.job, options_.generation, resumed_step), refused));
  // A newer generation's record that appeared just before the rename: this one started
  // after it, so its record must not count (it could make the newer one's files stale).
  absl::Status after =
      CheckNotSuperseded(absl::StrCat("it started as ", path, " was written; removed it again"));
  if (absl::IsFailedPrecondition(after)) fs::remove(path, ec);
  return after;
}

absl::Status CheckpointManager::SaveWeights(const NamedTensors& tensors,
                                            const std::string& path) const {
  ASSIGN_OR_RETURN(const std::vector<char> bytes, EncodeWeights(tensors, path));
  RETURN_IF_ERROR(WriteFenced(path, absl::string_view(bytes.data(), bytes.size()),
                              absl::StrCat("refusing to write ", path)));
  return CheckNotSuperseded(absl::StrCat("it started as ", path, " was written"));
}

absl::StatusOr<std::string> CheckpointManager::Save(const TrainingState& state) const {
  ASSIGN_OR_RETURN(std::vector<char> sealed, EncodeCheckpoint(state));
  return CommitCheckpoint(state.progress.step, sealed);
}

std::vector<CheckpointFile> CheckpointManager::ListCheckpoints() const {
  absl::StatusOr<Listing> listing = ListDirectory(options_.dir);
  if (!listing.ok()) {
    BATON_LOG(WARNING) << listing.status().message();
    return {};
  }
  return std::move(listing->checkpoints);
}

std::vector<int64_t> CheckpointManager::ListSteps() const {
  std::vector<int64_t> steps;
  for (const CheckpointFile& file : ListCheckpoints()) steps.push_back(file.step);
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

absl::Status CheckpointManager::RestoreFrom(const std::string& path, TrainingState& state,
                                            const RestoreOptions& options) const {
  ASSIGN_OR_RETURN(DecodedCheckpoint decoded, ReadCheckpointFile(path));
  return ApplyCheckpoint(decoded, state, options.restore_rng);
}

absl::StatusOr<std::optional<CheckpointFile>> CheckpointManager::NewestRestorable() const {
  ASSIGN_OR_RETURN(const Listing listing, ListWithRecords(options_.dir));
  for (auto it = listing.checkpoints.rbegin(); it != listing.checkpoints.rend(); ++it) {
    if (StaleBy(*it, listing.starts) == nullptr) return *it;
  }
  return std::nullopt;
}

absl::StatusOr<RestoredCheckpoint> CheckpointManager::RestoreLatest(
    TrainingState& state, const RestoreOptions& options) const {
  ASSIGN_OR_RETURN(Listing listing, ListWithRecords(options_.dir));
  RestoredCheckpoint result;
  std::vector<const CheckpointFile*> candidates;  // Ascending by (step, generation).
  for (const CheckpointFile& file : listing.checkpoints) {
    if (const StartRecord* by = StaleBy(file, listing.starts)) {
      BATON_LOG(WARNING) << "ignoring checkpoint " << file.path << ": " << StaleReason(*by);
      result.stale.push_back(absl::StrCat(file.path, ": ", StaleReason(*by)));
    } else {
      candidates.push_back(&file);
    }
  }
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const CheckpointFile& file = **it;
    absl::StatusOr<DecodedCheckpoint> decoded = ReadCheckpointFile(file.path);
    // A file this trainer refuses to load (format v1) is no reason to resume from an
    // older one, nor to start over: the job stops, saying why.
    if (absl::IsFailedPrecondition(decoded.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(file.path, ": ", decoded.status().message()));
    }
    if (!decoded.ok()) {
      BATON_LOG(WARNING) << "skipping checkpoint " << file.path << ": "
                         << decoded.status().message();
      result.skipped.push_back(absl::StrCat(file.path, ": ", decoded.status().message()));
      continue;
    }
    RETURN_IF_ERROR(ApplyCheckpoint(*decoded, state, options.restore_rng));
    result.path = file.path;
    result.step = decoded->progress.step;
    result.generation = file.generation;
    return result;
  }
  return absl::NotFoundError(listing.checkpoints.empty()
                                 ? absl::StrCat("no checkpoint in ", options_.dir)
                                 : absl::StrCat("no valid checkpoint in ", options_.dir, " (",
                                                result.skipped.size(), " corrupt, ",
                                                result.stale.size(), " stale)"));
}

absl::Status SaveWeights(const NamedTensors& tensors, const std::string& path) {
  ASSIGN_OR_RETURN(const std::vector<char> bytes, EncodeWeights(tensors, path));
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()));
}

}  // namespace baton::trainer
