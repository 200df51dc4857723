#pragma once

// Private to //worker/trainer/data:dataset: one factory per dataset kind, called by
// OpenDataset with options already validated and defaults applied (every numeric field
// > 0, image_size set for the kind), plus helpers the kinds share.

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/trainer/data/dataset.h"

namespace baton::trainer::internal {

absl::StatusOr<std::unique_ptr<Dataset>> OpenMnist(const DataOptions& options, Split split);
absl::StatusOr<std::unique_ptr<Dataset>> OpenCifar10(const DataOptions& options, Split split);
absl::StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(const DataOptions& options, Split split);
absl::StatusOr<std::unique_ptr<Dataset>> OpenTokens(const DataOptions& options, Split split);
absl::StatusOr<std::unique_ptr<Dataset>> OpenSynthetic(const DataOptions& options, Split split);

// OUT_OF_RANGE unless `indices` is non-empty and every index is in [0, size).
absl::Status CheckIndices(absl::Span<const int64_t> indices, int64_t size, absl::string_view what);

}  // namespace baton::trainer::internal
