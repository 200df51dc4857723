#include "worker/host/clock_poll.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

absl::StatusOr<int> PollUntil(Clock* clock, absl::Time deadline,
                              std::vector<struct pollfd>& fds) {
  const absl::Time now = clock->Now();
  UniqueFd expired;  // Readable once the deadline passed.
  Clock::Timer timer;  // Declared after `expired`: cancelled before it closes.
  if (deadline > now && deadline != absl::InfiniteFuture()) {
    expired = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!expired.valid()) {
      return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
    }
    timer = clock->After(deadline - now, [fd = expired.get()] {
      const uint64_t one = 1;
      (void)!::write(fd, &one, sizeof(one));
    });
  }
  fds.push_back({expired.get(), POLLIN, 0});  // fd -1 when there is none: ignored by poll.
  const int timeout_ms = deadline <= now ? 0 : -1;
  int n;
  do {
    n = ::poll(fds.data(), fds.size(), timeout_ms);
  } while (n < 0 && errno == EINTR);
  const int error = errno;
  const bool timed_out = fds.back().revents != 0;
  fds.pop_back();
  if (n < 0) return absl::InternalError(absl::StrCat("poll: ", std::strerror(error)));
  return timed_out ? n - 1 : n;
}

}  // namespace baton::worker
