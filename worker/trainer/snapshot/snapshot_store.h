#pragma once

// Where in-memory snapshots live between a rank's death and its successor's restore: one
// file per writer in a directory on a memory file system (the worker gives each job one in
// /dev/shm, BATON_SNAPSHOT_DIR), so a snapshot outlives the process that wrote it but never
// touches a disk.
//
// A file holds two slots (double buffering): a write goes into the slot that does not hold
// the newest complete snapshot, so the copy in flight is never the only one. Each slot's
// header carries a sequence number, odd while a write is in progress and even once it is
// complete; a writer killed mid-copy leaves an odd number, and readers skip that slot.
//
//   file:  FileHeader (64 bytes) | SlotHeader[2] (64 bytes each) | slot 0 | slot 1
//
// Only processes of one host read and write a file (it is mapped shared), so integers are
// in host order. Readers trust nothing in it beyond the bounds they check.
//
// Threading: a SnapshotWriter is used by one thread. Readers may run in other processes at
// any time; a read that overlaps a write of the same slot is detected (the sequence number
// changed) and reported, never returned.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/snapshot/snapshot_codec.h"

namespace baton::trainer {

// A complete snapshot found in a directory.
struct SnapshotRef {
  std::string path;
  int slot = 0;
  uint64_t seq = 0;        // Of the slot when listed.
  int64_t generation = 0;  // Of the writer (BATON_GENERATION).
  int64_t step = 0;
  uint64_t bytes = 0;
};

class SnapshotWriter {
 public:
  // Opens <dir>/snapshot-<name>.bin, creating the directory's file if missing. A file that
  // already holds complete snapshots (an earlier process of the same writer) is kept: its
  // newest stays readable until a newer one is complete. INVALID_ARGUMENT for a name that
  // is empty or not [A-Za-z0-9._-]; INTERNAL for file system errors.
  static absl::StatusOr<std::unique_ptr<SnapshotWriter>> Open(const std::string& dir,
                                                              const std::string& name);
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Copies `image` into the older slot and marks it complete. A larger image than the
  // slots hold replaces the file (written aside, then renamed over it) with slots a quarter
  // larger; the older snapshot is then gone, the new one complete. INTERNAL when the file
  // cannot be grown (e.g. /dev/shm is full: nothing older is lost). With `copy`, also
  // sets *copy to the snapshot's bytes, copied from the slot once complete (the source of
  // a disk checkpoint: snapshot_checkpointer.h).
  absl::Status Write(int64_t generation, const SnapshotImage& image, std::string* copy = nullptr);

  const std::string& path() const { return path_; }
  // Bytes of memory the file may use (both slots).
  size_t capacity_bytes() const;

 private:
  SnapshotWriter(std::string path, int fd, char* map, size_t map_bytes);
  // Replaces the file with one whose slots hold `bytes`.
  absl::Status Grow(size_t bytes);

  std::string path_;
  int fd_ = -1;
  char* map_ = nullptr;
  size_t map_bytes_ = 0;
};

// Every complete snapshot in `dir`'s snapshot files, newest first by (generation, step);
// empty when there is none or the directory cannot be read. Unreadable or malformed files
// are skipped.
std::vector<SnapshotRef> ListSnapshots(const std::string& dir);

// The bytes of `ref`. DATA_LOSS when the slot changed since it was listed or while it was
// read (a writer is using it); NOT_FOUND when the file is gone; INTERNAL for read errors.
absl::StatusOr<std::string> ReadSnapshot(const SnapshotRef& ref);

}  // namespace baton::trainer
