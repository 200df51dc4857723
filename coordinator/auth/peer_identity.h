#pragma once

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace baton::coordinator {

// The names a connection's verified client certificate carries: its subject CN and its
// DNS subjectAltNames. Empty when the client presented none (a plaintext connection, or a
// user, who authenticates with a token instead).
std::vector<std::string> CertificateNames(const grpc::AuthContext& context);

// Whether a connection whose certificate carries `names` may register as `worker_id`.
// With `require_certificate` (every TLS coordinator), a worker must present a certificate
// from the cluster CA and `worker_id` must be one of its names: so only the holder of a
// worker's key can open (or replace) that worker's session. PERMISSION_DENIED otherwise,
// UNAUTHENTICATED without a certificate.
absl::Status CheckWorkerIdentity(const std::vector<std::string>& names,
                                 const std::string& worker_id, bool require_certificate);

}  // namespace baton::coordinator
