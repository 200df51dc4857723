#pragma once

// The coordinator's Store on etcd, for coordinator replicas (docs/ARCHITECTURE.md,
// "Coordinator replicas on etcd"): what decides a job's fate lives in etcd, what is only
// history by volume lives on the replica.
//
//   in etcd, under `prefix`         jobs (the Job record), their events (every JobUpdate
//                                   that is not a metric point; those of one Write in a few
//                                   chunks keyed by their last seq), meta (the next job
//                                   number, the layout version) and per job the reserved seq
//                                   blocks
//   on this replica (`local`)       metric points and log lines (SQLite)
//
// Every write to etcd is fenced on the leader key (EtcdKv::Commit): once another replica
// leads, a write fails with FAILED_PRECONDITION and nothing of it is written, so a deposed
// leader that has not noticed yet changes nothing. The coordinator halts on any failed write.
//
// Seqs across replicas: updates and log lines are numbered per job, and points and lines
// live only on the replica that wrote them. So that a new leader never hands out a seq that
// a watcher already saw from the old one, seqs are reserved in blocks of `seq_block`,
// recorded in etcd in the transaction of the write that first goes past the block (so no
// stored seq exceeds its block): a replica that opens the store counts every seq up to the
// reserved end as used (LastUpdateSeq/LastLogSeq may then exceed the newest stored seq; seqs
// stay strictly increasing, with a gap after a failover).
//
// etcd's limits: a Write is one etcd transaction when it fits `max_txn_ops` operations
// and `max_request_bytes` (etcd's --max-txn-ops, --max-request-bytes; the defaults are
// etcd's). A job costs its record, its seq block and one operation per 256 KiB chunk of
// events, however many ranks report. A larger Write is committed in several fenced
// transactions, each holding whole jobs (a job's record, events and seq block together),
// the meta first; a job that alone is over the limits is RESOURCE_EXHAUSTED, naming etcd's
// flags. Compaction and the database
// quota are etcd's (--auto-compaction-*, --quota-backend-bytes; see docs/DEPLOY.md); what
// the store keeps in etcd is bounded by the jobs kept (RetentionOptions::job_retention).
//
// Thread-compatible, like Store.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/etcd_kv.h"
#include "coordinator/store/store.h"

namespace baton::coordinator {

struct EtcdStoreOptions {
  // Every key of the store starts with it (e.g. "/baton/"); several clusters may share one
  // etcd under different prefixes.
  std::string prefix = "/baton/";
  // etcd's --max-txn-ops and --max-request-bytes (its defaults).
  int64_t max_txn_ops = 128;
  int64_t max_request_bytes = 1536 * 1024;
  // Seqs reserved at a time per job (see above).
  int64_t seq_block = int64_t{1} << 16;
};

// Version of the key layout, in "<prefix>meta/schema_version".
inline constexpr int64_t kEtcdLayoutVersion = 1;

class EtcdStore final : public Store {
 public:
  // The store of the leader holding `fence`, through `kv`, with `local` for points and
  // lines. Writes the layout version if the prefix is new; FAILED_PRECONDITION if it was
  // written by a newer layout; errors of etcd as EtcdKv's.
  static absl::StatusOr<std::unique_ptr<Store>> Open(std::shared_ptr<EtcdKv> kv, EtcdFence fence,
                                                     std::unique_ptr<Store> local,
                                                     EtcdStoreOptions options);

  absl::Status Write(const WriteBatch& batch) override;
  absl::StatusOr<std::vector<baton::v1::Job>> LoadJobs() override;
  absl::StatusOr<std::vector<baton::v1::JobUpdate>> ReadUpdates(const std::string& job_id,
                                                                int64_t after_seq, int64_t limit,
                                                                bool events_only) override;
  absl::StatusOr<int64_t> LastUpdateSeq(const std::string& job_id) override;
  absl::StatusOr<std::vector<baton::v1::LogLine>> ReadLogs(const std::string& job_id, int32_t rank,
                                                           int64_t after_seq,
                                                           int64_t limit) override;
  absl::StatusOr<int64_t> LastLogSeq(const std::string& job_id) override;
  absl::StatusOr<int64_t> NthLastLogSeq(const std::string& job_id, int32_t rank, int64_t since_us,
                                        int64_t n) override;
  // Points and lines only: they are the local part.
  absl::StatusOr<int64_t> Prune(const std::string& job_id, const RetentionLimits& limits) override;
  // The local part's bytes (etcd's database size is etcd's to report).
  absl::StatusOr<int64_t> DiskBytes() override;
  absl::StatusOr<std::string> GetMeta(const std::string& key) override;

  // etcd transactions this store committed so far (how its Writes were split).
  int64_t etcd_commits() const { return etcd_commits_; }

 private:
  // A job's seqs: the newest handed out and the end of the reserved block.
  struct Seqs {
    int64_t last_update = 0;
    int64_t last_log = 0;
    int64_t reserved_update = 0;
    int64_t reserved_log = 0;
  };
  // Writes that go to etcd together (one job's, or the meta).
  struct Group {
    std::string what;  // for errors
    std::vector<EtcdWrite> writes;
    int64_t bytes = 0;
    void Add(EtcdWrite write);
  };

  EtcdStore(std::shared_ptr<EtcdKv> kv, EtcdFence fence, std::unique_ptr<Store> local,
            EtcdStoreOptions options);

  absl::Status CheckLayout();
  std::string JobKey(const std::string& id) const;
  std::string EventPrefix(const std::string& id) const;
  std::string EventKey(const std::string& id, int64_t seq) const;
  std::string SeqKey(const std::string& id) const;
  std::string MetaKey(const std::string& key) const;
  // Reads every job's reserved blocks (one paged range at Open: a failover does not pay a
  // read per job).
  absl::Status LoadSeqs();
  // The job's seqs (none reserved: all 0).
  Seqs SeqsOf(const std::string& id) const;
  // The job's events into `group` as chunks (a delimited JobUpdate stream each).
  void AddEventChunks(const std::string& id, const std::vector<const baton::v1::JobUpdate*>& events,
                      Group* group) const;
  // The job's part of `batch` into `group` (etcd) and `local` (points, lines), with its
  // seqs after it into `seqs`.
  absl::Status PlanJob(const std::string& id, const WriteBatch& batch, Group* group,
                       WriteBatch* local, Seqs* seqs);
  // Commits `groups` in as few fenced transactions as etcd's limits allow, in order.
  absl::Status CommitGroups(const std::vector<Group>& groups);

  const std::shared_ptr<EtcdKv> kv_;
  const EtcdFence fence_;
  const std::unique_ptr<Store> local_;
  const EtcdStoreOptions options_;
  std::map<std::string, Seqs> seqs_;
  int64_t etcd_commits_ = 0;
};

}  // namespace baton::coordinator
