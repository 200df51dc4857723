#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::coordinator {

// What a caller of JobService/ClusterService may do (docs/SECURITY.md):
//   viewer     list, describe, logs, watch, list workers
//   submitter  viewer + submit, cancel its own jobs
//   admin      everything, including other users' jobs and worker operations
// Ordered: each role may do what the roles before it may.
enum class Role { kViewer = 0, kSubmitter = 1, kAdmin = 2 };

// "viewer", "submitter", "admin".
absl::string_view RoleName(Role role);
// The inverse of RoleName; INVALID_ARGUMENT naming the allowed values.
absl::StatusOr<Role> ParseRole(absl::string_view name);

// An authenticated caller.
struct Principal {
  std::string user;
  Role role = Role::kViewer;
  // The SHA-256 (hex) of the bearer token it was authenticated with; empty without a
  // token file (Authenticator::AllowAll). Lets a revoked token's open streams be ended.
  std::string token_hash;
};

}  // namespace baton::coordinator
