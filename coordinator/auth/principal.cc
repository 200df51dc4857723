#include "coordinator/auth/principal.h"

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kSubmitter:
      return "submitter";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role role : {Role::kViewer, Role::kSubmitter, Role::kAdmin}) {
    if (name == RoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", name, "' (allowed: viewer, submitter, admin)"));
}

}  // namespace baton::coordinator
