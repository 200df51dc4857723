#pragma once

#include "baton/v1/worker_service.pb.h"

namespace baton {

// Bytes per second of a pre-flight link measurement (LinkMeasurement, worker_service.proto):
// bytes / duration; 0 for an error or no time. The worker's measurement and the
// coordinator's judgement (coordinator/policy/preflight.h) read it alike.
double LinkBandwidth(const baton::v1::LinkMeasurement& link);

}  // namespace baton
