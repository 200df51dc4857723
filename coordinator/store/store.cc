#include "coordinator/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "common/private_file.h"
#include "common/status_macros.h"
#include "coordinator/store/sqlite.h"
#include "coordinator/store/store_schema.h"
#include "google/protobuf/message_lite.h"

namespace baton::coordinator {
namespace {

using ::baton::v1::Job;
using ::baton::v1::JobUpdate;
using ::baton::v1::LogLine;

// How long a statement waits for another connection's lock before failing with
// UNAVAILABLE. Only another process (an operator's sqlite3 shell, a second coordinator
// by mistake) can hold one: the coordinator itself uses a single connection.
constexpr int kBusyTimeoutMs = 5000;

using sqlite::DbPtr;
using sqlite::Exec;
using sqlite::Prepare;
using sqlite::Query;
using sqlite::SqliteError;
using sqlite::StatementPtr;
using sqlite::Transaction;

bool ParseProto(absl::string_view bytes, google::protobuf::MessageLite* message) {
  return message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// Unix microseconds of a timestamp; 0 if unset.
int64_t TimeMicros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1'000'000 + t.nanos() / 1000;
}

// SQLite's LIMIT takes -1 for "no limit"; ours is 0.
int64_t SqlLimit(int64_t limit) { return limit == 0 ? -1 : limit; }

// ---------------------------------------------------------------------------------------
// SqliteStore
// ---------------------------------------------------------------------------------------

// The Store over one SQLite connection. Thread-compatible, like Store: the caller
// serialises calls. Every prepared statement is made once in Open() and reused.
class SqliteStore final : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);

  absl::Status Write(const WriteBatch& batch) override;
  absl::StatusOr<std::vector<Job>> LoadJobs() override;
  absl::StatusOr<std::vector<JobUpdate>> ReadUpdates(const std::string& job_id,
                                                     int64_t after_seq, int64_t limit,
                                                     bool events_only) override;
  absl::StatusOr<int64_t> LastUpdateSeq(const std::string& job_id) override;
  absl::StatusOr<std::vector<LogLine>> ReadLogs(const std::string& job_id, int32_t rank,
                                                int64_t after_seq, int64_t limit) override;
  absl::StatusOr<int64_t> LastLogSeq(const std::string& job_id) override;
  absl::StatusOr<int64_t> NthLastLogSeq(const std::string& job_id, int32_t rank, int64_t since_us,
                                        int64_t n) override;
  absl::StatusOr<int64_t> Prune(const std::string& job_id, const RetentionLimits& limits) override;
  absl::StatusOr<int64_t> DiskBytes() override;
  absl::StatusOr<std::string> GetMeta(const std::string& key) override;

 private:
  explicit SqliteStore(DbPtr db) : db_(std::move(db)) {}

  absl::Status Configure(bool in_memory);
  absl::Status MigrateSchema();
  absl::Status PrepareStatements();
  absl::Status PrepareRetention();
  // `SELECT COALESCE(MAX(seq), 0) ... WHERE job_id = ?1` through `stmt`.
  absl::StatusOr<int64_t> MaxSeq(sqlite3_stmt* stmt, const std::string& job_id,
                                 absl::string_view op);
  // The parts of Write, inside its transaction.
  absl::Status PutJob(const Job& job);
  absl::Status AppendUpdates(const std::string& job_id, const std::vector<JobUpdate>& updates);
  absl::Status AppendLogs(const std::string& job_id, const std::vector<LogLine>& lines);
  absl::Status SetMeta(const std::string& key, const std::string& value);

  // Declared first so that it is closed after the statements are finalised.
  DbPtr db_;

  StatementPtr put_job_;
  StatementPtr load_jobs_;
  StatementPtr insert_update_;
  StatementPtr read_updates_;
  StatementPtr last_update_seq_;
  StatementPtr insert_log_;
  StatementPtr read_logs_;
  StatementPtr read_logs_of_rank_;
  StatementPtr last_log_seq_;
  StatementPtr nth_last_log_seq_;
  StatementPtr set_meta_;
  StatementPtr get_meta_;
  // Retention (see Prune and WriteBatch::delete_jobs), each bound to ?1 = job id.
  StatementPtr delete_job_[3];
  StatementPtr prune_points_by_age_;
  StatementPtr prune_points_by_count_;
  StatementPtr prune_logs_by_age_;
  StatementPtr prune_logs_by_bytes_;
  std::string path_;  // empty for ":memory:"
};

namespace {

// Creates the database file 0600 (SQLite would create it 0644 less the umask; its journal,
// WAL and shm files take the database file's mode), or narrows an existing one to 0600.
// A symlink is refused.
absl::Status CreatePrivateDbFile(const std::string& path) {
  const int fd = OpenPrivate(path, O_RDWR | O_CREAT);
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("Store::Open(", path, "): a symbolic link is not accepted"));
  }
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("Store::Open(", path, "): ", ::strerror(errno),
                                               "; the directory must exist and be writable"));
  }
  const bool narrowed = ::fchmod(fd, kPrivateFileMode) == 0;
  ::close(fd);
  if (!narrowed) {
    return absl::FailedPreconditionError(
        absl::StrCat("Store::Open(", path, "): chmod 0600: ", ::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> SqliteStore::Open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("Store::Open: empty path");
  const std::string op = absl::StrCat("Store::Open(", path, ")");
  if (path != ":memory:") RETURN_IF_ERROR(CreatePrivateDbFile(path));
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                 nullptr);
  DbPtr db(raw);  // SQLite returns a handle to close even when opening fails.
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(db.get(), rc, op);
    if ((rc & 0xff) == SQLITE_CANTOPEN) {
      return absl::Status(status.code(),
                          absl::StrCat(status.message(),
                                       "; the directory must exist and be writable"));
    }
    return status;
  }
  sqlite3_extended_result_codes(db.get(), 1);

  auto store = absl::WrapUnique(new SqliteStore(std::move(db)));
  if (path != ":memory:") store->path_ = path;
  const auto annotate = [&op](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(op, ": ", s.message()));
  };
  if (absl::Status s = store->Configure(path == ":memory:"); !s.ok()) return annotate(s);
  if (absl::Status s = store->MigrateSchema(); !s.ok()) return annotate(s);
  if (absl::Status s = store->PrepareStatements(); !s.ok()) return annotate(s);
  return store;
}

absl::Status SqliteStore::Configure(bool in_memory) {
  sqlite3* db = db_.get();
  sqlite3_busy_timeout(db, kBusyTimeoutMs);

  // WAL: a commit appends to the log and readers never block the writer. An in-memory
  // database has no file and reports journal_mode "memory".
  StatementPtr journal;
  RETURN_IF_ERROR(Prepare(db, "PRAGMA journal_mode = WAL", &journal));
  Query query(journal.get(), "PRAGMA journal_mode");
  ASSIGN_OR_RETURN(const bool has_row, query.Step());
  const std::string mode = has_row ? std::string(query.ColumnBytes(0)) : "";
  const std::string want = in_memory ? "memory" : "wal";
  if (mode != want) {
    return absl::UnavailableError(
        absl::StrCat("journal_mode is \"", mode, "\", want \"", want, "\""));
  }

  // FULL: in WAL mode every COMMIT fsyncs the log before returning, so a committed
  // transaction survives a process crash, an OS crash and a power cut. (NORMAL would
  // survive only a process crash.)
  return Exec(db, "PRAGMA synchronous = FULL", "PRAGMA synchronous");
}

absl::Status SqliteStore::MigrateSchema() {
  sqlite3* db = db_.get();
  Transaction txn(db);
  RETURN_IF_ERROR(txn.Begin("schema"));
  RETURN_IF_ERROR(Exec(db,
                       "CREATE TABLE IF NOT EXISTS meta ("
                       "  key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID",
                       "creating table meta"));

  std::optional<std::string> stored_version;
  {
    StatementPtr get;
    RETURN_IF_ERROR(Prepare(db, "SELECT value FROM meta WHERE key = ?1", &get));
    Query query(get.get(), "reading schema_version");
    query.BindText(1, kSchemaVersionKey);
    ASSIGN_OR_RETURN(const bool has_row, query.Step());
    if (has_row) stored_version = std::string(query.ColumnBytes(0));
  }

  if (!stored_version.has_value()) {  // A new database.
    RETURN_IF_ERROR(Exec(db, kCreateSchemaSql, "creating tables"));
    StatementPtr set;
    RETURN_IF_ERROR(Prepare(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)", &set));
    Query query(set.get(), "writing schema_version");
    query.BindText(1, kSchemaVersionKey);
    query.BindBlob(2, absl::StrCat(kSchemaVersion));
    RETURN_IF_ERROR(query.Run());
    return txn.Commit("schema");
  }

  int64_t version = 0;
  if (!absl::SimpleAtoi(*stored_version, &version) || version < 1) {
    return absl::DataLossError(absl::StrCat("invalid schema_version \"", *stored_version, "\""));
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database schema_version ", version, " is newer than this binary supports (",
        kSchemaVersion, "); run a newer coordinator"));
  }
  if (version == 1) RETURN_IF_ERROR(Exec(db, kMigrateTo2Sql, "migrating schema 1 to 2"));
  return txn.Commit("schema");
}

absl::Status SqliteStore::PrepareStatements() {
  sqlite3* db = db_.get();
  RETURN_IF_ERROR(Prepare(db,
                          "INSERT INTO jobs (id, job) VALUES (?1, ?2) "
                          "ON CONFLICT (id) DO UPDATE SET job = excluded.job",
                          &put_job_));
  RETURN_IF_ERROR(Prepare(db, "SELECT id, job FROM jobs ORDER BY ord", &load_jobs_));
  RETURN_IF_ERROR(Prepare(db,
                          "INSERT INTO updates (job_id, seq, is_metric, body, time_us) "
                          "VALUES (?1, ?2, ?3, ?4, ?5)",
                          &insert_update_));
  RETURN_IF_ERROR(Prepare(db,
                          "SELECT seq, body FROM updates "
                          "WHERE job_id = ?1 AND seq > ?2 AND (?3 = 0 OR is_metric = 0) "
                          "ORDER BY seq LIMIT ?4",
                          &read_updates_));
  RETURN_IF_ERROR(Prepare(db, "SELECT COALESCE(MAX(seq), 0) FROM updates WHERE job_id = ?1",
                          &last_update_seq_));
  RETURN_IF_ERROR(Prepare(db,
                          "INSERT INTO logs (job_id, seq, rank, body, time_us, bytes) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                          &insert_log_));
  RETURN_IF_ERROR(Prepare(db,
                          "SELECT seq, body FROM logs WHERE job_id = ?1 AND seq > ?2 "
                          "ORDER BY seq LIMIT ?3",
                          &read_logs_));
  RETURN_IF_ERROR(Prepare(db,
                          "SELECT seq, body FROM logs "
                          "WHERE job_id = ?1 AND rank = ?2 AND seq > ?3 "
                          "ORDER BY seq LIMIT ?4",
                          &read_logs_of_rank_));
  RETURN_IF_ERROR(Prepare(db, "SELECT COALESCE(MAX(seq), 0) FROM logs WHERE job_id = ?1",
                          &last_log_seq_));
  RETURN_IF_ERROR(Prepare(db,
                          "SELECT seq FROM logs "
                          "WHERE job_id = ?1 AND (?2 < 0 OR rank = ?2) AND time_us >= ?3 "
                          "ORDER BY seq DESC LIMIT 1 OFFSET ?4",
                          &nth_last_log_seq_));
  RETURN_IF_ERROR(Prepare(db,
                          "INSERT INTO meta (key, value) VALUES (?1, ?2) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                          &set_meta_));
  RETURN_IF_ERROR(Prepare(db, "SELECT value FROM meta WHERE key = ?1", &get_meta_));
  return PrepareRetention();
}

absl::Status SqliteStore::PrepareRetention() {
  sqlite3* db = db_.get();
  RETURN_IF_ERROR(Prepare(db, "DELETE FROM jobs WHERE id = ?1", &delete_job_[0]));
  RETURN_IF_ERROR(Prepare(db, "DELETE FROM updates WHERE job_id = ?1", &delete_job_[1]));
  RETURN_IF_ERROR(Prepare(db, "DELETE FROM logs WHERE job_id = ?1", &delete_job_[2]));
  RETURN_IF_ERROR(Prepare(db,
                          "DELETE FROM updates WHERE job_id = ?1 AND is_metric = 1 "
                          "AND time_us > 0 AND time_us < ?2",
                          &prune_points_by_age_));
  // The newest ?2 points stay: delete those older than the ?2-th newest.
  RETURN_IF_ERROR(Prepare(db,
                          "DELETE FROM updates WHERE job_id = ?1 AND is_metric = 1 AND seq < "
                          "(SELECT seq FROM updates WHERE job_id = ?1 AND is_metric = 1 "
                          "ORDER BY seq DESC LIMIT 1 OFFSET ?2 - 1)",
                          &prune_points_by_count_));
  RETURN_IF_ERROR(Prepare(db,
                          "DELETE FROM logs WHERE job_id = ?1 AND time_us > 0 AND time_us < ?2",
                          &prune_logs_by_age_));
  // The newest lines whose text adds up to at most ?2 bytes stay.
  return Prepare(db,
                 "DELETE FROM logs WHERE job_id = ?1 AND seq <= "
                 "(SELECT seq FROM (SELECT seq, SUM(bytes) OVER (ORDER BY seq DESC) AS total "
                 "FROM logs WHERE job_id = ?1) WHERE total > ?2 ORDER BY seq DESC LIMIT 1)",
                 &prune_logs_by_bytes_);
}

absl::StatusOr<int64_t> SqliteStore::Prune(const std::string& job_id,
                                           const RetentionLimits& limits) {
  Transaction txn(db_.get());
  RETURN_IF_ERROR(txn.Begin("Prune"));
  int64_t deleted = 0;
  auto run = [&](sqlite3_stmt* stmt, std::optional<int64_t> arg) -> absl::Status {
    Query query(stmt, "Prune");
    query.BindText(1, job_id);
    if (arg.has_value()) query.BindInt(2, *arg);
    RETURN_IF_ERROR(query.Run());
    deleted += sqlite3_changes(db_.get());
    return absl::OkStatus();
  };
  if (limits.min_time != absl::InfinitePast()) {
    const int64_t cutoff = absl::ToUnixMicros(limits.min_time);
    RETURN_IF_ERROR(run(prune_points_by_age_.get(), cutoff));
    RETURN_IF_ERROR(run(prune_logs_by_age_.get(), cutoff));
  }
  if (limits.max_points > 0) RETURN_IF_ERROR(run(prune_points_by_count_.get(), limits.max_points));
  if (limits.max_log_bytes > 0) {
    RETURN_IF_ERROR(run(prune_logs_by_bytes_.get(), limits.max_log_bytes));
  }
  RETURN_IF_ERROR(txn.Commit("Prune"));
  return deleted;
}

absl::StatusOr<int64_t> SqliteStore::DiskBytes() {
  if (path_.empty()) return 0;
  int64_t total = 0;
  for (const std::string& file : {path_, path_ + "-wal"}) {
    struct stat st;
    if (::stat(file.c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

absl::StatusOr<int64_t> SqliteStore::MaxSeq(sqlite3_stmt* stmt, const std::string& job_id,
                                            absl::string_view op) {
  Query query(stmt, op);
  query.BindText(1, job_id);
  ASSIGN_OR_RETURN(const bool has_row, query.Step());
  if (!has_row) return absl::InternalError(absl::StrCat(op, ": MAX(seq) returned no row"));
  return query.ColumnInt(0);
}

absl::Status SqliteStore::Write(const WriteBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  Transaction txn(db_.get());
  RETURN_IF_ERROR(txn.Begin("Write"));
  for (const std::string& id : batch.delete_jobs) {
    for (StatementPtr& stmt : delete_job_) {
      Query query(stmt.get(), "Write (delete job)");
      query.BindText(1, id);
      RETURN_IF_ERROR(query.Run());
    }
  }
  for (const Job& job : batch.jobs) RETURN_IF_ERROR(PutJob(job));
  for (const auto& [job_id, updates] : batch.updates) {
    RETURN_IF_ERROR(AppendUpdates(job_id, updates));
  }
  for (const auto& [job_id, lines] : batch.logs) RETURN_IF_ERROR(AppendLogs(job_id, lines));
  for (const auto& [key, value] : batch.meta) RETURN_IF_ERROR(SetMeta(key, value));
  return txn.Commit("Write");
}

absl::Status SqliteStore::PutJob(const Job& job) {
  if (job.id().empty()) return absl::InvalidArgumentError("PutJob: job.id is empty");
  Job stored = job;
  stored.clear_events();
  Query query(put_job_.get(), "PutJob");
  query.BindText(1, job.id());
  query.BindBlob(2, stored.SerializeAsString());
  return query.Run();
}

absl::StatusOr<std::vector<Job>> SqliteStore::LoadJobs() {
  Query query(load_jobs_.get(), "LoadJobs");
  std::vector<Job> jobs;
  for (;;) {
    ASSIGN_OR_RETURN(const bool has_row, query.Step());
    if (!has_row) return jobs;
    if (!ParseProto(query.ColumnBytes(1), &jobs.emplace_back())) {
      return absl::DataLossError(
          absl::StrCat("LoadJobs: stored job ", query.ColumnBytes(0), " does not parse"));
    }
  }
}

absl::Status SqliteStore::AppendUpdates(const std::string& job_id,
                                        const std::vector<JobUpdate>& updates) {
  if (job_id.empty()) return absl::InvalidArgumentError("AppendUpdates: empty job_id");
  ASSIGN_OR_RETURN(int64_t last, MaxSeq(last_update_seq_.get(), job_id, "AppendUpdates"));
  for (const JobUpdate& update : updates) {
    if (update.seq() <= last) {
      return absl::FailedPreconditionError(absl::StrCat(
          "AppendUpdates(", job_id, "): seq ", update.seq(),
          " is not greater than the previous seq ", last, "; nothing was written"));
    }
    last = update.seq();
    Query insert(insert_update_.get(), "AppendUpdates");
    insert.BindText(1, job_id);
    insert.BindInt(2, update.seq());
    insert.BindInt(3, update.has_metric() ? 1 : 0);
    insert.BindBlob(4, update.SerializeAsString());
    const google::protobuf::Timestamp& t =
        update.has_metric() ? update.metric().time() : update.event().time();
    insert.BindInt(5, TimeMicros(t));
    RETURN_IF_ERROR(insert.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobUpdate>> SqliteStore::ReadUpdates(const std::string& job_id,
                                                                int64_t after_seq,
                                                                int64_t limit,
                                                                bool events_only) {
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("ReadUpdates: negative limit ", limit));
  }
  Query query(read_updates_.get(), "ReadUpdates");
  query.BindText(1, job_id);
  query.BindInt(2, after_seq);
  query.BindInt(3, events_only ? 1 : 0);
  query.BindInt(4, SqlLimit(limit));
  std::vector<JobUpdate> updates;
  for (;;) {
    ASSIGN_OR_RETURN(const bool has_row, query.Step());
    if (!has_row) return updates;
    if (!ParseProto(query.ColumnBytes(1), &updates.emplace_back())) {
      return absl::DataLossError(absl::StrCat("ReadUpdates(", job_id, "): stored update seq ",
                                              query.ColumnInt(0), " does not parse"));
    }
  }
}

absl::StatusOr<int64_t> SqliteStore::LastUpdateSeq(const std::string& job_id) {
  return MaxSeq(last_update_seq_.get(), job_id, "LastUpdateSeq");
}

absl::Status SqliteStore::AppendLogs(const std::string& job_id,
                                     const std::vector<LogLine>& lines) {
  if (job_id.empty()) return absl::InvalidArgumentError("AppendLogs: empty job_id");
  ASSIGN_OR_RETURN(int64_t last, MaxSeq(last_log_seq_.get(), job_id, "AppendLogs"));
  for (const LogLine& line : lines) {
    if (line.seq() <= last) {
      return absl::FailedPreconditionError(absl::StrCat(
          "AppendLogs(", job_id, "): seq ", line.seq(),
          " is not greater than the previous seq ", last, "; nothing was written"));
    }
    last = line.seq();
    Query insert(insert_log_.get(), "AppendLogs");
    insert.BindText(1, job_id);
    insert.BindInt(2, line.seq());
    insert.BindInt(3, line.rank());
    insert.BindBlob(4, line.SerializeAsString());
    insert.BindInt(5, TimeMicros(line.time()));
    insert.BindInt(6, static_cast<int64_t>(line.text().size()));
    RETURN_IF_ERROR(insert.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LogLine>> SqliteStore::ReadLogs(const std::string& job_id,
                                                           int32_t rank, int64_t after_seq,
                                                           int64_t limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("ReadLogs: negative limit ", limit));
  }
  const bool all_ranks = rank < 0;
  Query query(all_ranks ? read_logs_.get() : read_logs_of_rank_.get(), "ReadLogs");
  int param = 1;
  query.BindText(param++, job_id);
  if (!all_ranks) query.BindInt(param++, rank);
  query.BindInt(param++, after_seq);
  query.BindInt(param++, SqlLimit(limit));
  std::vector<LogLine> lines;
  for (;;) {
    ASSIGN_OR_RETURN(const bool has_row, query.Step());
    if (!has_row) return lines;
    if (!ParseProto(query.ColumnBytes(1), &lines.emplace_back())) {
      return absl::DataLossError(absl::StrCat("ReadLogs(", job_id, "): stored line seq ",
                                              query.ColumnInt(0), " does not parse"));
    }
  }
}

absl::StatusOr<int64_t> SqliteStore::LastLogSeq(const std::string& job_id) {
  return MaxSeq(last_log_seq_.get(), job_id, "LastLogSeq");
}

absl::StatusOr<int64_t> SqliteStore::NthLastLogSeq(const std::string& job_id, int32_t rank,
                                                   int64_t since_us, int64_t n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("NthLastLogSeq: n is ", n));
  Query query(nth_last_log_seq_.get(), "NthLastLogSeq");
  query.BindText(1, job_id);
  query.BindInt(2, rank);
  query.BindInt(3, since_us);
  query.BindInt(4, n - 1);
  ASSIGN_OR_RETURN(const bool has_row, query.Step());
  return has_row ? query.ColumnInt(0) : 0;
}

absl::Status SqliteStore::SetMeta(const std::string& key, const std::string& value) {
  if (key == kSchemaVersionKey) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetMeta: key \"", key, "\" is reserved by the store"));
  }
  Query query(set_meta_.get(), "SetMeta");
  query.BindText(1, key);
  query.BindBlob(2, value);
  return query.Run();
}

absl::StatusOr<std::string> SqliteStore::GetMeta(const std::string& key) {
  Query query(get_meta_.get(), "GetMeta");
  query.BindText(1, key);
  ASSIGN_OR_RETURN(const bool has_row, query.Step());
  if (!has_row) return absl::NotFoundError(absl::StrCat("GetMeta: no key \"", key, "\""));
  return std::string(query.ColumnBytes(0));
}

}  // namespace

absl::Status Store::PutJob(const Job& job) {
  WriteBatch batch;
  batch.jobs.push_back(job);
  return Write(batch);
}

absl::Status Store::AppendUpdates(const std::string& job_id,
                                  const std::vector<JobUpdate>& updates) {
  if (job_id.empty()) return absl::InvalidArgumentError("AppendUpdates: empty job_id");
  WriteBatch batch;
  if (!updates.empty()) batch.updates[job_id] = updates;
  return Write(batch);
}

absl::Status Store::AppendLogs(const std::string& job_id, const std::vector<LogLine>& lines) {
  if (job_id.empty()) return absl::InvalidArgumentError("AppendLogs: empty job_id");
  WriteBatch batch;
  if (!lines.empty()) batch.logs[job_id] = lines;
  return Write(batch);
}

absl::Status Store::SetMeta(const std::string& key, const std::string& value) {
  WriteBatch batch;
  batch.meta[key] = value;
  return Write(batch);
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  return SqliteStore::Open(path);
}

}  // namespace baton::coordinator
