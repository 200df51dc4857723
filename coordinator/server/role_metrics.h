#pragma once

// What a coordinator says about its role, for Prometheus (both a standby's /metrics and the
// leader's, CoordinatorMetrics, carry them):
//   baton_coordinator_leader                 1 on the replica that leads (and on a lone
//                                            SQLite coordinator), 0 on a standby
//   baton_coordinator_election_errors_total  etcd calls of the election that failed (a
//                                            standby's campaign, a leader's renewals): etcd
//                                            unreachable or slow; only with --store=etcd
// The alert CoordinatorNoLeader (deploy/prometheus/alerts.yml) fires when no target leads.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace baton::coordinator {

// The role's families; `election_errors` null: that family is left out.
void AppendRoleFamilies(bool leader, const std::function<int64_t()>& election_errors,
                        std::vector<prometheus::MetricFamily>& out);

// A standby's whole /metrics: its role. Thread-safe if `election_errors` is.
class StandbyMetrics final : public prometheus::Collectable {
 public:
  explicit StandbyMetrics(std::function<int64_t()> election_errors)
      : election_errors_(std::move(election_errors)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::function<int64_t()> election_errors_;
};

}  // namespace baton::coordinator
