#include "coordinator/policy/preflight.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/link_bandwidth.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The host's bandwidth: the lower of its known directions; -1 if none is known.
double Score(const HostVerdict& h) {
  if (h.send_bps < 0) return h.recv_bps;
  if (h.recv_bps < 0) return h.send_bps;
  return std::min(h.send_bps, h.recv_bps);
}

}  // namespace

std::vector<std::vector<int>> PreflightSendTo(int n) {
  std::vector<std::vector<int>> out(std::max(n, 0));
  if (n == 2) {
    out[0] = {1};
    out[1] = {0};
  } else if (n >= 3) {
    for (int i = 0; i < n; ++i) out[i] = {(i + 1) % n, (i + 2) % n};
  }
  return out;
}

std::string FormatRate(double bps) {
  if (bps >= 1e9) return absl::StrFormat("%.3g GB/s", bps / 1e9);
  if (bps >= 1e6) return absl::StrFormat("%.3g MB/s", bps / 1e6);
  if (bps >= 1e3) return absl::StrFormat("%.3g kB/s", bps / 1e3);
  return absl::StrFormat("%.3g B/s", bps);
}

PreflightVerdict JudgePreflight(const std::vector<std::string>& participants,
                                const std::map<std::string, baton::v1::PreflightResult>& results,
                                double min_fraction, absl::Duration waited, bool judge_bandwidth) {
  PreflightVerdict verdict;
  const int n = static_cast<int>(participants.size());
  std::map<std::string, int> index;
  for (int i = 0; i < n; ++i) index[participants[i]] = i;
  // Per host: the best link and the errors each way, over the links of the answers.
  std::vector<double> best_in(n, -1);
  std::vector<absl::Duration> latencies;
  std::vector<std::vector<std::string>> errors_out(n), errors_in(n);
  std::vector<int> links_in(n, 0);
  for (const auto& [from, r] : results) {
    auto f = index.find(from);
    if (f == index.end()) continue;
    for (const baton::v1::LinkMeasurement& l : r.links()) {
      auto t = index.find(l.peer_worker_id());
      if (t == index.end()) continue;
      ++links_in[t->second];
      best_in[t->second] = std::max(best_in[t->second], LinkBandwidth(l));
      if (l.error().empty()) latencies.push_back(FromProto(l.connect_latency()));
      if (!l.error().empty()) {
        errors_out[f->second].push_back(absl::StrCat("to ", l.peer_worker_id(), ": ", l.error()));
        errors_in[t->second].push_back(absl::StrCat("from ", from, ": ", l.error()));
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    HostVerdict h;
    h.worker_id = participants[i];
    auto r = results.find(h.worker_id);
    if (r == results.end()) {
      h.kind = HostVerdict::Kind::kFailed;
      h.reason = absl::StrCat("no pre-flight answer within ", absl::FormatDuration(waited));
      verdict.hosts.push_back(std::move(h));
      continue;
    }
    std::vector<std::string> failed_checks;
    for (const baton::v1::HostCheck& c : r->second.checks()) {
      if (!c.ok()) failed_checks.push_back(absl::StrCat(c.name(), ": ", c.detail()));
    }
    if (r->second.links_size() > 0) {
      h.send_bps = 0;
      for (const baton::v1::LinkMeasurement& l : r->second.links()) {
        h.send_bps = std::max(h.send_bps, LinkBandwidth(l));
      }
    }
    if (links_in[i] > 0) h.recv_bps = best_in[i];
    if (!failed_checks.empty()) {
      h.kind = HostVerdict::Kind::kFailed;
      h.reason = absl::StrJoin(failed_checks, "; ");
    } else if (n >= 3 && h.send_bps == 0) {
      h.kind = HostVerdict::Kind::kFailed;
      h.reason =
          absl::StrCat("reached none of its peers (", absl::StrJoin(errors_out[i], "; "), ")");
    } else if (n >= 3 && h.recv_bps == 0) {
      h.kind = HostVerdict::Kind::kFailed;
      h.reason =
          absl::StrCat("none of its peers reached it (", absl::StrJoin(errors_in[i], "; "), ")");
    }
    verdict.hosts.push_back(std::move(h));
  }
  if (!latencies.empty()) {
    std::nth_element(latencies.begin(), latencies.begin() + latencies.size() / 2, latencies.end());
    verdict.median_latency = latencies[latencies.size() / 2];
  }
  std::vector<double> scores;
  for (const HostVerdict& h : verdict.hosts) {
    if (h.kind == HostVerdict::Kind::kOk && Score(h) >= 0) scores.push_back(Score(h));
  }
  if (!judge_bandwidth || n < 3 || scores.size() < 3) return verdict;
  verdict.bandwidth_judged = true;
  verdict.median_bps = Median(scores);
  if (min_fraction <= 0) return verdict;
  for (HostVerdict& h : verdict.hosts) {
    const double score = Score(h);
    if (h.kind != HostVerdict::Kind::kOk || score < 0 ||
        score >= min_fraction * verdict.median_bps) {
      continue;
    }
    h.kind = HostVerdict::Kind::kSlow;
    h.reason = absl::StrFormat(
        "slow: sends at best %s, receives at best %s: %.3g%% of the gang's median %s (below "
        "%.3g%%)",
        h.send_bps < 0 ? "(unmeasured)" : FormatRate(h.send_bps),
        h.recv_bps < 0 ? "(unmeasured)" : FormatRate(h.recv_bps), 100 * score / verdict.median_bps,
        FormatRate(verdict.median_bps), 100 * min_fraction);
  }
  return verdict;
}

std::vector<const HostVerdict*> HostsToLeaveOut(const PreflightVerdict& verdict, int gang_size,
                                                int min_workers) {
  std::vector<const HostVerdict*> bad;
  for (const HostVerdict& h : verdict.hosts) {
    if (h.kind != HostVerdict::Kind::kOk) bad.push_back(&h);
  }
  std::stable_sort(bad.begin(), bad.end(), [](const HostVerdict* a, const HostVerdict* b) {
    const bool af = a->kind == HostVerdict::Kind::kFailed;
    const bool bf = b->kind == HostVerdict::Kind::kFailed;
    if (af != bf) return af;
    return Score(*a) < Score(*b);
  });
  const int can_leave = std::max(0, gang_size - min_workers);
  if (static_cast<int>(bad.size()) > can_leave) bad.resize(can_leave);
  return bad;
}

std::string PreflightSummary(const PreflightVerdict& verdict, absl::Duration took) {
  std::string out = absl::StrCat(verdict.hosts.size(), " host(s) checked in ",
                                 absl::FormatDuration(absl::Trunc(took, absl::Milliseconds(1))));
  if (verdict.bandwidth_judged) {
    absl::StrAppend(&out, ", median bandwidth ", FormatRate(verdict.median_bps));
  }
  if (verdict.median_latency != absl::InfiniteDuration()) {
    absl::StrAppend(
        &out, ", median connect latency ",
        absl::FormatDuration(absl::Trunc(verdict.median_latency, absl::Microseconds(1))));
  }
  std::vector<std::string> bad;
  for (const HostVerdict& h : verdict.hosts) {
    if (h.kind != HostVerdict::Kind::kOk) bad.push_back(absl::StrCat(h.worker_id, " ", h.reason));
  }
  absl::StrAppend(&out,
                  bad.empty() ? ": all passed" : absl::StrCat(": ", absl::StrJoin(bad, "; ")));
  return out;
}

}  // namespace baton::coordinator
