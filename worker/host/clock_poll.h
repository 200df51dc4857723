#pragma once

#include <poll.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

namespace baton::worker {

// poll(2) with its deadline measured by `clock`, so that a FakeClock decides when a wait on
// real file descriptors times out: blocks until one of `fds` has an event or the clock
// reaches `deadline` (a timer on the clock wakes the poll through an eventfd; InfiniteFuture:
// no deadline; a deadline already reached: a non-blocking poll). Sets each entry's revents
// and returns how many have events, 0 once the deadline passed. Retries on EINTR.
// Errors: INTERNAL with the errno text if the eventfd or poll fails.
absl::StatusOr<int> PollUntil(Clock* clock, absl::Time deadline, std::vector<struct pollfd>& fds);

}  // namespace baton::worker
