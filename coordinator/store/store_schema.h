#pragma once

// The SQLite state file's schema (SqliteStore, store.cc): the tables as created now, and
// the migrations from each older version, applied in order by MigrateSchema.

#include <cstdint>

namespace baton::coordinator {

// Version of the schema below. Bump it (and add a migration in MigrateSchema) whenever
// a table changes. A binary refuses files written by a newer schema.
inline constexpr int64_t kSchemaVersion = 2;

inline constexpr char kCreateSchemaSql[] = R"sql(
  -- One row per job. `ord` is the order of the first PutJob (creation order); an upsert
  -- keeps it. `job` is a serialised baton.v1.Job without events.
  CREATE TABLE jobs (
    ord INTEGER PRIMARY KEY,
    id  TEXT NOT NULL UNIQUE,
    job BLOB NOT NULL
  );
  -- Per-job append-only stream. `body` is a serialised baton.v1.JobUpdate.
  -- `time_us`: the point's or event's time (Unix microseconds; 0: unknown, never pruned
  -- by age).
  CREATE TABLE updates (
    job_id    TEXT    NOT NULL,
    seq       INTEGER NOT NULL,
    is_metric INTEGER NOT NULL,
    body      BLOB    NOT NULL,
    time_us   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, seq)
  ) WITHOUT ROWID;
  -- Per-job log lines. `body` is a serialised baton.v1.LogLine; `bytes` its text's size.
  CREATE TABLE logs (
    job_id  TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    rank    INTEGER NOT NULL,
    body    BLOB    NOT NULL,
    time_us INTEGER NOT NULL DEFAULT 0,
    bytes   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, seq)
  ) WITHOUT ROWID;
  CREATE INDEX logs_by_rank ON logs (job_id, rank, seq);
)sql";

// Schema 1 -> 2: times and sizes for retention (older rows: unknown, 0).
inline constexpr char kMigrateTo2Sql[] = R"sql(
  ALTER TABLE updates ADD COLUMN time_us INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE logs ADD COLUMN time_us INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE logs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
  UPDATE meta SET value = '2' WHERE key = 'schema_version';
)sql";

}  // namespace baton::coordinator
