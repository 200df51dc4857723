#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"

namespace baton::coordinator {

// Durable state of the coordinator. Store::Open gives the default, one SQLite database
// file (WAL mode; what follows describes it); EtcdStore (etcd_store.h) keeps the same
// contract on etcd for coordinator replicas, with the differences it states.
//
// Contract: every method returns only after its write is durable (committed; a crash
// of the process right after the call loses nothing). With synchronous=FULL this also
// holds for an OS crash or power cut, provided the disk honours fsync. The price is one
// fdatasync per writing call (about 1-5 ms on a VM disk, whatever the batch size), so
// batch: one AppendUpdates/AppendLogs per tick, not per item. A Store is used by one
// thread at a time (the coordinator's owner thread); it is not internally synchronised.
//
// Errors common to all methods: UNAVAILABLE for I/O errors, a full disk or a lock held
// by another process for more than 5 s (retrying may help); DATA_LOSS for a corrupt
// file or a stored row that does not parse; INTERNAL otherwise. Messages name the
// operation and carry SQLite's message.
//
// What is stored:
//   - jobs:    one row per job, the Job proto (without `events`) serialised.
//   - updates: per job, an append-only sequence of JobUpdate (events and metric points),
//              keyed by (job_id, seq); seq is assigned by the caller and strictly increasing.
//   - logs:    per job, LogLine rows keyed by (job_id, seq).
//   - meta:    small key/value pairs (e.g. the next job number).

// The meta key holding the store's schema version: the store's own, never the caller's.
inline constexpr char kSchemaVersionKey[] = "schema_version";

// Writes that Store::Write commits in one transaction: all of them or none.
struct WriteBatch {
  // Inserted or replaced, keyed by job.id() (empty is INVALID_ARGUMENT); `events` are
  // not stored.
  std::vector<baton::v1::Job> jobs;
  // Appended per job id; each update's seq must exceed every stored one of that job and
  // the previous one in its list (so seq >= 1), else FAILED_PRECONDITION.
  std::map<std::string, std::vector<baton::v1::JobUpdate>> updates;
  // Appended per job id; the same seq rule as `updates`.
  std::map<std::string, std::vector<baton::v1::LogLine>> logs;
  // Set (inserted or replaced). The key "schema_version" belongs to the store:
  // INVALID_ARGUMENT.
  std::map<std::string, std::string> meta;
  // Jobs deleted with everything they own (row, updates, logs), before the writes above.
  std::vector<std::string> delete_jobs;

  bool empty() const {
    return jobs.empty() && updates.empty() && logs.empty() && meta.empty() &&
           delete_jobs.empty();
  }
};

// How much of a job's history Store::Prune keeps. Events and the job's row are never
// pruned (they are small and `baton describe` shows them).
struct RetentionLimits {
  // Metric points and log lines with a time before this are deleted (rows of unknown
  // time, written before schema 2, are not).
  absl::Time min_time = absl::InfinitePast();
  // Newest metric points kept (0: no limit).
  int64_t max_points = 0;
  // Newest log lines kept, up to this many bytes of text in all (0: no limit).
  int64_t max_log_bytes = 0;
};

class Store {
 public:
  // Opens (creating if needed) the database at `path`, a file in an existing writable
  // directory (the directory is not created). ":memory:" gives a private in-memory
  // database for tests. Errors: INVALID_ARGUMENT for an empty path; UNAVAILABLE when the
  // file cannot be opened; DATA_LOSS when it is not a SQLite database;
  // FAILED_PRECONDITION when it was written by a newer schema version (run a newer
  // binary; nothing is changed).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);

  virtual ~Store() = default;

  // Commits every write of `batch` in one transaction, durable on return; on any error
  // nothing of it was written. An empty batch is a no-op. This is the only way state
  // changes; the single-purpose writers below are shorthands for one-item batches.
  virtual absl::Status Write(const WriteBatch& batch) = 0;

  // Inserts or replaces a job: Write of a batch holding only `job`.
  absl::Status PutJob(const baton::v1::Job& job);
  // Every job, in creation order: the order of each id's first PutJob (a replace keeps
  // the job's place). For the coordinator's zero-padded ids this is also id order.
  virtual absl::StatusOr<std::vector<baton::v1::Job>> LoadJobs() = 0;

  // Appends updates of one job (empty id is INVALID_ARGUMENT; see WriteBatch::updates).
  absl::Status AppendUpdates(const std::string& job_id,
                             const std::vector<baton::v1::JobUpdate>& updates);
  // Updates with seq > after_seq in seq order, at most `limit` (0 = no limit; negative
  // is INVALID_ARGUMENT). With `events_only`, metric points are skipped (snapshots and
  // events are kept). An unknown job has no updates.
  virtual absl::StatusOr<std::vector<baton::v1::JobUpdate>> ReadUpdates(
      const std::string& job_id, int64_t after_seq, int64_t limit, bool events_only) = 0;
  // Largest stored update seq of the job, 0 if none.
  virtual absl::StatusOr<int64_t> LastUpdateSeq(const std::string& job_id) = 0;

  // Appends log lines of one job (see WriteBatch::logs).
  absl::Status AppendLogs(const std::string& job_id,
                          const std::vector<baton::v1::LogLine>& lines);
  // Lines with seq > after_seq in seq order, of `rank` (or all ranks when rank < 0), at
  // most `limit` (0 = no limit; negative is INVALID_ARGUMENT).
  virtual absl::StatusOr<std::vector<baton::v1::LogLine>> ReadLogs(const std::string& job_id,
                                                                   int32_t rank,
                                                                   int64_t after_seq,
                                                                   int64_t limit) = 0;
  // Largest stored log seq of the job, 0 if none.
  virtual absl::StatusOr<int64_t> LastLogSeq(const std::string& job_id) = 0;
  // The seq of the n-th last stored line (n >= 1) of `rank` (all ranks when rank < 0)
  // written at or after `since_us` (Unix microseconds of LogLine.time); 0 if fewer lines
  // match. Reading from that seq - 1 gives the last n such lines (a `tail`).
  virtual absl::StatusOr<int64_t> NthLastLogSeq(const std::string& job_id, int32_t rank,
                                                int64_t since_us, int64_t n) = 0;

  // Deletes the job's metric points and log lines beyond `limits`, in one transaction.
  // Returns how many rows were deleted.
  virtual absl::StatusOr<int64_t> Prune(const std::string& job_id,
                                        const RetentionLimits& limits) = 0;
  // Bytes the store occupies on disk (the database file and its write-ahead log); 0 for
  // an in-memory store.
  virtual absl::StatusOr<int64_t> DiskBytes() = 0;

  // Small key/value metadata; values are arbitrary bytes. GetMeta of a missing key is
  // NOT_FOUND. SetMeta: see WriteBatch::meta.
  absl::Status SetMeta(const std::string& key, const std::string& value);
  virtual absl::StatusOr<std::string> GetMeta(const std::string& key) = 0;
};

}  // namespace baton::coordinator
