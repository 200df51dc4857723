#include "coordinator/auth/access_policy.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::coordinator {
namespace {

std::string Who(const Principal& who) {
  return absl::StrCat("user '", who.user, "' (role ", RoleName(who.role), ")");
}

}  // namespace

absl::Status AccessPolicy::CanRead(const Principal&) const { return absl::OkStatus(); }

absl::Status AccessPolicy::CanSubmit(const Principal& who,
                                     const baton::v1::JobSpec& spec) const {
  if (who.role < Role::kSubmitter) {
    return absl::PermissionDeniedError(
        absl::StrCat(Who(who), " may not submit jobs: that needs role submitter or admin"));
  }
  // A TorchScript module is code too: its operators run whatever its author wrote.
  const bool runs_code =
      spec.has_command() || (spec.has_trainer() && !spec.trainer().torchscript_path().empty());
  if (runs_code && options_.command_roles.count(who.role) == 0) {
    std::vector<std::string> allowed;
    for (Role r : options_.command_roles) allowed.emplace_back(RoleName(r));
    return absl::PermissionDeniedError(absl::StrCat(
        Who(who), " may not submit ",
        spec.has_command() ? "command jobs (arbitrary programs on the workers)"
                           : "trainer.torchscript_path (a TorchScript module runs its own "
                             "code on the workers)",
        "; this coordinator allows them for: ",
        allowed.empty() ? "nobody" : absl::StrJoin(allowed, ", "), " (--command_job_roles)"));
  }
  return absl::OkStatus();
}

absl::Status AccessPolicy::CanManageWorkers(const Principal& who) const {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(Who(who), " may not cordon or uncordon workers: that needs role admin"));
}

absl::Status AccessPolicy::CanCancel(const Principal& who, const baton::v1::Job& job) const {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  if (who.role == Role::kSubmitter && job.owner() == who.user) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      Who(who), " may not cancel job ", job.id(), " of user '", job.owner(),
      "': submitters cancel their own jobs, admins any"));
}

bool AccessPolicy::CanSeeEnv(const Principal& who, const baton::v1::Job& job) const {
  return who.role == Role::kAdmin || (!job.owner().empty() && job.owner() == who.user);
}

void AccessPolicy::Redact(const Principal& who, baton::v1::Job* job) const {
  if (CanSeeEnv(who, *job)) return;
  for (auto& [name, value] : *job->mutable_spec()->mutable_env()) value = "(hidden)";
}

}  // namespace baton::coordinator
