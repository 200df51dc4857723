// Fuzz target: token files (token_file.h). Invariants: no crash; an opened file has
// size()/2 tokens, at() and Copy() agree, and MaxToken() is the largest of them.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "absl/types/span.h"
#include "tools/fuzz/scratch_file.h"
#include "worker/trainer/data/formats/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::trainer;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto file = TokenFile::Open(baton::fuzz::WriteScratchFile(bytes));
  if (!file.ok()) return 0;
  const TokenFile& tokens = **file;
  FUZZ_CHECK(size % 2 == 0 && tokens.size() == static_cast<int64_t>(size / 2));
  std::vector<int64_t> copied(tokens.size());
  tokens.Copy(0, absl::MakeSpan(copied));
  int64_t max = 0;
  for (int64_t i = 0; i < tokens.size(); ++i) {
    FUZZ_CHECK(copied[i] == tokens.at(i));
    max = std::max(max, copied[i]);
  }
  FUZZ_CHECK(tokens.MaxToken() == max);
  return 0;
}
