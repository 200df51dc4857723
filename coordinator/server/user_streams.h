#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/principal.h"

namespace baton::coordinator {

struct UserStreamLimits {
  // Open WatchJob and GetLogs streams one user may hold at once.
  int max_per_user = 32;
  // Open WatchJob and GetLogs streams of all users together.
  int max_total = 1024;
};

// The open user streams (WatchJob, GetLogs): who holds each, with which token, and how to
// end it. It bounds them per user and in total, so that one tenant cannot hold every
// stream the loop serves, and ends a revoked token's streams at once (a token removed from
// the token file, then SIGHUP), which would otherwise follow a job for as long as it runs.
//
// Thread-safe. `end` callbacks are called without the lock held.
class UserStreams {
 public:
  explicit UserStreams(UserStreamLimits limits = {}) : limits_(limits) {}

  // Registers a stream of `caller`; `end` finishes it with a status (must be safe to call
  // from any thread, at any time before Close, more than once). Returns its id for Close.
  // RESOURCE_EXHAUSTED, naming the limit, its flag and its value, when the caller already
  // holds max_per_user streams or all users max_total.
  absl::StatusOr<uint64_t> Open(const Principal& caller,
                                std::function<void(const absl::Status&)> end);
  // The stream ended (any way). Unknown ids are ignored.
  void Close(uint64_t id);

  // Ends, with UNAUTHENTICATED, every stream whose caller's token `holds` no longer accepts
  // (called with Principal::token_hash). Returns how many it ended.
  int EndRevoked(const std::function<bool(const std::string& token_hash)>& holds);

  // Streams open now, in total and of `user`.
  int open() const;
  int open_of(const std::string& user) const;

 private:
  struct Stream {
    std::string user;
    std::string token_hash;
    std::function<void(const absl::Status&)> end;
  };

  const UserStreamLimits limits_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_user_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::coordinator
