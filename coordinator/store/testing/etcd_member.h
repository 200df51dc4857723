#pragma once

// A real single-member etcd cluster (Debian's /usr/bin/etcd) for tests: its own data
// directory, client and peer ports chosen by the OS on 127.0.0.1, stopped (SIGTERM, then
// SIGKILL) when destroyed.

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::coordinator {

class EtcdMember {
 public:
  // Starts a member with its data under `dir` (created) and waits, polling its gRPC API up
  // to `ready_within`, until it serves. Errors: FAILED_PRECONDITION if /usr/bin/etcd is
  // missing, UNAVAILABLE if it exits or does not serve in time (its log's tail attached).
  static absl::StatusOr<std::unique_ptr<EtcdMember>> Start(
      const std::string& dir, absl::Duration ready_within = absl::Seconds(30));
  ~EtcdMember();

  EtcdMember(const EtcdMember&) = delete;
  EtcdMember& operator=(const EtcdMember&) = delete;

  // "127.0.0.1:<port>": the client endpoint, for a gRPC channel.
  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return pid_; }

 private:
  EtcdMember(pid_t pid, std::string endpoint, std::string log)
      : pid_(pid), endpoint_(std::move(endpoint)), log_(std::move(log)) {}

  pid_t pid_;
  std::string endpoint_;
  std::string log_;
};

}  // namespace baton::coordinator
