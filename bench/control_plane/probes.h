#pragma once

// What the load generator measures besides the job: a process's CPU time and memory (the
// coordinator's, from /proc), its own CPU time, and the coordinator's store transactions
// from its Prometheus endpoint.

#include <string>

#include "absl/status/statusor.h"

namespace baton::bench {

// utime + stime (seconds) and VmRSS (MiB) of a process; zeros if it cannot be read.
struct ProcSample {
  double cpu_s = 0;
  double rss_mib = 0;
};

// Process `pid`'s sample from /proc/<pid>/stat and /proc/<pid>/status; zeros for pid <= 0.
ProcSample SampleProc(int pid);

// This process's user + system CPU seconds so far.
double SelfCpuSeconds();

// What the coordinator's metrics say of its store: ok transactions and seconds in them.
struct CommitSample {
  double commits = 0;
  double seconds = 0;
};

// Scrapes http://<address>/metrics (127.0.0.1:PORT; plain HTTP/1.0 over loopback) for
// baton_coordinator_store_commits_total{result="ok"} and
// baton_coordinator_store_commit_seconds_total. Errors: INVALID_ARGUMENT (not IPv4:PORT),
// INTERNAL (no socket), UNAVAILABLE (no commit counter in the answer, e.g. no answer).
absl::StatusOr<CommitSample> ScrapeCommits(const std::string& address);

// What etcd's own metrics say of its writes (counters since it started).
struct EtcdSample {
  double proposals = 0;       // etcd_server_proposals_committed_total: raft entries committed
  double puts = 0;            // etcd_mvcc_put_total
  double txns = 0;            // etcd_mvcc_txn_total (only those of more than one operation)
  double received_bytes = 0;  // etcd_network_client_grpc_received_bytes_total
};

// Scrapes http://<address>/metrics of an etcd member (its client address, 127.0.0.1:PORT).
// Errors as ScrapeCommits's; UNAVAILABLE if etcd_server_proposals_committed_total is
// missing.
absl::StatusOr<EtcdSample> ScrapeEtcd(const std::string& address);

}  // namespace baton::bench
