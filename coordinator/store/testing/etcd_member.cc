#include "coordinator/store/testing/etcd_member.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "etcd/api/etcdserverpb/rpc.grpc.pb.h"

namespace baton::coordinator {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

// A port the OS has free on 127.0.0.1 (bound, read and released: etcd cannot report a
// port it chose itself).
absl::StatusOr<int> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return absl::InternalError("cannot bind a port on 127.0.0.1");
  return ntohs(addr.sin_port);
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

// True once a Range on the member answers (any key; an empty result is fine).
bool Serves(const std::string& endpoint) {
  auto stub =
      etcdserverpb::KV::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);  // paces the polls: waits for the port to accept
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  etcdserverpb::RangeRequest req;
  req.set_key("probe");
  etcdserverpb::RangeResponse resp;
  return stub->Range(&ctx, req, &resp).ok();
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdMember>> EtcdMember::Start(const std::string& dir,
                                                              absl::Duration ready_within) {
  if (::access(kEtcd, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcd, " is missing: apt-get install etcd-server"));
  }
  std::filesystem::create_directories(dir);
  absl::StatusOr<int> client = FreePort();
  absl::StatusOr<int> peer = FreePort();
  if (!client.ok()) return client.status();
  if (!peer.ok()) return peer.status();
  const std::string client_url = absl::StrCat("http://127.0.0.1:", *client);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", *peer);
  const std::string log = dir + "/etcd.log";
  std::vector<std::string> args = {kEtcd,
                                   "--name=m0",
                                   "--data-dir=" + dir + "/data",
                                   "--listen-client-urls=" + client_url,
                                   "--advertise-client-urls=" + client_url,
                                   "--listen-peer-urls=" + peer_url,
                                   "--initial-advertise-peer-urls=" + peer_url,
                                   "--initial-cluster=m0=" + peer_url,
                                   "--logger=zap",
                                   "--log-level=warn"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("cannot create ", log));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(kEtcd, argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  std::unique_ptr<EtcdMember> member(new EtcdMember(pid, absl::StrCat("127.0.0.1:", *client), log));
  const absl::Time deadline = absl::Now() + ready_within;
  while (!Serves(member->endpoint_)) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      member->pid_ = -1;
      return absl::UnavailableError(absl::StrCat("etcd exited during start: ", Tail(log)));
    }
    if (absl::Now() > deadline) {
      return absl::UnavailableError(absl::StrCat(
          "etcd did not serve within ", absl::FormatDuration(ready_within), ": ", Tail(log)));
    }
  }
  return member;
}

EtcdMember::~EtcdMember() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling a real process's exit
  }
}

}  // namespace baton::coordinator
