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

}  // namespace baton
