#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "coordinator/jobs/stream_sink.h"
#include "coordinator/store/store.h"

namespace baton::coordinator {

using UpdateSink = StreamSink<baton::v1::JobUpdate>;
using LogSink = StreamSink<baton::v1::LogLine>;

// Which log lines a GetLogs stream sends (GetLogsRequest, validated).
struct LogQuery {
  int32_t rank = -1;      // -1: all ranks
  int64_t after_seq = 0;  // only lines with seq > after_seq
  bool follow = false;    // then live lines until the job ends
  int64_t tail = 0;       // > 0: only the last `tail` stored matching lines, then live ones
  int64_t since_us = 0;   // > 0: only lines whose time is at or after (Unix microseconds)
};

// The streams following jobs (WatchJob, GetLogs --follow), and how history reaches them:
// from the store a page at a time, and only while the client keeps up (its sink is not
// backlogged), so a job's whole history is never loaded at once nor queued for a slow
// client. A stream is first *catching up* (reading stored history after its cursor), then
// *live* (sent each update as it is committed). Committed updates are always in the store
// first, so switching from one to the other loses and repeats nothing.
//
// Threading: not thread-safe; the coordinator's event loop owns it, like JobManager.
class JobStreams {
 public:
  // `store` must outlive this. `snapshot(job_id)` is the job as clients see it now.
  JobStreams(Store* store, std::function<baton::v1::Job(const std::string&)> snapshot,
             int64_t page = 1000);

  // A WatchJob: a snapshot, then every update with seq > after_seq, live until the job
  // ends (End), then Finish(OK). `ended`: the job already ended. `events_only`: no metric
  // points, in history or live.
  absl::Status Watch(const std::string& job_id, int64_t after_seq, bool ended,
                     std::shared_ptr<UpdateSink> sink, bool events_only = false);
  // A GetLogs: the stored lines `query` selects; with `query.follow`, live lines until the
  // job ends. A store error finding the tail is returned (nothing was sent).
  absl::Status Follow(const std::string& job_id, const LogQuery& query, bool ended,
                      std::shared_ptr<LogSink> sink);

  // Committed updates (and, after a state change, a fresh snapshot) to the live watchers.
  void Publish(const std::string& job_id, const std::vector<baton::v1::JobUpdate>& updates);
  // Committed log lines to the live followers.
  void PublishLogs(const std::string& job_id, const std::vector<baton::v1::LogLine>& lines);
  // The job ended: live streams finish; catching-up ones finish once caught up.
  void End(const std::string& job_id);

  // Sends more history to catching-up streams whose clients keep up. Call often (the
  // reconcile does, and Watch/Follow once). Store read errors end that stream with them.
  void Pump();

  // Streams still catching up (for tests and metrics).
  size_t catching_up() const;

 private:
  template <typename Sink>
  struct Stream {
    std::shared_ptr<Sink> sink;
    int64_t cursor = 0;   // last seq sent
    int32_t rank = -1;    // logs only: -1 all ranks
    int64_t since_us = 0;  // logs only: skip lines older than this
    bool live = false;    // caught up
    bool follow = true;   // false: finish once caught up (GetLogs without follow)
    bool events_only = false;  // watchers only: no metric points
  };
  struct Streams {
    std::vector<Stream<UpdateSink>> watchers;
    std::vector<Stream<LogSink>> followers;
    bool ended = false;
  };

  // One page of history to a catching-up watcher; false once it is done with it (live or
  // finished or gone).
  bool PumpWatcher(const std::string& job_id, bool ended, Stream<UpdateSink>& s);
  bool PumpFollower(const std::string& job_id, bool ended, Stream<LogSink>& s);
  void Prune(const std::string& job_id);

  Store* const store_;
  const std::function<baton::v1::Job(const std::string&)> snapshot_;
  const int64_t page_;
  std::map<std::string, Streams> jobs_;  // jobs with at least one stream
};

}  // namespace baton::coordinator
