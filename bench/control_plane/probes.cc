#include "bench/control_plane/probes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace baton::bench {

ProcSample SampleProc(int pid) {
  ProcSample s;
  if (pid <= 0) return s;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after "(comm)": state is the 3rd field, utime the 14th, stime the 15th.
    const size_t close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      double ticks[2] = {0, 0};
      for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) ticks[0] = std::stod(field);
        if (i == 15) ticks[1] = std::stod(field);
      }
      s.cpu_s = (ticks[0] + ticks[1]) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      s.rss_mib = std::stod(line.substr(6)) / 1024.0;  // kB
    }
  }
  return s;
}

double SelfCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

namespace {

// The body of http://<address>/metrics (plain HTTP/1.0); empty if nothing answered.
absl::StatusOr<std::string> FetchMetrics(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics=", address, ": want HOST:PORT"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics=", address, ": bad port"));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics=", address, ": not an IPv4 address"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t got; (got = read(fd, buf, sizeof(buf))) > 0;) body.append(buf, got);
    }
  }
  close(fd);
  return body;
}

// The value at the end of a sample line.
double SampleValue(const std::string& line) { return std::stod(line.substr(line.rfind(' ') + 1)); }

}  // namespace

absl::StatusOr<CommitSample> ScrapeCommits(const std::string& address) {
  absl::StatusOr<std::string> body = FetchMetrics(address);
  if (!body.ok()) return body.status();
  CommitSample out;
  bool found = false;
  std::istringstream lines(*body);
  for (std::string line; std::getline(lines, line);) {
    if (absl::StartsWith(line, "baton_coordinator_store_commits_total{result=\"ok\"}")) {
      out.commits = SampleValue(line);
      found = true;
    } else if (absl::StartsWith(line, "baton_coordinator_store_commit_seconds_total")) {
      out.seconds = SampleValue(line);
    }
  }
  if (!found) {
    return absl::UnavailableError(
        absl::StrCat("no baton_coordinator_store_commits_total at http://", address, "/metrics"));
  }
  return out;
}

absl::StatusOr<EtcdSample> ScrapeEtcd(const std::string& address) {
  absl::StatusOr<std::string> body = FetchMetrics(address);
  if (!body.ok()) return body.status();
  EtcdSample out;
  bool found = false;
  std::istringstream lines(*body);
  for (std::string line; std::getline(lines, line);) {
    if (absl::StartsWith(line, "etcd_server_proposals_committed_total ")) {
      out.proposals = SampleValue(line);
      found = true;
    } else if (absl::StartsWith(line, "etcd_mvcc_put_total ")) {
      out.puts = SampleValue(line);
    } else if (absl::StartsWith(line, "etcd_mvcc_txn_total ")) {
      out.txns = SampleValue(line);
    } else if (absl::StartsWith(line, "etcd_network_client_grpc_received_bytes_total ")) {
      out.received_bytes = SampleValue(line);
    }
  }
  if (!found) {
    return absl::UnavailableError(
        absl::StrCat("no etcd_server_proposals_committed_total at http://", address, "/metrics"));
  }
  return out;
}

}  // namespace baton::bench
