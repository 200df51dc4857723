#pragma once

// The /metrics HTTP endpoint both daemons serve (prometheus-cpp's civetweb Exposer).

#include <memory>
#include <string>
#include <vector>

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include "absl/status/statusor.h"

namespace baton {

// Serves `collectable` on http://<listen>/metrics (listen: "HOST:PORT"; port 0 = any free
// port). Returns the running exposer, which serves until destroyed; its bound port is
// GetListeningPorts()[0]. The exposer holds a weak reference to `collectable`: the caller
// keeps it alive while it should be served. Scrapes run on the exposer's own thread, so
// `collectable` must be thread-safe.
// Errors: UNAVAILABLE if the address cannot be bound (in use, bad host).
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> collectable);

// For Collectables that build their families at scrape time: an empty family, and one
// sample of a Counter or Gauge family (`type` picks the value field).
prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                    prometheus::MetricType type);
prometheus::ClientMetric MakeSample(std::vector<prometheus::ClientMetric::Label> labels,
                                    double value, prometheus::MetricType type);

}  // namespace baton
