#pragma once

// Thin RAII over the SQLite C API for the Store: connections, cached statements, queries
// and write transactions, with errors as absl::Status (code chosen by what the caller can
// do about them). Internal to coordinator/store.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace baton::coordinator::sqlite {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

struct StatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementFinalizer>;

// Chooses the status code by what the caller can do about the failure.
inline absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {  // The primary code of an extended result code.
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "<op>: <SQLite's message> (sqlite error <extended code>)".
inline absl::Status SqliteError(sqlite3* db, int rc, absl::string_view op) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc), absl::StrCat(op, ": ", message, " (sqlite error ", rc, ")"));
}

// Runs SQL that returns no rows, outside the statement cache (setup and transaction
// control only).
inline absl::Status Exec(sqlite3* db, const char* sql, absl::string_view op) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteError(db, rc, op);
}

inline absl::Status Prepare(sqlite3* db, const char* sql, StatementPtr* out) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  out->reset(stmt);
  if (rc != SQLITE_OK) return SqliteError(db, rc, absl::StrCat("preparing `", sql, "`"));
  return absl::OkStatus();
}

// One execution of a (cached) prepared statement: bind, step, read columns. Resets the
// statement and clears its bindings on destruction, so it is ready for reuse and holds
// no read snapshot. Bind failures are reported by the next Step()/Run().
class Query {
 public:
  // `op` names the Store operation in error messages.
  Query(sqlite3_stmt* stmt, absl::string_view op) : stmt_(stmt), op_(op) {}
  ~Query() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  // Parameter indexes are 1-based (?1, ?2, ...). Values are copied.
  void BindInt(int index, int64_t value) { Check(sqlite3_bind_int64(stmt_, index, value)); }
  void BindText(int index, absl::string_view value) {
    Check(sqlite3_bind_text64(stmt_, index, NonNull(value), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }
  void BindBlob(int index, absl::string_view value) {
    // A null pointer would bind SQL NULL; an empty message must be an empty blob.
    Check(sqlite3_bind_blob64(stmt_, index, NonNull(value), value.size(), SQLITE_TRANSIENT));
  }

  // True when a row is available, false when the statement is done.
  absl::StatusOr<bool> Step() {
    RETURN_IF_ERROR(bind_status_);
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(sqlite3_db_handle(stmt_), rc, op_);
  }
  // Steps a statement that returns no rows.
  absl::Status Run() { return Step().status(); }

  // Column indexes are 0-based. The view is valid until the next Step().
  int64_t ColumnInt(int index) { return sqlite3_column_int64(stmt_, index); }
  absl::string_view ColumnBytes(int index) {
    const void* data = sqlite3_column_blob(stmt_, index);
    const int size = sqlite3_column_bytes(stmt_, index);
    if (data == nullptr) return absl::string_view();
    return absl::string_view(static_cast<const char*>(data), static_cast<size_t>(size));
  }

 private:
  static const char* NonNull(absl::string_view v) { return v.data() != nullptr ? v.data() : ""; }
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_status_.ok()) {
      bind_status_ = SqliteError(sqlite3_db_handle(stmt_), rc, op_);
    }
  }

  sqlite3_stmt* const stmt_;
  const std::string op_;
  absl::Status bind_status_;
};

// A write transaction. BEGIN IMMEDIATE takes the write lock up front, so statements
// inside cannot fail on a lock upgrade. Rolls back on destruction unless committed (or
// unless SQLite already rolled back after an error). BEGIN/COMMIT go through
// sqlite3_exec: parsing them costs about a microsecond, noise next to the commit's fsync.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() {
    if (sqlite3_get_autocommit(db_) == 0) Exec(db_, "ROLLBACK", "ROLLBACK").IgnoreError();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  absl::Status Begin(absl::string_view op) { return Exec(db_, "BEGIN IMMEDIATE", op); }
  // Returns once the transaction is durable (synchronous=FULL).
  absl::Status Commit(absl::string_view op) { return Exec(db_, "COMMIT", op); }

 private:
  sqlite3* const db_;
};


}  // namespace baton::coordinator::sqlite
