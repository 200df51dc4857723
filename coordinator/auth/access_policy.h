#pragma once

#include <set>

#include "absl/status/status.h"
#include "baton/v1/job.pb.h"
#include "coordinator/auth/principal.h"

namespace baton::coordinator {

struct AccessOptions {
  // Roles that may submit `command` jobs (any program on the workers) and trainer jobs
  // with a trainer.torchscript_path (a TorchScript module's operators are code). Other
  // built-in trainer jobs need only submitter.
  std::set<Role> command_roles = {Role::kSubmitter, Role::kAdmin};
};

// Who may do what (see Role). Each check returns OK or PERMISSION_DENIED saying what the
// caller's role lacks. Pure: no I/O, no clock.
class AccessPolicy {
 public:
  explicit AccessPolicy(AccessOptions options = {}) : options_(std::move(options)) {}

  // List, describe, logs, watch, list workers: every role.
  absl::Status CanRead(const Principal& who) const;
  absl::Status CanSubmit(const Principal& who, const baton::v1::JobSpec& spec) const;
  // Submitters cancel their own jobs, admins any.
  // Cordon and uncordon workers: admins only.
  absl::Status CanManageWorkers(const Principal& who) const;
  absl::Status CanCancel(const Principal& who, const baton::v1::Job& job) const;
  // Whether `who` sees the values of `job`'s env variables: its owner and admins.
  bool CanSeeEnv(const Principal& who, const baton::v1::Job& job) const;
  // Replaces the values of `job`'s env variables with "(hidden)" unless CanSeeEnv.
  void Redact(const Principal& who, baton::v1::Job* job) const;

 private:
  const AccessOptions options_;
};

}  // namespace baton::coordinator
