// Fuzz target: the CLI's config file (ParseCliConfig: YAML contexts with an address, a CA
// and a token file). Invariants: it ends (yaml-cpp's parser is bounded, bounded_yaml.h);
// no exception escapes; every error is INVALID_ARGUMENT naming the file; an accepted text
// parses again to the same config.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "client/config/connection.h"
#include "tools/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto config = baton::cli::ParseCliConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(config.status().message(), "fuzz.yaml"));
    return 0;
  }
  // Deterministic: the same text is the same config.
  const auto again = baton::cli::ParseCliConfig(text, "fuzz.yaml");
  FUZZ_CHECK(again.ok() && again->current_context == config->current_context &&
             again->contexts.size() == config->contexts.size());
  for (const auto& [name, context] : config->contexts) {
    FUZZ_CHECK(again->contexts.count(name) == 1);
    FUZZ_CHECK(again->contexts.at(name).coordinator == context.coordinator);
  }
  return 0;
}
