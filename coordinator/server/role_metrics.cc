#include "coordinator/server/role_metrics.h"

#include "common/metrics_http.h"

namespace baton::coordinator {

void AppendRoleFamilies(bool leader, const std::function<int64_t()>& election_errors,
                        std::vector<prometheus::MetricFamily>& out) {
  using prometheus::MetricType;
  prometheus::MetricFamily role = MakeFamily(
      "baton_coordinator_leader",
      "1 if this coordinator leads (serves jobs and workers), 0 if it is a standby replica.",
      MetricType::Gauge);
  role.metric.push_back(MakeSample({}, leader ? 1 : 0, MetricType::Gauge));
  out.push_back(std::move(role));
  if (!election_errors) return;
  prometheus::MetricFamily errors =
      MakeFamily("baton_coordinator_election_errors_total",
                 "etcd calls of the leader election that failed (campaign reads and creates, lease "
                 "renewals): etcd unreachable, without quorum or slow.",
                 MetricType::Counter);
  errors.metric.push_back(
      MakeSample({}, static_cast<double>(election_errors()), MetricType::Counter));
  out.push_back(std::move(errors));
}

std::vector<prometheus::MetricFamily> StandbyMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  AppendRoleFamilies(false, election_errors_, out);
  return out;
}

}  // namespace baton::coordinator
