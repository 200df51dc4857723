// Fuzz target: reading a checkpoint directory (checkpoint_listing.h) and a checkpoint
// file's framing (checkpoint_file.h). The input is "<file name>\n<contents>": that one
// file is written into an empty directory, which is listed with its start records read;
// the file is then read and its seal verified. The contents are never decoded: decoding
// is LibTorch's unpickler (checkpoint_codec.h), which is not ours to fuzz and only ever
// sees files whose CRC matched.
// Invariants: no crash; whatever is listed has non-negative numbers (generation >= 1 for a
// start record); the file reads back whole; a verified file ends in the trailer's magic.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "tools/fuzz/scratch_file.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"
#include "worker/trainer/checkpoint/checkpoint_listing.h"

namespace {

// A name the file system takes as one plain entry of a directory.
bool IsPlainName(absl::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == absl::string_view::npos && name.find('\0') == absl::string_view::npos;
}

void CheckListing(const baton::trainer::Listing& listing) {
  using namespace baton::trainer;
  for (const CheckpointFile& file : listing.checkpoints) {
    FUZZ_CHECK(file.step >= 0 && file.generation >= 0);
  }
  for (const StartRecord& start : listing.starts) {
    FUZZ_CHECK(start.generation >= 1 && start.resumed_step >= 0);
  }
  for (const Temporary& temporary : listing.temporaries) FUZZ_CHECK(temporary.pid >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::trainer;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == absl::string_view::npos) return 0;
  const absl::string_view name = input.substr(0, newline);
  const absl::string_view contents = input.substr(newline + 1);
  if (!IsPlainName(name)) return 0;
  const std::string dir = baton::fuzz::EmptyScratchSubdir("checkpoints");
  const std::string path =
      baton::fuzz::WriteScratchFile(contents, "checkpoints/" + std::string(name));
  const auto listing = ListWithRecords(dir);
  if (listing.ok()) CheckListing(*listing);
  const auto bytes = ReadFileBytes(path);
  FUZZ_CHECK(bytes.ok() && bytes->size() == contents.size());
  if (VerifySealedArchive(absl::string_view(bytes->data(), bytes->size())).ok()) {
    FUZZ_CHECK(contents.size() >= kCheckpointTrailerSize);
    FUZZ_CHECK(contents.substr(contents.size() - kCheckpointTrailerSize, 8) == "BTNCKPT1");
  }
  return 0;
}
