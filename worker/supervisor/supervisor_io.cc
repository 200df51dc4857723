// The Supervisor's I/O thread: the ranks' pipes and exits (see supervisor.h).

#include "worker/supervisor/supervisor.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/time/proto_time.h"
#include "worker/trainer/contract/metrics_line.h"

namespace baton::worker {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

void Supervisor::IoLoop() {
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<ExitWatch> watches;
  // Wakes poll() once the earliest drain deadline passed on the clock.
  Clock::Timer drain_timer;
  absl::Time drain_timer_at = absl::InfiniteFuture();
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (io_stop_) break;
      for (auto& ch : incoming_channels_) channels.push_back(std::move(ch));
      incoming_channels_.clear();
      for (auto& w : incoming_watches_) watches.push_back(std::move(w));
      incoming_watches_.clear();
    }
    absl::Time drain_deadline = absl::InfiniteFuture();
    for (const ExitWatch& w : watches) drain_deadline = std::min(drain_deadline, w.drain_deadline);
    if (drain_deadline != drain_timer_at) {
      drain_timer_at = drain_deadline;
      drain_timer = drain_deadline == absl::InfiniteFuture()
                        ? Clock::Timer()
                        : clock_->After(drain_deadline - clock_->Now(), [this] { Wake(); });
    }
    PollOnce(channels, watches, /*block=*/drain_deadline > clock_->Now());
    PublishDrainedExits(channels, watches);
  }
  for (auto& ch : channels) CloseChannel(*ch);
}

void Supervisor::PollOnce(std::vector<std::unique_ptr<Channel>>& channels,
                          std::vector<ExitWatch>& watches, bool block) {
  std::vector<struct pollfd> pfds;
  pfds.push_back({wake_read_.get(), POLLIN, 0});
  for (const auto& ch : channels) pfds.push_back({ch->fd.get(), POLLIN, 0});
  for (const ExitWatch& w : watches) {
    pfds.push_back({w.exit.has_value() ? -1 : w.process->exit_fd(), POLLIN, 0});
  }
  // Every wakeup is an event: output, an exit, Wake() (new work, shutdown, a drain timer).
  if (::poll(pfds.data(), pfds.size(), block ? -1 : 0) < 0 && errno != EINTR) {
    BATON_LOG(ERROR) << "poll: " << std::strerror(errno);
  }
  if (pfds[0].revents != 0) {
    char buf[256];
    while (::read(wake_read_.get(), buf, sizeof(buf)) > 0) {
    }
  }

  // Output first, so the last lines of a rank precede its exit.
  std::vector<bool> closed(channels.size(), false);
  for (size_t i = 0; i < channels.size(); ++i) {
    if (pfds[1 + i].revents != 0 && !ReadChannel(*channels[i])) closed[i] = true;
  }
  const size_t watch_base = 1 + channels.size();
  for (size_t i = 0; i < watches.size(); ++i) {
    if (watches[i].exit.has_value() || pfds[watch_base + i].revents == 0) continue;
    watches[i].exit = watches[i].process->TryCollectExit();
    if (watches[i].exit.has_value()) {
      watches[i].drain_deadline = clock_->Now() + options_.drain_timeout;
    }
  }
  for (size_t i = 0; i < channels.size(); ++i) {
    if (closed[i]) CloseChannel(*channels[i]);
  }
  for (size_t i = channels.size(); i-- > 0;) {
    if (closed[i]) channels.erase(channels.begin() + i);
  }
}

void Supervisor::PublishDrainedExits(std::vector<std::unique_ptr<Channel>>& channels,
                                     std::vector<ExitWatch>& watches) {
  const absl::Time now = clock_->Now();
  for (size_t i = watches.size(); i-- > 0;) {
    ExitWatch& w = watches[i];
    if (!w.exit.has_value()) continue;
    const bool open = std::any_of(channels.begin(), channels.end(),
                                  [&](const auto& ch) { return ch->key == w.key; });
    if (open && now < w.drain_deadline) continue;
    for (size_t c = channels.size(); c-- > 0;) {
      if (!(channels[c]->key == w.key)) continue;
      CloseChannel(*channels[c]);
      channels.erase(channels.begin() + c);
    }
    PublishExit(w.key, *w.exit);
    watches.erase(watches.begin() + i);
  }
}

bool Supervisor::ReadChannel(Channel& ch) {
  char buf[kReadChunk];
  const ssize_t n = ::read(ch.fd.get(), buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;
  if (ch.log_file.valid() && !ch.log_capped) {
    // At most max_rank_log_bytes on disk, then one marker line.
    const int64_t room = std::max<int64_t>(0, options_.max_rank_log_bytes - ch.log_bytes);
    const size_t keep = static_cast<size_t>(std::min<int64_t>(room, n));
    absl::Status s = WriteAll(ch.log_file.get(), buf, keep);
    ch.log_bytes += static_cast<int64_t>(keep);
    if (s.ok() && keep < static_cast<size_t>(n)) {
      const std::string marker = absl::StrCat(
          "\n[baton: this log reached its limit of ", options_.max_rank_log_bytes,
          " bytes (the worker's --max_rank_log_bytes); the rank's further output is not "
          "kept here]\n");
      s = WriteAll(ch.log_file.get(), marker.data(), marker.size());
      ch.log_capped = true;
      capped_rank_logs_.fetch_add(1);
    }
    if (!s.ok()) {
      BATON_LOG(WARNING) << Describe(ch.key.job_id, ch.key.generation, ch.key.rank)
                         << ": cannot append to its log file: " << s;
      ch.log_file.Reset();
    }
  }
  ch.splitter.Feed(absl::string_view(buf, static_cast<size_t>(n)),
                   [&](LineSplitter::Line line) { EmitLine(ch, std::move(line)); });
  return true;
}

void Supervisor::CloseChannel(Channel& ch) {
  ch.splitter.Finish([&](LineSplitter::Line line) { EmitLine(ch, std::move(line)); });
  ReportDroppedLines(ch, clock_->Now());
  if (ch.malformed > 1) {
    BATON_LOG(WARNING) << Describe(ch.key.job_id, ch.key.generation, ch.key.rank) << ": "
                       << ch.malformed << " malformed metrics lines ignored in total";
  }
  ch.fd.Reset();
  ch.log_file.Reset();
}

void Supervisor::EmitLine(Channel& ch, LineSplitter::Line line) {
  const absl::Time now = clock_->Now();
  if (ch.kind == Channel::Kind::kMetrics) {
    if (absl::StripAsciiWhitespace(line.text).empty() && !line.truncated) return;
    absl::StatusOr<baton::v1::MetricPoint> point =
        line.truncated ? absl::InvalidArgumentError(absl::StrCat("metrics line longer than ",
                                                                 options_.max_line_bytes, " bytes"))
                       : ParseMetricsLine(line.text);
    if (!point.ok()) {
      if (ch.malformed++ == 0) {
        BATON_LOG(WARNING) << Describe(ch.key.job_id, ch.key.generation, ch.key.rank)
                           << ": ignoring malformed metrics line (" << point.status()
                           << "); further ones are only counted";
      }
      return;
    }
    *point->mutable_time() = ToProto(now);
    point->set_generation(ch.key.generation);
    point->set_rank(ch.key.rank);
    listener_->OnMetricPoint(ch.key.job_id, *std::move(point));
    return;
  }
  // At most max_rank_log_lines_per_second per stream and second of the clock.
  if (now - ch.window_start >= absl::Seconds(1)) {
    ReportDroppedLines(ch, now);
    ch.window_start = now;
    ch.window_lines = 0;
  }
  if (++ch.window_lines > options_.max_rank_log_lines_per_second) {
    ++ch.window_dropped;
    dropped_log_lines_.fetch_add(1);
    return;
  }
  RelayLine(ch, SanitizeUtf8(line.text) + (line.truncated ? " [line truncated]" : ""), now);
}

void Supervisor::RelayLine(const Channel& ch, std::string text, absl::Time now) {
  baton::v1::LogLine out;
  out.set_generation(ch.key.generation);
  out.set_rank(ch.key.rank);
  out.set_stream(ch.kind == Channel::Kind::kStdout ? baton::v1::LogLine::STREAM_STDOUT
                                                   : baton::v1::LogLine::STREAM_STDERR);
  out.set_text(std::move(text));
  *out.mutable_time() = ToProto(now);
  listener_->OnLogLine(ch.key.job_id, std::move(out));
}

void Supervisor::ReportDroppedLines(Channel& ch, absl::Time now) {
  if (ch.window_dropped == 0) return;
  RelayLine(ch,
            absl::StrCat("[baton: ", ch.window_dropped, " more line(s) of this rank's ",
                         ch.kind == Channel::Kind::kStdout ? "stdout" : "stderr",
                         " were not relayed: over the worker's --max_rank_log_lines_per_second=",
                         options_.max_rank_log_lines_per_second,
                         "; the rank's log file on the worker has them, up to "
                         "--max_rank_log_bytes]"),
            now);
  ch.window_dropped = 0;
}

void Supervisor::PublishExit(const RankKey& key, const baton::v1::ProcessExit& exit) {
  {
    absl::MutexLock lock(&mu_);
    auto it = assignments_.find({key.job_id, key.generation});
    if (it == assignments_.end()) return;
    for (RankEntry& r : it->second.ranks) {
      if (r.info.rank() != key.rank) continue;
      const std::string reason = exit.signal() != 0
                                     ? absl::StrCat("Exited: signal ", exit.signal())
                                     : absl::StrCat("Exited: code ", exit.exit_code());
      if (!TransitionLocked(it->second, r, RankState::kExited, reason).ok()) return;
      *r.info.mutable_exit() = exit;
      if (!exit.has_time()) *r.info.mutable_exit()->mutable_time() = ToProto(clock_->Now());
      r.kill_deadline = absl::InfiniteFuture();
    }
  }
  listener_->OnReportsPending();
}

}  // namespace baton::worker
