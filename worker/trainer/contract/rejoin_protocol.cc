#include "worker/trainer/contract/rejoin_protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "worker/trainer/contract/contract.h"

namespace baton::trainer {
namespace {

constexpr std::array<const char*, 8> kKeys = {kEnvGeneration, kEnvRank,           kEnvWorldSize,
                                              kEnvLocalRank,  kEnvLocalWorldSize, kEnvGroupRank,
                                              kEnvMasterAddr, kEnvMasterPort};

// `env`'s values of kKeys, in their order.
std::array<std::string, kKeys.size()> Values(const LaunchEnv& env) {
  return {absl::StrCat(env.generation),
          absl::StrCat(env.rank),
          absl::StrCat(env.world_size),
          absl::StrCat(env.local_rank),
          absl::StrCat(env.local_world_size),
          absl::StrCat(env.group_rank),
          env.master_addr,
          absl::StrCat(env.master_port)};
}

bool IsKey(absl::string_view key) {
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return false;
}

// The message's bytes up to and including its empty line; "" at EOF before any byte.
absl::StatusOr<std::string> ReadMessage(int fd, const std::atomic<bool>* stop) {
  std::string bytes;
  while (bytes.size() < 2 || bytes.compare(bytes.size() - 2, 2, "\n\n") != 0) {
    if (bytes == "\n") return absl::InvalidArgumentError("rejoin message: empty");
    if (bytes.size() >= kMaxRejoinMessageBytes) {
      return absl::DataLossError(
          absl::StrCat("rejoin message: longer than ", kMaxRejoinMessageBytes, " bytes"));
    }
    char c;
    const ssize_t n = ::read(fd, &c, 1);  // One byte at a time: nothing past the message.
    if (n < 0 && errno == EINTR) {
      if (stop != nullptr && stop->load()) {
        return absl::CancelledError("stopped while waiting for the next generation");
      }
      continue;
    }
    if (n < 0) {
      return absl::InternalError(absl::StrCat("reading ", kEnvRejoinFd, ": errno ", errno));
    }
    if (n == 0) {
      if (bytes.empty()) return bytes;
      return absl::DataLossError("rejoin message: EOF before its empty line");
    }
    bytes.push_back(c);
  }
  return bytes;
}

}  // namespace

bool RejoinableFailure(const absl::Status& status) { return absl::IsUnavailable(status); }

std::string EncodeRejoin(const LaunchEnv& next) {
  const std::array<std::string, kKeys.size()> values = Values(next);
  std::string out;
  for (size_t i = 0; i < kKeys.size(); ++i) absl::StrAppend(&out, kKeys[i], "=", values[i], "\n");
  return out + "\n";
}

absl::StatusOr<std::string> EncodeRejoinFromEnv(const std::vector<std::string>& env) {
  std::map<std::string, std::string, std::less<>> values;
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) values[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  ASSIGN_OR_RETURN(const LaunchEnv parsed, ParseLaunchEnv([&](const char* name) -> const char* {
                     auto it = values.find(absl::string_view(name));
                     return it == values.end() ? nullptr : it->second.c_str();
                   }));
  return EncodeRejoin(parsed);
}

std::optional<int64_t> ParseWaitingLine(absl::string_view line) {
  int64_t generation = 0;
  while (absl::ConsumePrefix(&line, "L")) {
  }
  if (!absl::ConsumePrefix(&line, "waiting ") || !absl::SimpleAtoi(line, &generation)) {
    return std::nullopt;
  }
  return generation;
}

void AnnounceWaiting(int fd, int64_t generation) {
  const std::string line = absl::StrCat("waiting ", generation, "\n");
  // MSG_NOSIGNAL: a worker gone must not kill the rank with SIGPIPE. ENOTSOCK (a pipe):
  // nothing to announce to.
  (void)::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
}

absl::StatusOr<std::optional<LaunchEnv>> ReadRejoin(int fd, const LaunchEnv& current,
                                                    const std::atomic<bool>* stop) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadMessage(fd, stop));
  if (bytes.empty()) return std::optional<LaunchEnv>();
  std::map<std::string, std::string> values;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(bytes).substr(0, bytes.size() - 2), '\n')) {
    const size_t eq = line.find('=');
    const std::string key(line.substr(0, eq));
    if (eq == absl::string_view::npos || !IsKey(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rejoin message: '", line,
          "' is not KEY=VALUE with one of BATON_GENERATION, RANK, "
          "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT"));
    }
    if (!values.emplace(key, std::string(line.substr(eq + 1))).second) {
      return absl::InvalidArgumentError(absl::StrCat("rejoin message: ", key, " twice"));
    }
  }
  for (const char* key : kKeys) {
    if (values.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("rejoin message: no ", key));
    }
  }
  const std::string job_id = current.job_id;
  const std::string metrics_fd = current.metrics_fd >= 0 ? absl::StrCat(current.metrics_fd) : "";
  absl::StatusOr<LaunchEnv> parsed = ParseLaunchEnv([&](const char* name) -> const char* {
    if (auto it = values.find(name); it != values.end()) return it->second.c_str();
    if (absl::string_view(name) == kEnvJobId) return job_id.c_str();
    if (absl::string_view(name) == kEnvMetricsFd) return metrics_fd.c_str();
    return nullptr;
  });
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rejoin message: ", parsed.status().message()));
  }
  LaunchEnv next = *std::move(parsed);
  if (next.generation <= current.generation) {
    return absl::InvalidArgumentError(absl::StrCat("rejoin message: ", kEnvGeneration, "=",
                                                   next.generation, " is not above this rank's ",
                                                   current.generation));
  }
  return std::optional<LaunchEnv>(std::move(next));
}

void ExportRejoinEnv(const LaunchEnv& env) {
  const std::array<std::string, kKeys.size()> values = Values(env);
  for (size_t i = 0; i < kKeys.size(); ++i) ::setenv(kKeys[i], values[i].c_str(), 1);
}

}  // namespace baton::trainer
