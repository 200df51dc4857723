#pragma once

// Model weights on disk as a pickled Dict[str, Tensor] (parameter name -> tensor), the
// format Python's `torch.load(path)` returns as a dict and `torch::pickle_load` reads.

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Replaces `path` with `contents` atomically: writes <path>.tmp.<pid> in the same
// directory, fsyncs it, renames it over `path` and fsyncs the directory, so a reader sees
// either the old file or the whole new one. Creates missing parent directories.
// INTERNAL (with the OS error) on failure; the temporary file is removed.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Saves `tensors` (detached, made contiguous, in the given order) with WriteFileAtomically.
// INVALID_ARGUMENT on duplicate names.
absl::Status SaveTensorDict(const NamedTensors& tensors, const std::string& path);

// Reads a file written by SaveTensorDict (or Python `torch.save` of a dict of tensors).
// NOT_FOUND if missing, DATA_LOSS if it is not a pickled dict of tensors.
absl::StatusOr<NamedTensors> LoadTensorDict(const std::string& path);

}  // namespace baton::trainer
