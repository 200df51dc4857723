#include "worker/supervisor/output_pump.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/time/proto_time.h"
#include "worker/trainer/contract/metrics_line.h"
#include "worker/trainer/contract/rejoin_protocol.h"

namespace baton::worker {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

// "job J gen G rank R", for logs.
std::string Describe(const PumpedRank& r) {
  return absl::StrCat("job ", r.job_id, " gen ", r.generation, " rank ", r.rank);
}

}  // namespace

OutputPump::OutputPump(OutputPumpOptions options, Clock* clock, OutputPumpCallbacks callbacks)
    : options_(options), clock_(clock), callbacks_(std::move(callbacks)) {}

OutputPump::~OutputPump() { Stop(); }

absl::Status OutputPump::Start() {
  absl::Status s = MakePipe(&wake_read_, &wake_write_, O_NONBLOCK, O_NONBLOCK);
  if (!s.ok()) return s;
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void OutputPump::Add(RankPipes pipes) {
  {
    absl::MutexLock lock(&mu_);
    incoming_.push_back(std::move(pipes));  // After Stop(), kept unread.
  }
  Wake();
}

void OutputPump::Rebind(const PumpedRank& from, const PumpedRank& to, UniqueFd stdout_log,
                        UniqueFd stderr_log) {
  {
    absl::MutexLock lock(&mu_);
    rebinds_.push_back(RebindRequest{from, to, std::move(stdout_log), std::move(stderr_log)});
  }
  Wake();
}

void OutputPump::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  Wake();
  absl::MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

void OutputPump::Wake() {
  if (!wake_write_.valid()) return;
  const char byte = 1;
  (void)!::write(wake_write_.get(), &byte, 1);  // A full pipe already means "wake up".
}

void OutputPump::Loop() {
  // Wakes poll() once the earliest drain deadline passed on the clock.
  Clock::Timer drain_timer;
  absl::Time drain_timer_at = absl::InfiniteFuture();
  for (;;) {
    std::vector<RankPipes> added;
    std::vector<RebindRequest> rebinds;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
      added.swap(incoming_);
      rebinds.swap(rebinds_);
    }
    const size_t max_line = options_.max_line_bytes;
    for (RankPipes& p : added) {
      channels_.push_back(std::make_unique<Channel>(p.rank, Channel::Kind::kStdout,
                                                    std::move(p.stdout_fd), std::move(p.stdout_log),
                                                    max_line));
      channels_.push_back(std::make_unique<Channel>(p.rank, Channel::Kind::kStderr,
                                                    std::move(p.stderr_fd), std::move(p.stderr_log),
                                                    max_line));
      channels_.push_back(std::make_unique<Channel>(p.rank, Channel::Kind::kMetrics,
                                                    std::move(p.metrics_fd), UniqueFd(), max_line));
      if (p.rejoin_fd.valid()) {
        channels_.push_back(std::make_unique<Channel>(
            p.rank, Channel::Kind::kRejoin, std::move(p.rejoin_fd), UniqueFd(), max_line));
      }
      watches_.push_back(ExitWatch{p.rank, std::move(p.process), std::nullopt});
    }
    for (RebindRequest& r : rebinds) {
      for (auto& ch : channels_) {
        if (!(ch->rank == r.from)) continue;
        ch->rank = r.to;
        if (ch->kind == Channel::Kind::kStdout || ch->kind == Channel::Kind::kStderr) {
          ch->log_file =
              std::move(ch->kind == Channel::Kind::kStdout ? r.stdout_log : r.stderr_log);
          ch->log_bytes = 0;
          ch->log_capped = false;
        }
      }
      for (ExitWatch& w : watches_) {
        if (w.rank == r.from) w.rank = r.to;
      }
    }
    absl::Time drain_deadline = absl::InfiniteFuture();
    for (const ExitWatch& w : watches_) drain_deadline = std::min(drain_deadline, w.drain_deadline);
    if (drain_deadline != drain_timer_at) {
      drain_timer_at = drain_deadline;
      drain_timer = drain_deadline == absl::InfiniteFuture()
                        ? Clock::Timer()
                        : clock_->After(drain_deadline - clock_->Now(), [this] { Wake(); });
    }
    PollOnce(/*block=*/drain_deadline > clock_->Now());
    PublishDrainedExits();
  }
  for (auto& ch : channels_) CloseChannel(*ch);
  channels_.clear();
  watches_.clear();
}

void OutputPump::PollOnce(bool block) {
  std::vector<struct pollfd> pfds;
  pfds.push_back({wake_read_.get(), POLLIN, 0});
  for (const auto& ch : channels_) pfds.push_back({ch->fd.get(), POLLIN, 0});
  for (const ExitWatch& w : watches_) {
    pfds.push_back({w.exit.has_value() ? -1 : w.process->exit_fd(), POLLIN, 0});
  }
  // Every wakeup is an event: output, an exit, Wake() (new pipes, Stop, a drain timer).
  if (::poll(pfds.data(), pfds.size(), block ? -1 : 0) < 0 && errno != EINTR) {
    BATON_LOG(ERROR) << "poll: " << std::strerror(errno);
  }
  if (pfds[0].revents != 0) {
    char buf[256];
    while (::read(wake_read_.get(), buf, sizeof(buf)) > 0) {
    }
  }

  // Output first, so the last lines of a rank precede its exit.
  std::vector<bool> closed(channels_.size(), false);
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (pfds[1 + i].revents != 0 && !ReadChannel(*channels_[i])) closed[i] = true;
  }
  const size_t watch_base = 1 + channels_.size();
  for (size_t i = 0; i < watches_.size(); ++i) {
    if (watches_[i].exit.has_value() || pfds[watch_base + i].revents == 0) continue;
    watches_[i].exit = watches_[i].process->TryCollectExit();
    if (watches_[i].exit.has_value()) {
      watches_[i].drain_deadline = clock_->Now() + options_.drain_timeout;
    }
  }
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (closed[i]) CloseChannel(*channels_[i]);
  }
  for (size_t i = channels_.size(); i-- > 0;) {
    if (closed[i]) channels_.erase(channels_.begin() + i);
  }
}

void OutputPump::PublishDrainedExits() {
  const absl::Time now = clock_->Now();
  for (size_t i = watches_.size(); i-- > 0;) {
    ExitWatch& w = watches_[i];
    if (!w.exit.has_value()) continue;
    // Output still to drain; the rejoin socket carries none (and other processes, such as a
    // standby's shim, may hold its other end).
    const bool open = std::any_of(channels_.begin(), channels_.end(), [&](const auto& ch) {
      return ch->rank == w.rank && ch->kind != Channel::Kind::kRejoin;
    });
    if (open && now < w.drain_deadline) continue;
    for (size_t c = channels_.size(); c-- > 0;) {
      if (!(channels_[c]->rank == w.rank)) continue;
      CloseChannel(*channels_[c]);
      channels_.erase(channels_.begin() + c);
    }
    callbacks_.on_exit(w.rank, *w.exit);
    watches_.erase(watches_.begin() + i);
  }
}

bool OutputPump::ReadChannel(Channel& ch) {
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
      BATON_LOG(WARNING) << Describe(ch.rank) << ": cannot append to its log file: " << s;
      ch.log_file.Reset();
    }
  }
  ch.splitter.Feed(absl::string_view(buf, static_cast<size_t>(n)),
                   [&](LineSplitter::Line line) { EmitLine(ch, std::move(line)); });
  return true;
}

void OutputPump::CloseChannel(Channel& ch) {
  ch.splitter.Finish([&](LineSplitter::Line line) { EmitLine(ch, std::move(line)); });
  ReportDroppedLines(ch, clock_->Now());
  if (ch.malformed > 1) {
    BATON_LOG(WARNING) << Describe(ch.rank) << ": " << ch.malformed
                       << " malformed metrics lines ignored in total";
  }
  ch.fd.Reset();
  ch.log_file.Reset();
}

void OutputPump::EmitLine(Channel& ch, LineSplitter::Line line) {
  const absl::Time now = clock_->Now();
  if (ch.kind == Channel::Kind::kRejoin) {
    const std::optional<int64_t> waiting = trainer::ParseWaitingLine(line.text);
    if (waiting.has_value() && callbacks_.on_rejoin_waiting) {
      callbacks_.on_rejoin_waiting(ch.rank, *waiting);
    }
    return;
  }
  if (ch.kind == Channel::Kind::kMetrics) {
    if (absl::StripAsciiWhitespace(line.text).empty() && !line.truncated) return;
    absl::StatusOr<baton::v1::MetricPoint> point =
        line.truncated ? absl::InvalidArgumentError(absl::StrCat("metrics line longer than ",
                                                                 options_.max_line_bytes, " bytes"))
                       : ParseMetricsLine(line.text);
    if (!point.ok()) {
      if (ch.malformed++ == 0) {
        BATON_LOG(WARNING) << Describe(ch.rank) << ": ignoring malformed metrics line ("
                           << point.status() << "); further ones are only counted";
      }
      return;
    }
    *point->mutable_time() = ToProto(now);
    point->set_generation(ch.rank.generation);
    point->set_rank(ch.rank.rank);
    callbacks_.on_metric_point(ch.rank.job_id, *std::move(point));
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

void OutputPump::RelayLine(const Channel& ch, std::string text, absl::Time now) {
  baton::v1::LogLine out;
  out.set_generation(ch.rank.generation);
  out.set_rank(ch.rank.rank);
  out.set_stream(ch.kind == Channel::Kind::kStdout ? baton::v1::LogLine::STREAM_STDOUT
                                                   : baton::v1::LogLine::STREAM_STDERR);
  out.set_text(std::move(text));
  *out.mutable_time() = ToProto(now);
  callbacks_.on_log_line(ch.rank.job_id, std::move(out));
}

void OutputPump::ReportDroppedLines(Channel& ch, absl::Time now) {
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

}  // namespace baton::worker
