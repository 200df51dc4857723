#include "common/metrics_http.h"

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace baton {

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> collectable) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb reports a failed bind by throwing from the constructor.
    exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  if (exposer->GetListeningPorts().empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen));
  }
  exposer->RegisterCollectable(std::move(collectable));
  return exposer;
}

prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                    prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

prometheus::ClientMetric MakeSample(std::vector<prometheus::ClientMetric::Label> labels,
                                    double value, prometheus::MetricType type) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

}  // namespace baton
