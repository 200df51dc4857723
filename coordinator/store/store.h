#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/baton/v1/job.pb.h"
#include "proto/baton/v1/job_service.pb.h"

namespace baton::coordinator {

// Durable state of the coordinator, in one SQLite database file (WAL mode).
//
// Contract: every method returns only after its write is durable (committed; a crash
// of the process right after the call loses nothing). A Store is used by one thread at
// a time (the coordinator's owner thread); it is not internally synchronised.
//
// What is stored:
//   - jobs:    one row per job, the Job proto (without `events`) serialised.
//   - updates: per job, an append-only sequence of JobUpdate (events and metric points),
//              keyed by (job_id, seq); seq is assigned by the caller and strictly increasing.
//   - logs:    per job, LogLine rows keyed by (job_id, seq).
//   - meta:    small key/value pairs (e.g. the next job number).
class Store {
 public:
  // Opens (creating if needed) the database at `path`. ":memory:" gives a private
  // in-memory database for tests. Errors: UNAVAILABLE/INTERNAL with SQLite's message.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);

  virtual ~Store() = default;

  // Inserts or replaces a job (keyed by job.id()). `events` are not stored here.
  virtual absl::Status PutJob(const baton::v1::Job& job) = 0;
  // Every job, in creation order (by id).
  virtual absl::StatusOr<std::vector<baton::v1::Job>> LoadJobs() = 0;

  // Appends updates (all with the same job id). Each update's seq must be greater than
  // every stored one of that job, else FAILED_PRECONDITION. Atomic: all or none.
  virtual absl::Status AppendUpdates(const std::string& job_id,
                                     const std::vector<baton::v1::JobUpdate>& updates) = 0;
  // Updates with seq > after_seq in seq order, at most `limit` (0 = no limit).
  // With `events_only`, metric points are skipped.
  virtual absl::StatusOr<std::vector<baton::v1::JobUpdate>> ReadUpdates(
      const std::string& job_id, int64_t after_seq, int64_t limit, bool events_only) = 0;
  // Largest stored update seq of the job, 0 if none.
  virtual absl::StatusOr<int64_t> LastUpdateSeq(const std::string& job_id) = 0;

  // Appends log lines (their seq set by the caller, strictly increasing per job).
  virtual absl::Status AppendLogs(const std::string& job_id,
                                  const std::vector<baton::v1::LogLine>& lines) = 0;
  // Lines with seq > after_seq, of `rank` (or all ranks when rank < 0), at most `limit`.
  virtual absl::StatusOr<std::vector<baton::v1::LogLine>> ReadLogs(const std::string& job_id,
                                                                   int32_t rank,
                                                                   int64_t after_seq,
                                                                   int64_t limit) = 0;
  // Largest stored log seq of the job, 0 if none.
  virtual absl::StatusOr<int64_t> LastLogSeq(const std::string& job_id) = 0;

  // Small key/value metadata. GetMeta of a missing key is NOT_FOUND.
  virtual absl::Status SetMeta(const std::string& key, const std::string& value) = 0;
  virtual absl::StatusOr<std::string> GetMeta(const std::string& key) = 0;
};

}  // namespace baton::coordinator
