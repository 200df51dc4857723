#pragma once

// The job file: a YAML document describing one baton.v1.JobSpec, e.g.
//
//   name: mnist-mlp
//   trainer:
//     model: mlp
//     dataset: mnist
//     data_dir: data/mnist        # relative: resolved against this file's directory
//     hidden: [256, 128]
//   workers: {min: 2, max: 4}
//   budget: {max_steps: 2000}
//
// Conversion is generic over the JobSpec descriptor (see client/job/yaml_proto.h for the YAML
// shape of each field type). Afterwards, relative paths in trainer.data_dir,
// checkpoint_dir and command.working_dir are made absolute against the file's directory.
// No defaults are applied and nothing is validated beyond shape and types: the
// coordinator runs WithDefaults/ValidateJobSpec (common/spec/job_spec.h) at submit time.
//
// Overrides ("--set PATH=VALUE") are applied to the YAML tree before conversion, in
// order, each replacing whatever the file (or an earlier override) had at PATH. PATH is a
// dotted field path (`workers.min`, `trainer.hidden`, `env.OMP_NUM_THREADS`); VALUE is
// parsed as YAML, so `--set trainer.hidden=[64,32]` sets a list and `--set
// checkpoint_dir=` clears a field. Relative paths set by overrides are also resolved
// against the file's directory.
//
// Every error is INVALID_ARGUMENT naming where (file:line:column, or the --set argument)
// and the field path.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"

namespace baton::cli {

// Reads and converts the job file at `path`. Relative paths inside are resolved against
// the file's directory; errors name `path` as given. A file that cannot be read is
// NOT_FOUND (missing) or FAILED_PRECONDITION (other I/O errors).
absl::StatusOr<baton::v1::JobSpec> ParseJobFile(const std::string& path,
                                                const std::vector<std::string>& overrides);

// Converts job-file `text`. Relative paths are resolved against `base_dir` (itself made
// absolute against the current directory if relative). `source_name` names the text in
// errors (e.g. its file name).
absl::StatusOr<baton::v1::JobSpec> ParseJobYaml(absl::string_view text,
                                                const std::string& base_dir,
                                                const std::vector<std::string>& overrides,
                                                const std::string& source_name = "<job>");

// `path` made absolute against `base_dir` and lexically normalised ("a/../b" -> "b");
// "" stays "". Exposed for tests.
std::string ResolvePath(const std::string& base_dir, const std::string& path);

}  // namespace baton::cli
