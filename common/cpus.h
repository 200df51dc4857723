#pragma once

namespace baton {

// The CPUs this process may run on: its affinity mask (sched_getaffinity), else the
// hardware's count; at least 1.
int UsableCpus();

}  // namespace baton
