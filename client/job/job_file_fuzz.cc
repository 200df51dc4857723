// Fuzz target: `baton submit`'s job file (job_file.h: YAML to JobSpec with --set
// overrides). The input is the YAML text, optionally followed by a NUL byte and the
// overrides, one PATH=VALUE per line. Invariants: no crash (yaml-cpp's exceptions never
// escape); every error is INVALID_ARGUMENT; the paths of an accepted spec are absolute and
// normalised, and the spec can go on to submit's validation.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/job/job_file.h"
#include "common/spec/job_spec.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

// A path field after ParseJobYaml: empty, or absolute and already normalised.
bool IsResolved(const std::string& path) {
  return path.empty() || (path[0] == '/' && baton::cli::ResolvePath("/", path) == path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::vector<std::string> overrides;
  if (nul != absl::string_view::npos) {
    overrides = absl::StrSplit(input.substr(nul + 1), '\n', absl::SkipEmpty());
  }
  const auto spec =
      baton::cli::ParseJobYaml(input.substr(0, nul), "/jobs/base", overrides, "fuzz.yaml");
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(IsResolved(spec->trainer().data_dir()));
  FUZZ_CHECK(IsResolved(spec->checkpoint_dir()));
  FUZZ_CHECK(IsResolved(spec->command().working_dir()));
  (void)baton::ValidateJobSpec(baton::WithDefaults(*spec));
  return 0;
}
