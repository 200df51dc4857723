#pragma once

// The /metrics HTTP endpoint both daemons serve (prometheus-cpp's civetweb Exposer).

#include <memory>
#include <string>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

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

}  // namespace baton
