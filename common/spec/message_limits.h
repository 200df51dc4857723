#pragma once

// Size limits of what crosses the wire, in one place: the coordinator checks a spec against
// them at submit (so nothing it accepts can break a worker's stream later), and both ends
// set gRPC's message size limit from them.

#include <cstdint>

#include "absl/status/status.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"

namespace baton {

// A serialized JobSpec.
inline constexpr int64_t kMaxJobSpecBytes = 1 << 20;
// JobSpec.env: entries, and bytes of one name or value.
inline constexpr int kMaxEnvVars = 1024;
inline constexpr int64_t kMaxEnvNameBytes = 256;
inline constexpr int64_t kMaxEnvValueBytes = 32 << 10;
// CommandSpec.argv: entries, and bytes of one.
inline constexpr int kMaxArgs = 4096;
inline constexpr int64_t kMaxArgBytes = 32 << 10;
// One LogLine.text; the worker cuts longer lines ("[line truncated]") and the coordinator
// cuts anything longer it is sent.
inline constexpr int64_t kMaxLogLineBytes = 64 << 10;
// What one worker message may carry: points or lines per MetricsReport/LogsReport (the
// worker batches at most 100), values per MetricPoint, bytes of a value's name.
inline constexpr int kMaxReportEntries = 1000;
inline constexpr int kMaxPointValues = 64;
inline constexpr int64_t kMaxMetricNameBytes = 128;
// gRPC's limit on one message, both directions, on every channel and server. Larger than
// anything Baton sends: a StartAssignment carries one spec (<= kMaxJobSpecBytes) and a
// bounded peer list; Job replies carry a bounded event history.
inline constexpr int kMaxGrpcMessageBytes = 16 << 20;
// ListJobs answers at most this many bytes of jobs per page (but always one job), so that
// a page stays well below kMaxGrpcMessageBytes however large other users' specs are
// (seventeen 1 MiB specs used to make every `baton jobs` fail).
inline constexpr int64_t kMaxListPageBytes = 4 << 20;

// `baton profile`: one rank's Chrome trace in a ProfileTrace (the worker answers with an
// error instead of a larger one), and all the traces of one ProfileJobResponse together
// (the coordinator answers RESOURCE_EXHAUSTED instead): both fit a gRPC message with room.
inline constexpr int64_t kMaxProfileTraceBytes = 8 << 20;
inline constexpr int64_t kMaxProfileResponseBytes = 15 << 20;

static_assert(kMaxProfileResponseBytes < kMaxGrpcMessageBytes &&
                  kMaxProfileTraceBytes < kMaxProfileResponseBytes,
              "a ProfileTrace and a ProfileJobResponse must fit in a message with room");
static_assert(kMaxGrpcMessageBytes >= 4 * kMaxJobSpecBytes,
              "a StartAssignment (one spec, peers, ranks) must fit in a message with room");

// INVALID_ARGUMENT naming the field and the limit if `spec` exceeds one of the limits
// above; OK otherwise.
absl::Status CheckMessageLimits(const baton::v1::JobSpec& spec);

// INVALID_ARGUMENT naming the field and the limit if a worker's report exceeds one of the
// limits above (no well-behaved worker sends such a message); OK otherwise.
absl::Status CheckMessageLimits(const baton::v1::WorkerMessage& msg);

}  // namespace baton
