#include "coordinator/jobs/job_streams.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {
namespace {

// At most this many pages per stream per Pump(): bounds one pass of the event loop.
constexpr int kPagesPerPump = 8;

template <typename S>
void EraseDone(std::vector<S>& streams, const std::vector<bool>& done) {
  size_t i = 0;
  streams.erase(std::remove_if(streams.begin(), streams.end(), [&](const S&) { return done[i++]; }),
                streams.end());
}

// Finishes (OK) and drops the live streams; catching-up ones finish once caught up.
template <typename S>
void FinishLive(std::vector<S>& streams) {
  std::vector<bool> done(streams.size(), false);
  for (size_t i = 0; i < streams.size(); ++i) {
    if (!streams[i].live) continue;
    streams[i].sink->Finish(absl::OkStatus());
    done[i] = true;
  }
  EraseDone(streams, done);
}

// Up to kPagesPerPump pages of stored history (`read(cursor)`: the next page after
// `cursor`) to a catching-up stream while its client keeps up; once a page comes back short
// everything committed so far was sent, and the stream goes live, or finishes if the job
// ended or it does not follow. False once the stream is done with (finished or gone).
template <typename S, typename Read, typename Keep>
bool PumpHistory(S& s, bool ended, int64_t page_size, Read read, Keep keep) {
  if (s.live) return true;
  for (int pages = 0; pages < kPagesPerPump && !s.sink->Backlogged(); ++pages) {
    auto page = read(s.cursor);
    if (!page.ok()) {
      s.sink->Finish(page.status());
      return false;
    }
    for (const auto& item : *page) {
      if (keep(item) && !s.sink->Push(item)) return false;
      s.cursor = item.seq();
    }
    if (static_cast<int64_t>(page->size()) == page_size) continue;
    if (ended || !s.follow) {
      s.sink->Finish(absl::OkStatus());
      return false;
    }
    s.live = true;
    return true;
  }
  return true;  // more next time
}

// Whether `line` was written at or after `since_us` (0: no bound).
bool NotBefore(const baton::v1::LogLine& line, int64_t since_us) {
  return since_us <= 0 || absl::ToUnixMicros(FromProto(line.time())) >= since_us;
}

}  // namespace

JobStreams::JobStreams(Store* store, std::function<baton::v1::Job(const std::string&)> snapshot,
                       int64_t page)
    : store_(store), snapshot_(std::move(snapshot)), page_(page) {}

absl::Status JobStreams::Watch(const std::string& job_id, int64_t after_seq, bool ended,
                               std::shared_ptr<UpdateSink> sink, bool events_only) {
  baton::v1::JobUpdate snapshot;
  *snapshot.mutable_snapshot() = snapshot_(job_id);
  if (!sink->Push(snapshot)) return absl::OkStatus();
  Streams& streams = jobs_[job_id];
  streams.ended = streams.ended || ended;
  Stream<UpdateSink> s;
  s.sink = std::move(sink);
  s.cursor = after_seq;
  s.events_only = events_only;
  streams.watchers.push_back(std::move(s));
  if (!PumpWatcher(job_id, streams.ended, streams.watchers.back())) {
    streams.watchers.pop_back();
  }
  Prune(job_id);
  return absl::OkStatus();
}

absl::Status JobStreams::Follow(const std::string& job_id, const LogQuery& query, bool ended,
                                std::shared_ptr<LogSink> sink) {
  int64_t cursor = query.after_seq;
  if (query.tail > 0) {
    ASSIGN_OR_RETURN(const int64_t first,
                     store_->NthLastLogSeq(job_id, query.rank, query.since_us, query.tail));
    if (first > 0) cursor = std::max(cursor, first - 1);
  }
  Streams& streams = jobs_[job_id];
  streams.ended = streams.ended || ended;
  Stream<LogSink> s;
  s.sink = std::move(sink);
  s.cursor = cursor;
  s.rank = query.rank;
  s.since_us = query.since_us;
  s.follow = query.follow;
  streams.followers.push_back(std::move(s));
  if (!PumpFollower(job_id, streams.ended, streams.followers.back())) {
    streams.followers.pop_back();
  }
  Prune(job_id);
  return absl::OkStatus();
}

bool JobStreams::PumpWatcher(const std::string& job_id, bool ended, Stream<UpdateSink>& s) {
  return PumpHistory(
      s, ended, page_,
      [&](int64_t cursor) {
        return store_->ReadUpdates(job_id, cursor, page_, s.events_only);
      },
      [](const baton::v1::JobUpdate&) { return true; });
}

bool JobStreams::PumpFollower(const std::string& job_id, bool ended, Stream<LogSink>& s) {
  return PumpHistory(
      s, ended, page_,
      [&](int64_t cursor) { return store_->ReadLogs(job_id, s.rank, cursor, page_); },
      [&](const baton::v1::LogLine& line) { return NotBefore(line, s.since_us); });
}

void JobStreams::Publish(const std::string& job_id,
                         const std::vector<baton::v1::JobUpdate>& updates) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || updates.empty()) return;
  bool state_change = false;
  for (const baton::v1::JobUpdate& u : updates) {
    state_change |= u.has_event() && u.event().to_state() != baton::v1::JOB_STATE_UNSPECIFIED;
  }
  baton::v1::JobUpdate snapshot;
  if (state_change) *snapshot.mutable_snapshot() = snapshot_(job_id);
  auto& watchers = it->second.watchers;
  std::vector<bool> done(watchers.size(), false);
  for (size_t i = 0; i < watchers.size(); ++i) {
    Stream<UpdateSink>& s = watchers[i];
    if (!s.live) continue;  // it reads these from the store
    for (const baton::v1::JobUpdate& u : updates) {
      if (!(s.events_only && u.has_metric()) && !s.sink->Push(u)) done[i] = true;
      s.cursor = u.seq();
    }
    if (state_change && !done[i] && !s.sink->Push(snapshot)) done[i] = true;
  }
  EraseDone(watchers, done);
  Prune(job_id);
}

void JobStreams::PublishLogs(const std::string& job_id,
                             const std::vector<baton::v1::LogLine>& lines) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  auto& followers = it->second.followers;
  std::vector<bool> done(followers.size(), false);
  for (size_t i = 0; i < followers.size(); ++i) {
    Stream<LogSink>& s = followers[i];
    if (!s.live) continue;
    for (const baton::v1::LogLine& line : lines) {
      s.cursor = line.seq();
      if (s.rank >= 0 && s.rank != line.rank()) continue;
      if (!NotBefore(line, s.since_us)) continue;
      if (!s.sink->Push(line)) done[i] = true;
    }
  }
  EraseDone(followers, done);
  Prune(job_id);
}

void JobStreams::End(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  it->second.ended = true;
  FinishLive(it->second.watchers);
  FinishLive(it->second.followers);
  Prune(job_id);
}

void JobStreams::Pump() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const std::string job_id = it->first;
    Streams& streams = it->second;
    ++it;  // Prune may erase the entry
    std::vector<bool> done(streams.watchers.size(), false);
    for (size_t i = 0; i < streams.watchers.size(); ++i) {
      done[i] = !PumpWatcher(job_id, streams.ended, streams.watchers[i]);
    }
    EraseDone(streams.watchers, done);
    done.assign(streams.followers.size(), false);
    for (size_t i = 0; i < streams.followers.size(); ++i) {
      done[i] = !PumpFollower(job_id, streams.ended, streams.followers[i]);
    }
    EraseDone(streams.followers, done);
    Prune(job_id);
  }
}

size_t JobStreams::catching_up() const {
  size_t n = 0;
  for (const auto& [id, streams] : jobs_) {
    for (const auto& s : streams.watchers) n += s.live ? 0 : 1;
    for (const auto& s : streams.followers) n += s.live ? 0 : 1;
  }
  return n;
}

void JobStreams::Prune(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second.watchers.empty() && it->second.followers.empty()) {
    jobs_.erase(it);
  }
}

}  // namespace baton::coordinator
