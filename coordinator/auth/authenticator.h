#pragma once

#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/principal.h"

namespace baton::coordinator {

// Maps bearer tokens to principals, from a token file that holds only their hashes:
//
//   # comments and blank lines are ignored
//   <sha256 of the token, 64 hex digits>  <user>  <role>
//
// (tools/certs.sh writes one; `printf %s "$TOKEN" | openssl dgst -sha256 -r` gives a hash).
// A client sends "authorization: Bearer <token>" metadata. Thread-safe.
class Authenticator {
 public:
  // Reads `path`. Errors (FAILED_PRECONDITION) name the file and the line.
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromTokenFile(const std::string& path);
  // Without a token file every caller is the user "anonymous" with role admin: only for
  // a coordinator that serves plaintext on loopback (--insecure, no --token_file).
  static std::unique_ptr<Authenticator> AllowAll();

  // Re-reads the token file (SIGHUP). On error the previous tokens stay in force.
  absl::Status Reload();

  // The caller of a call with this client metadata: UNAUTHENTICATED without a bearer
  // token or with one the file does not hold.
  absl::StatusOr<Principal> Authenticate(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  absl::StatusOr<Principal> AuthenticateToken(absl::string_view token) const;
  // Whether the token file (as last read) holds the token with this hash (always, without
  // a token file).
  bool Holds(const std::string& token_hash) const;

  // Lower-case hex SHA-256 of `token`, as the token file stores it.
  static std::string HashToken(absl::string_view token);

 private:
  using TokenMap = std::map<std::string, Principal>;  // hash -> principal
  Authenticator(std::string path, TokenMap tokens)
      : path_(std::move(path)), tokens_(std::move(tokens)) {}
  static absl::StatusOr<TokenMap> ReadTokenFile(const std::string& path);

  const std::string path_;  // Empty: AllowAll.
  mutable absl::Mutex mu_;
  TokenMap tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::coordinator
