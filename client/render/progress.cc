#include "client/render/progress.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/render/output.h"
#include "client/render/views.h"
#include "common/time/proto_time.h"

namespace baton::cli {
namespace {

using baton::v1::JobUpdate;
using baton::v1::MetricPoint;

constexpr char kClearLine[] = "\r\x1b[K";

std::optional<double> Value(const MetricPoint& m, const std::string& key) {
  auto it = m.values().find(key);
  if (it == m.values().end()) return std::nullopt;
  return it->second;
}

}  // namespace

void ProgressTracker::Apply(const JobUpdate& update) {
  last_seq_ = std::max(last_seq_, update.seq());
  switch (update.update_case()) {
    case JobUpdate::kSnapshot:
      job_ = update.snapshot();
      break;
    case JobUpdate::kEvent:
      job_.set_generation(std::max(job_.generation(), update.event().generation()));
      if (update.event().to_state() != baton::v1::JOB_STATE_UNSPECIFIED) {
        job_.set_state(update.event().to_state());
      }
      break;
    case JobUpdate::kMetric: {
      const MetricPoint& m = update.metric();
      if (m.rank() != 0) break;
      if (!window_start_ || window_start_->generation() != m.generation() ||
          m.step() < latest_->step()) {
        window_start_ = m;  // new generation, or training rolled back to a checkpoint
      }
      latest_ = m;
      break;
    }
    case JobUpdate::UPDATE_NOT_SET:
      break;
  }
}

std::optional<double> ProgressTracker::StepRate() const {
  if (!latest_ || !window_start_) return std::nullopt;
  const double seconds =
      absl::ToDoubleSeconds(FromProto(latest_->time()) - FromProto(window_start_->time()));
  const int64_t steps = latest_->step() - window_start_->step();
  if (seconds <= 0 || steps <= 0) return std::nullopt;
  return steps / seconds;
}

std::optional<absl::Duration> ProgressTracker::Eta(absl::Time now) const {
  if (IsTerminal(job_.state()) || total_steps() <= 0 || !latest_) return std::nullopt;
  const std::optional<double> rate = StepRate();
  if (!rate) return std::nullopt;
  const int64_t remaining = std::max<int64_t>(0, total_steps() - latest_->step());
  absl::Duration eta = absl::Seconds(remaining / *rate) - (now - FromProto(latest_->time()));
  return std::max(eta, absl::ZeroDuration());
}

std::string RenderProgressLine(const ProgressTracker& tracker, absl::Time now) {
  std::vector<std::string> parts;
  const auto& m = tracker.latest_metric();
  const int64_t total = tracker.total_steps();
  if (m) {
    if (total > 0) {
      const int64_t pct = std::min<int64_t>(100, m->step() * 100 / total);
      parts.push_back(absl::StrCat("step ", m->step(), "/", total, " (", pct, "%)"));
    } else {
      parts.push_back(absl::StrCat("step ", m->step()));
    }
    if (auto loss = Value(*m, "loss")) parts.push_back(absl::StrCat("loss ", FormatMetric(*loss)));
    if (auto acc = Value(*m, "accuracy")) parts.push_back(absl::StrCat("acc ", FormatPercent(*acc)));
    if (auto sps = Value(*m, "samples_per_sec")) {
      parts.push_back(absl::StrFormat("%.0f samples/s", *sps));
    }
  }
  if (auto eta = tracker.Eta(now)) parts.push_back(absl::StrCat("ETA ", HumanDuration(*eta)));
  parts.push_back(JobStateName(tracker.job().state()));
  return absl::StrJoin(parts, "  ");
}

ProgressPrinter::ProgressPrinter(std::ostream& out, bool tty, const Clock& clock,
                                 absl::TimeZone tz, absl::Duration min_interval)
    : out_(out), tty_(tty), clock_(clock), tz_(tz), min_interval_(min_interval) {}

void ProgressPrinter::OnUpdate(const ProgressTracker& tracker, const JobUpdate& update) {
  switch (update.update_case()) {
    case JobUpdate::kEvent:
      if (line_drawn_) out_ << kClearLine;
      out_ << RenderEventLine(update.event(), tz_) << "\n";
      line_drawn_ = false;
      if (tty_) Draw(tracker);
      break;
    case JobUpdate::kSnapshot:
      if (tty_) Draw(tracker);
      break;
    case JobUpdate::kMetric:
      if (update.metric().rank() != 0) break;
      if (tty_) {
        Draw(tracker);
      } else {
        const absl::Time now = clock_.Now();
        if (!last_print_ || now - *last_print_ >= min_interval_) {
          out_ << RenderProgressLine(tracker, now) << "\n";
          last_print_ = now;
        }
      }
      break;
    case JobUpdate::UPDATE_NOT_SET:
      break;
  }
  out_.flush();
}

void ProgressPrinter::Draw(const ProgressTracker& tracker) {
  out_ << kClearLine << RenderProgressLine(tracker, clock_.Now());
  line_drawn_ = true;
}

void ProgressPrinter::Finish() {
  if (line_drawn_) out_ << "\n";
  line_drawn_ = false;
  out_.flush();
}

}  // namespace baton::cli
