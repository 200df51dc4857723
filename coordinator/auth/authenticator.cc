#include "coordinator/auth/authenticator.h"

#include <openssl/sha.h>

#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace baton::coordinator {
namespace {

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 2 * SHA256_DIGEST_LENGTH) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c)) return false;
  }
  return true;
}

}  // namespace

std::string Authenticator::HashToken(absl::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  ::SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

absl::StatusOr<Authenticator::TokenMap> Authenticator::ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the token file ", path, " (--token_file)"));
  }
  TokenMap tokens;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(path, ":", n, ": ");
    if (fields.size() != 3) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, "want '<sha256 hex of the token> <user> <role>', got ", fields.size(),
          " fields"));
    }
    if (!IsSha256Hex(fields[0])) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, "the first field must be the token's SHA-256 (64 hex digits), never the "
                 "token itself"));
    }
    absl::StatusOr<Role> role = ParseRole(fields[2]);
    if (!role.ok()) return absl::FailedPreconditionError(absl::StrCat(where, role.status().message()));
    const std::string hash = absl::AsciiStrToLower(fields[0]);
    if (!tokens.emplace(hash, Principal{std::string(fields[1]), *role}).second) {
      return absl::FailedPreconditionError(absl::StrCat(where, "a token listed twice"));
    }
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromTokenFile(
    const std::string& path) {
  absl::StatusOr<TokenMap> tokens = ReadTokenFile(path);
  if (!tokens.ok()) return tokens.status();
  return std::unique_ptr<Authenticator>(new Authenticator(path, *std::move(tokens)));
}

std::unique_ptr<Authenticator> Authenticator::AllowAll() {
  return std::unique_ptr<Authenticator>(new Authenticator("", {}));
}

absl::Status Authenticator::Reload() {
  if (path_.empty()) return absl::OkStatus();
  absl::StatusOr<TokenMap> tokens = ReadTokenFile(path_);
  if (!tokens.ok()) return tokens.status();
  absl::MutexLock lock(&mu_);
  tokens_ = *std::move(tokens);
  return absl::OkStatus();
}

absl::StatusOr<Principal> Authenticator::AuthenticateToken(absl::string_view token) const {
  if (path_.empty()) return Principal{"anonymous", Role::kAdmin};
  const std::string hash = HashToken(token);
  absl::MutexLock lock(&mu_);
  auto it = tokens_.find(hash);
  if (token.empty() || it == tokens_.end()) {
    return absl::UnauthenticatedError(
        "the bearer token is not valid (unknown, revoked or mistyped): check the context's "
        "token_file or --token");
  }
  Principal who = it->second;
  who.token_hash = hash;
  return who;
}

bool Authenticator::Holds(const std::string& token_hash) const {
  if (path_.empty()) return true;
  absl::MutexLock lock(&mu_);
  return tokens_.count(token_hash) > 0;
}

absl::StatusOr<Principal> Authenticator::Authenticate(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (path_.empty()) return Principal{"anonymous", Role::kAdmin};
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "no bearer token: this coordinator requires one (the CLI sends the token of its "
        "context, --token_file or BATON_TOKEN)");
  }
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ") && !absl::ConsumePrefix(&value, "bearer ")) {
    return absl::UnauthenticatedError("the authorization metadata must be 'Bearer <token>'");
  }
  return AuthenticateToken(absl::StripAsciiWhitespace(value));
}

}  // namespace baton::coordinator
