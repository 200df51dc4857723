#include "coordinator/server/user_streams.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

absl::StatusOr<uint64_t> UserStreams::Open(const Principal& caller,
                                           std::function<void(const absl::Status&)> end) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(streams_.size()) >= limits_.max_total) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the coordinator serves at most ", limits_.max_total,
        " open watch and log streams of all users together (--max_streams); ",
        "close one (a `baton watch` or `baton logs -f`) or retry later"));
  }
  int& mine = per_user_[caller.user];
  if (mine >= limits_.max_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "user '", caller.user, "' holds ", mine, " open watch and log streams, the most one "
        "user may (--max_streams_per_user=", limits_.max_per_user, "); close one first"));
  }
  ++mine;
  const uint64_t id = next_id_++;
  streams_.emplace(id, Stream{caller.user, caller.token_hash, std::move(end)});
  return id;
}

void UserStreams::Close(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (--per_user_[it->second.user] == 0) per_user_.erase(it->second.user);
  streams_.erase(it);
}

int UserStreams::EndRevoked(const std::function<bool(const std::string& token_hash)>& holds) {
  std::vector<std::function<void(const absl::Status&)>> ends;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, stream] : streams_) {
      if (!holds(stream.token_hash)) ends.push_back(stream.end);
    }
  }
  const absl::Status revoked = absl::UnauthenticatedError(
      "the token of this stream was revoked (removed from the coordinator's token file)");
  for (const auto& end : ends) end(revoked);  // Close follows when each stream is done.
  return static_cast<int>(ends.size());
}

int UserStreams::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

int UserStreams::open_of(const std::string& user) const {
  absl::MutexLock lock(&mu_);
  auto it = per_user_.find(user);
  return it == per_user_.end() ? 0 : it->second;
}

}  // namespace baton::coordinator
