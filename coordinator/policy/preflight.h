#pragma once

// The pre-flight check of a gang's hosts (pure): which worker sends to which, what the
// answers say of each host, and which hosts a job leaves out. The coordinator runs the
// check (RunPreflight to each worker, worker_service.proto) before a job's first
// generation and whenever its gang has a worker the job has not checked yet
// (docs/ARCHITECTURE.md, "Pre-flight").
//
// The rule. Each worker checks its own host (shared memory, GPUs) and streams to the next
// two workers of a ring of the gang (to the other one in a gang of two). A host has failed
// when it did not answer, one of its checks failed, or (gangs of three or more) none of
// its links to its peers, or none of theirs to it, carried any data. Its bandwidth is the
// lower of its best sending and its best receiving link: a host whose own link is slow has
// only slow links one way, while its neighbours still have a fast one each way. In gangs
// of three or more a host whose bandwidth is below min_fraction of the median of the
// hosts' is slow. A gang of two measures and names nothing on bandwidth: a slow link
// between two hosts does not say which one is slow.

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::coordinator {

// For `n` participants in ring order, the indices each one sends to: {i+1, i+2} mod n for
// n >= 3, {1} and {0} for n == 2, nothing for n <= 1.
std::vector<std::vector<int>> PreflightSendTo(int n);

struct HostVerdict {
  enum class Kind { kOk, kSlow, kFailed };
  std::string worker_id;
  Kind kind = Kind::kOk;
  // Bytes/s of its best link each way; -1 where none was measured.
  double send_bps = -1;
  double recv_bps = -1;
  // Why it is slow or failed, with the evidence; empty when ok.
  std::string reason;
};

struct PreflightVerdict {
  std::vector<HostVerdict> hosts;  // in participant order
  bool bandwidth_judged = false;   // three or more hosts with a bandwidth
  double median_bps = 0;           // of the hosts' bandwidths, when judged
  // Of the links' TCP connect times (one round trip each); InfiniteDuration without any.
  absl::Duration median_latency = absl::InfiniteDuration();
};

// Judges the answers (`results` by worker id; a participant without one did not answer
// within `waited`). `min_fraction` in [0, 1]; 0 never calls a host slow. Without
// `judge_bandwidth` no host is slow: the caller's workers share fewer than three machines,
// so there is no network between most of them to measure (their links are the machine's
// loopback, whose speed is that of its CPUs at the moment).
PreflightVerdict JudgePreflight(const std::vector<std::string>& participants,
                                const std::map<std::string, baton::v1::PreflightResult>& results,
                                double min_fraction, absl::Duration waited,
                                bool judge_bandwidth = true);

// The hosts to leave out of a gang of `gang_size` workers whose job needs `min_workers`:
// failed ones first, then slow ones, slowest first, each only while the gang keeps
// min_workers. Pointers into `verdict`.
std::vector<const HostVerdict*> HostsToLeaveOut(const PreflightVerdict& verdict, int gang_size,
                                                int min_workers);

// One line for the job's event: the hosts, the median, and each host that is not ok.
std::string PreflightSummary(const PreflightVerdict& verdict, absl::Duration took);

// "1.2 GB/s", "850 MB/s", "12 kB/s" (decimal units, as network rates are given).
std::string FormatRate(double bytes_per_second);

}  // namespace baton::coordinator
