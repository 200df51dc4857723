#pragma once

// A checkpoint directory as the manager (checkpoint_manager.h, which states the rules)
// sees it: the names of checkpoints and generation start records, the listing, the
// records' contents, and the two rules every decision rests on: which checkpoints are
// stale and which generations are superseded. Internal to the checkpoint package.
//
// Names: ckpt-<step, 8+ digits>-g<generation>.pt (generation >= 1) or the legacy
// ckpt-<step>.pt (generation 0); start records gen-<generation, 8+ digits>.start holding
// four text lines: "baton-generation-start-v1", "job <job id>", "generation <g>",
// "resumed_step <step>"; a writer's temporary file is <name>.tmp.<pid>
// (checkpoint_file.h's WriteFileAtomically).
//
// Every function reads the directory as it is at that moment; nothing is cached.
// Thread-compatible.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

// One checkpoint file in the directory.
struct CheckpointFile {
  int64_t step = 0;
  int64_t generation = 0;  // 0 for a legacy name.
  std::string path;
};

// A generation's start record.
struct StartRecord {
  int64_t generation = 0;
  int64_t resumed_step = 0;  // Set by ReadStartRecords,
  std::string job;           // like this.
  std::string path;
};

// What an unfinished WriteFileAtomically of a checkpoint or a start record left behind.
struct Temporary {
  int64_t generation = 0;  // Of the file it was to become.
  int64_t pid = 0;         // Of its writer.
  std::string path;
};

// The directory's files that the manager owns, by kind.
struct Listing {
  std::vector<CheckpointFile> checkpoints;  // Ascending by (step, generation).
  std::vector<StartRecord> starts;          // Ascending by generation.
  std::vector<Temporary> temporaries;
};

// The file name of generation `generation`'s checkpoint of `step`.
std::string CheckpointName(int64_t step, int64_t generation);
// The file name of generation `generation`'s start record.
std::string StartRecordName(int64_t generation);
// The contents of a start record.
std::string StartRecordText(const std::string& job, int64_t generation, int64_t resumed_step);

// An empty listing when `dir` does not exist; INTERNAL when it cannot be read (a fence
// must never pass because the directory was unreadable).
// Start records are listed, not read (ReadStartRecords, ListWithRecords).
absl::StatusOr<Listing> ListDirectory(const std::string& dir);

// Fills in every record's resumed_step. A record that vanished since the listing (pruned)
// is dropped. DATA_LOSS naming a record that does not parse; INTERNAL on read errors.
absl::Status ReadStartRecords(std::vector<StartRecord>& starts);

// ListDirectory with every start record read (ReadStartRecords): what each fence decision
// needs. Errors as the two.
absl::StatusOr<Listing> ListWithRecords(const std::string& dir);

// The start record that makes `file` stale: one of a newer generation that resumed from an
// earlier step. Null when the file is not stale.
const StartRecord* StaleBy(const CheckpointFile& file, const std::vector<StartRecord>& starts);

// Why a file is stale, naming the record `by`.
std::string StaleReason(const StartRecord& by);

// The record that supersedes generation `generation` of `job`: one of a newer generation of
// the job, or, unless `same_job_only`, any record of another job (a later job adopted the
// directory). Null if none. `starts` must have been read (ReadStartRecords).
const StartRecord* SupersededBy(const std::vector<StartRecord>& starts, const std::string& job,
                                int64_t generation, bool same_job_only = false);

// FAILED_PRECONDITION: `what` is refused (or happened) because `newer` has started.
absl::Status Superseded(int64_t generation, const StartRecord& newer, absl::string_view what);

}  // namespace baton::trainer
