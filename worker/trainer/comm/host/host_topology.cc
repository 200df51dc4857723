#include "worker/trainer/comm/host/host_topology.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <exception>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "worker/trainer/comm/host/store_protocol.h"

namespace baton::trainer {
namespace {

std::string FirstLineOf(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

bool HostTopology::AnyHostShared() const {
  for (const std::vector<int>& ranks : hosts) {
    if (ranks.size() > 1) return true;
  }
  return false;
}

std::string HostTopology::ToString() const {
  std::vector<std::string> parts;
  for (const std::vector<int>& ranks : hosts) parts.push_back(absl::StrJoin(ranks, ","));
  return absl::StrCat(hosts.size(), hosts.size() == 1 ? " host: " : " hosts: ",
                      absl::StrJoin(parts, " | "));
}

HostTopology GroupByHostKey(const std::vector<std::string>& keys) {
  HostTopology topology;
  std::map<std::string, int> host_of_key;
  for (int r = 0; r < static_cast<int>(keys.size()); ++r) {
    const auto [it, added] = host_of_key.emplace(keys[r], topology.num_hosts());
    if (added) topology.hosts.emplace_back();
    std::vector<int>& host = topology.hosts[it->second];
    topology.host_of.push_back(it->second);
    topology.local_rank_of.push_back(static_cast<int>(host.size()));
    host.push_back(r);
  }
  return topology;
}

HostTopology SingleHost(int world_size) {
  return GroupByHostKey(std::vector<std::string>(world_size, ""));
}

std::string DefaultHostKey() {
  std::string machine = FirstLineOf("/proc/sys/kernel/random/boot_id");
  if (machine.empty()) {
    char name[HOST_NAME_MAX + 1] = {};
    gethostname(name, sizeof(name) - 1);
    machine = absl::StrCat("host=", name);
  }
  struct stat shm = {};
  const std::string shm_dev =
      stat("/dev/shm", &shm) == 0 ? absl::StrCat(static_cast<uint64_t>(shm.st_dev)) : "none";
  struct stat pid_ns = {};
  const std::string pid_ns_inode = stat("/proc/self/ns/pid", &pid_ns) == 0
                                       ? absl::StrCat(static_cast<uint64_t>(pid_ns.st_ino))
                                       : "none";
  return absl::StrCat(machine, " shm_dev=", shm_dev, " pid_ns=", pid_ns_inode);
}

absl::StatusOr<HostTopology> ExchangeHostKeys(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int world_size, std::string key) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in world of ", world_size));
  }
  if (key.empty()) key = DefaultHostKey();
  std::vector<std::string> keys(world_size);
  try {
    StoreSetString(*store, absl::StrCat("hosts/", rank), key);
    for (int r = 0; r < world_size; ++r) keys[r] = StoreGetString(*store, absl::StrCat("hosts/", r));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat("exchanging host keys through the store (rank ",
                                               rank, "): ", message.substr(0, message.find('\n'))));
  }
  return GroupByHostKey(keys);
}

}  // namespace baton::trainer
