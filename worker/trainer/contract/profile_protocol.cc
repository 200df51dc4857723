#include "worker/trainer/contract/profile_protocol.h"

#include <cctype>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace baton::trainer {

bool ValidProfileRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

std::string EncodeProfileRequest(const ProfileRequest& request) {
  return absl::StrCat("id=", request.id, " steps=", request.steps,
                      request.start_step > 0 ? absl::StrCat(" start_step=", request.start_step)
                                             : std::string(),
                      "\n");
}

absl::StatusOr<ProfileRequest> ParseProfileRequest(absl::string_view line, int64_t default_steps) {
  ProfileRequest request;
  request.steps = default_steps;
  for (absl::string_view token :
       absl::StrSplit(line, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(token, absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (kv.first == "id" && ValidProfileRequestId(kv.second)) {
      request.id = kv.second;
    } else if (kv.first == "steps" && absl::SimpleAtoi(kv.second, &value) && value >= 1 &&
               value <= kMaxProfileSteps) {
      request.steps = value;
    } else if (kv.first == "start_step" && absl::SimpleAtoi(kv.second, &value) && value >= 1) {
      request.start_step = value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("profile request: bad token '", token,
                       "' (allowed: id=<1-64 of [A-Za-z0-9._-]> steps=<1..", kMaxProfileSteps,
                       "> start_step=<N>=1>)"));
    }
  }
  return request;
}

std::string ProfileTraceFile(absl::string_view id, int rank) {
  return absl::StrCat("trace-", id, "-rank", rank, ".json");
}

std::string ProfileErrorFile(absl::string_view id, int rank) {
  return absl::StrCat("trace-", id, "-rank", rank, ".error");
}

std::string ProfileUnknownRequestErrorFile(int rank) {
  return absl::StrCat("trace-unknown-rank", rank, ".error");
}

}  // namespace baton::trainer
