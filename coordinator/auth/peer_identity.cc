#include "coordinator/auth/peer_identity.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::coordinator {

std::vector<std::string> CertificateNames(const grpc::AuthContext& context) {
  std::vector<std::string> names;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& value : context.FindPropertyValues(property)) {
      std::string name(value.data(), value.size());
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

absl::Status CheckWorkerIdentity(const std::vector<std::string>& names,
                                 const std::string& worker_id, bool require_certificate) {
  if (!require_certificate) return absl::OkStatus();
  if (names.empty()) {
    return absl::UnauthenticatedError(
        "workers must present a certificate from the cluster CA (baton-worker --tls_cert, "
        "--tls_key; tools/certs.sh --worker ID makes one)");
  }
  if (std::find(names.begin(), names.end(), worker_id) == names.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker id '", worker_id, "' does not match the worker's certificate (names: ",
        absl::StrJoin(names, ", "), "); a worker registers under its certificate's name"));
  }
  return absl::OkStatus();
}

}  // namespace baton::coordinator
