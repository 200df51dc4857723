#include "coordinator/store/etcd_store.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/delimited_message_util.h"

namespace baton::coordinator {
namespace {

using ::baton::v1::Job;
using ::baton::v1::JobUpdate;
using ::baton::v1::LogLine;

// What a write costs in a request besides its key and value (etcd's framing, generously).
constexpr int64_t kWriteOverheadBytes = 32;
// A job's events of one Write go to etcd in chunks of about this many bytes, one key each:
// a burst (every rank of a large job exiting) is a few writes, not one per event, so it
// stays within etcd's --max-txn-ops.
constexpr int64_t kEventChunkBytes = 256 << 10;
// Kept free in every request for the transaction's compare and framing.
constexpr int64_t kRequestOverheadBytes = 4096;

template <typename Message>
bool Parse(const std::string& bytes, Message* message) {
  return message->ParseFromString(bytes);
}

// "<reserved updates> <reserved logs>", the value of a job's seq key.
std::string FormatReserved(int64_t updates, int64_t logs) {
  return absl::StrCat(updates, " ", logs);
}

bool ParseReserved(const std::string& value, int64_t* updates, int64_t* logs) {
  std::vector<std::string> parts = absl::StrSplit(value, ' ');
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], updates) &&
         absl::SimpleAtoi(parts[1], logs);
}

}  // namespace

void EtcdStore::Group::Add(EtcdWrite write) {
  bytes += static_cast<int64_t>(write.key.size()) + kWriteOverheadBytes +
           (write.value.has_value() ? static_cast<int64_t>(write.value->size()) : 0);
  writes.push_back(std::move(write));
}

EtcdStore::EtcdStore(std::shared_ptr<EtcdKv> kv, EtcdFence fence, std::unique_ptr<Store> local,
                     EtcdStoreOptions options)
    : kv_(std::move(kv)),
      fence_(std::move(fence)),
      local_(std::move(local)),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Store>> EtcdStore::Open(std::shared_ptr<EtcdKv> kv, EtcdFence fence,
                                                       std::unique_ptr<Store> local,
                                                       EtcdStoreOptions options) {
  if (options.prefix.empty() || options.max_txn_ops < 2 || options.seq_block < 1) {
    return absl::InvalidArgumentError(
        "EtcdStore: the prefix must be non-empty, max_txn_ops at least 2, seq_block at least 1");
  }
  auto store = absl::WrapUnique(
      new EtcdStore(std::move(kv), std::move(fence), std::move(local), std::move(options)));
  RETURN_IF_ERROR(store->CheckLayout());
  RETURN_IF_ERROR(store->LoadSeqs());
  return store;
}

absl::Status EtcdStore::CheckLayout() {
  const std::string key = MetaKey(kSchemaVersionKey);
  absl::StatusOr<EtcdKeyValue> stored = kv_->Get(key);
  if (absl::IsNotFound(stored.status())) {
    return kv_->Commit(fence_, {{key, absl::StrCat(kEtcdLayoutVersion)}}).status();
  }
  if (!stored.ok()) return stored.status();
  int64_t version = 0;
  if (!absl::SimpleAtoi(stored->value, &version) || version < 1) {
    return absl::DataLossError(
        absl::StrCat("EtcdStore: ", key, " holds '", stored->value, "', not a layout version"));
  }
  if (version > kEtcdLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "EtcdStore: the state under ", options_.prefix, " has layout version ", version,
        ", newer than this binary supports (", kEtcdLayoutVersion, "); run a newer coordinator"));
  }
  return absl::OkStatus();
}

std::string EtcdStore::JobKey(const std::string& id) const {
  return absl::StrCat(options_.prefix, "job/", id);
}
std::string EtcdStore::EventPrefix(const std::string& id) const {
  return absl::StrCat(options_.prefix, "event/", id, "/");
}
std::string EtcdStore::EventKey(const std::string& id, int64_t seq) const {
  return absl::StrFormat("%s%020d", EventPrefix(id), seq);  // zero-padded: key order is seq order
}
std::string EtcdStore::SeqKey(const std::string& id) const {
  return absl::StrCat(options_.prefix, "seq/", id);
}
std::string EtcdStore::MetaKey(const std::string& key) const {
  return absl::StrCat(options_.prefix, "meta/", key);
}

absl::Status EtcdStore::LoadSeqs() {
  const std::string prefix = absl::StrCat(options_.prefix, "seq/");
  ASSIGN_OR_RETURN(const std::vector<EtcdKeyValue> kvs, kv_->ListAll(prefix));
  for (const EtcdKeyValue& kv : kvs) {
    Seqs seqs;
    if (!ParseReserved(kv.value, &seqs.reserved_update, &seqs.reserved_log)) {
      return absl::DataLossError(
          absl::StrCat("EtcdStore: ", kv.key, " holds '", kv.value, "', not two seqs"));
    }
    // Every seq of the reserved blocks may have been handed out by a previous leader.
    seqs.last_update = seqs.reserved_update;
    seqs.last_log = seqs.reserved_log;
    seqs_[kv.key.substr(prefix.size())] = seqs;
  }
  return absl::OkStatus();
}

EtcdStore::Seqs EtcdStore::SeqsOf(const std::string& id) const {
  // A job without a reserved block has no update or line yet: the first write of one
  // reserves a block in the same transaction.
  auto it = seqs_.find(id);
  return it == seqs_.end() ? Seqs{} : it->second;
}

void EtcdStore::AddEventChunks(const std::string& id, const std::vector<const JobUpdate*>& events,
                               Group* group) const {
  std::string chunk;
  int64_t last = 0;
  auto close = [&] {
    if (chunk.empty()) return;
    group->Add({EventKey(id, last), std::move(chunk)});
    chunk.clear();
  };
  for (const JobUpdate* update : events) {
    google::protobuf::io::StringOutputStream out(&chunk);
    google::protobuf::util::SerializeDelimitedToZeroCopyStream(*update, &out);
    last = update->seq();
    if (static_cast<int64_t>(chunk.size()) >= kEventChunkBytes) close();
  }
  close();
}

absl::Status EtcdStore::PlanJob(const std::string& id, const WriteBatch& batch, Group* group,
                                WriteBatch* local, Seqs* seqs) {
  if (id.empty()) return absl::InvalidArgumentError("Write: a job id is empty");
  group->what = absl::StrCat("job ", id);
  for (const Job& job : batch.jobs) {
    if (job.id() != id) continue;
    Job stored = job;
    stored.clear_events();
    group->Add({JobKey(id), stored.SerializeAsString()});
  }
  *seqs = SeqsOf(id);
  std::vector<const JobUpdate*> events;
  if (auto it = batch.updates.find(id); it != batch.updates.end()) {
    for (const JobUpdate& update : it->second) {
      if (update.seq() <= seqs->last_update) {
        return absl::FailedPreconditionError(absl::StrCat(
            "AppendUpdates(", id, "): seq ", update.seq(), " is not greater than the previous seq ",
            seqs->last_update, "; nothing was written"));
      }
      seqs->last_update = update.seq();
      if (update.has_metric()) {
        local->updates[id].push_back(update);
      } else {
        events.push_back(&update);
      }
    }
  }
  AddEventChunks(id, events, group);
  if (auto it = batch.logs.find(id); it != batch.logs.end()) {
    for (const LogLine& line : it->second) {
      if (line.seq() <= seqs->last_log) {
        return absl::FailedPreconditionError(absl::StrCat("AppendLogs(", id, "): seq ", line.seq(),
                                                          " is not greater than the previous seq ",
                                                          seqs->last_log, "; nothing was written"));
      }
      seqs->last_log = line.seq();
    }
    local->logs[id] = it->second;
  }
  if (seqs->last_update > seqs->reserved_update || seqs->last_log > seqs->reserved_log) {
    seqs->reserved_update = std::max(seqs->reserved_update, seqs->last_update + options_.seq_block);
    seqs->reserved_log = std::max(seqs->reserved_log, seqs->last_log + options_.seq_block);
    group->Add({SeqKey(id), FormatReserved(seqs->reserved_update, seqs->reserved_log)});
  }
  return absl::OkStatus();
}

absl::Status EtcdStore::Write(const WriteBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  std::vector<Group> groups;
  Group& meta = groups.emplace_back();
  meta.what = "meta";
  for (const auto& [key, value] : batch.meta) {
    if (key == kSchemaVersionKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("SetMeta: key \"", key, "\" is reserved by the store"));
    }
    meta.Add({MetaKey(key), value});
  }
  // Deleted jobs first, in transactions of their own: etcd refuses a transaction that
  // deletes and writes the same key.
  std::vector<Group> deletes;
  for (const std::string& id : batch.delete_jobs) {
    Group& group = deletes.emplace_back();
    group.what = absl::StrCat("deleting job ", id);
    group.Add({JobKey(id), std::nullopt});
    group.Add({EventPrefix(id), std::nullopt, /*prefix=*/true});
    group.Add({SeqKey(id), std::nullopt});
  }
  std::set<std::string> ids;
  for (const Job& job : batch.jobs) ids.insert(job.id());
  for (const auto& [id, updates] : batch.updates) ids.insert(id);
  for (const auto& [id, lines] : batch.logs) ids.insert(id);
  WriteBatch local;
  local.delete_jobs = batch.delete_jobs;
  std::map<std::string, Seqs> next;
  for (const std::string& id : ids) {
    Group group;
    RETURN_IF_ERROR(PlanJob(id, batch, &group, &local, &next[id]));
    if (!group.writes.empty()) groups.push_back(std::move(group));
  }
  if (!deletes.empty()) {
    RETURN_IF_ERROR(CommitGroups(deletes));
    for (const std::string& id : batch.delete_jobs) seqs_.erase(id);
  }
  RETURN_IF_ERROR(CommitGroups(groups));
  for (auto& [id, seqs] : next) seqs_[id] = seqs;
  return local_->Write(local);
}

absl::Status EtcdStore::CommitGroups(const std::vector<Group>& groups) {
  const int64_t max_bytes = options_.max_request_bytes - kRequestOverheadBytes;
  std::vector<EtcdWrite> txn;
  int64_t txn_bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (txn.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(kv_->Commit(fence_, txn).status());
    ++etcd_commits_;
    txn.clear();
    txn_bytes = 0;
    return absl::OkStatus();
  };
  for (const Group& group : groups) {
    if (group.writes.empty()) continue;
    const int64_t ops = static_cast<int64_t>(group.writes.size());
    if (ops > options_.max_txn_ops || group.bytes > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("EtcdStore: ", group.what, " needs ", ops, " writes of ", group.bytes,
                       " bytes in one etcd transaction, over etcd's limits (--max-txn-ops=",
                       options_.max_txn_ops, ", --max-request-bytes=", options_.max_request_bytes,
                       "); raise them on etcd and in --store's max_txn_ops/max_request_bytes"));
    }
    if (static_cast<int64_t>(txn.size()) + ops > options_.max_txn_ops ||
        txn_bytes + group.bytes > max_bytes) {
      RETURN_IF_ERROR(flush());
    }
    txn.insert(txn.end(), group.writes.begin(), group.writes.end());
    txn_bytes += group.bytes;
  }
  return flush();
}

absl::StatusOr<std::vector<Job>> EtcdStore::LoadJobs() {
  ASSIGN_OR_RETURN(std::vector<EtcdKeyValue> kvs,
                   kv_->ListAll(absl::StrCat(options_.prefix, "job/")));
  // Creation order: the revision that created each key (a replace keeps it). Jobs created
  // in one transaction share it; among them, the coordinator's ids (zero-padded, then
  // longer) order as numbers.
  std::stable_sort(kvs.begin(), kvs.end(), [](const EtcdKeyValue& a, const EtcdKeyValue& b) {
    if (a.create_revision != b.create_revision) return a.create_revision < b.create_revision;
    return a.key.size() != b.key.size() ? a.key.size() < b.key.size() : a.key < b.key;
  });
  std::vector<Job> jobs(kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    if (!Parse(kvs[i].value, &jobs[i])) {
      return absl::DataLossError(
          absl::StrCat("LoadJobs: stored job ", kvs[i].key, " does not parse"));
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<JobUpdate>> EtcdStore::ReadUpdates(const std::string& job_id,
                                                              int64_t after_seq, int64_t limit,
                                                              bool events_only) {
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("ReadUpdates: negative limit ", limit));
  }
  // A chunk is keyed by its last seq: the chunks from after_seq + 1 on hold every event
  // after after_seq, and `limit` chunks at least `limit` events.
  ASSIGN_OR_RETURN(EtcdRange chunks,
                   kv_->Range(EventKey(job_id, std::max<int64_t>(after_seq, -1) + 1),
                              EventPrefix(job_id), limit));
  std::vector<JobUpdate> out;
  for (const EtcdKeyValue& chunk : chunks.kvs) {
    google::protobuf::io::ArrayInputStream in(chunk.value.data(),
                                              static_cast<int>(chunk.value.size()));
    for (;;) {
      JobUpdate update;
      bool clean_eof = false;
      if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&update, &in, &clean_eof)) {
        if (clean_eof) break;
        return absl::DataLossError(
            absl::StrCat("ReadUpdates(", job_id, "): ", chunk.key, " does not parse"));
      }
      if (update.seq() > after_seq) out.push_back(std::move(update));
    }
  }
  if (limit > 0 && static_cast<int64_t>(out.size()) > limit) out.resize(limit);
  if (events_only) return out;
  ASSIGN_OR_RETURN(std::vector<JobUpdate> points,
                   local_->ReadUpdates(job_id, after_seq, limit, false));
  std::vector<JobUpdate> merged;
  merged.reserve(out.size() + points.size());
  std::merge(std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()),
             std::make_move_iterator(points.begin()), std::make_move_iterator(points.end()),
             std::back_inserter(merged),
             [](const JobUpdate& a, const JobUpdate& b) { return a.seq() < b.seq(); });
  if (limit > 0 && static_cast<int64_t>(merged.size()) > limit) merged.resize(limit);
  return merged;
}

absl::StatusOr<int64_t> EtcdStore::LastUpdateSeq(const std::string& job_id) {
  return SeqsOf(job_id).last_update;
}

absl::StatusOr<std::vector<LogLine>> EtcdStore::ReadLogs(const std::string& job_id, int32_t rank,
                                                         int64_t after_seq, int64_t limit) {
  return local_->ReadLogs(job_id, rank, after_seq, limit);
}

absl::StatusOr<int64_t> EtcdStore::LastLogSeq(const std::string& job_id) {
  return SeqsOf(job_id).last_log;
}

absl::StatusOr<int64_t> EtcdStore::NthLastLogSeq(const std::string& job_id, int32_t rank,
                                                 int64_t since_us, int64_t n) {
  return local_->NthLastLogSeq(job_id, rank, since_us, n);
}

absl::StatusOr<int64_t> EtcdStore::Prune(const std::string& job_id, const RetentionLimits& limits) {
  return local_->Prune(job_id, limits);
}

absl::StatusOr<int64_t> EtcdStore::DiskBytes() { return local_->DiskBytes(); }

absl::StatusOr<std::string> EtcdStore::GetMeta(const std::string& key) {
  absl::StatusOr<EtcdKeyValue> kv = kv_->Get(MetaKey(key));
  if (absl::IsNotFound(kv.status())) {
    return absl::NotFoundError(absl::StrCat("GetMeta: no key \"", key, "\""));
  }
  if (!kv.ok()) return kv.status();
  return std::move(kv->value);
}

}  // namespace baton::coordinator
