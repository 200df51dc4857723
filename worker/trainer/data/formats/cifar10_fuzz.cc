// Fuzz target: CIFAR-10 batch files (cifar10.h). Invariants: no crash; on success every
// label is in [0, 10) and there are 3072 image bytes per label; on error the records
// already read are left as they were.

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "tools/fuzz/scratch_file.h"
#include "worker/trainer/data/formats/cifar10.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::trainer;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // One record already read, as from an earlier batch file.
  Cifar10Records records;
  records.labels = {3};
  records.images.assign(kCifar10ImageBytes, 7);
  const Cifar10Records before = records;
  const absl::Status status = AppendCifar10File(baton::fuzz::WriteScratchFile(bytes), &records);
  if (!status.ok()) {
    FUZZ_CHECK(records.labels == before.labels && records.images == before.images);
    return 0;
  }
  FUZZ_CHECK(records.images.size() == records.labels.size() * kCifar10ImageBytes);
  for (uint8_t label : records.labels) FUZZ_CHECK(label < kCifar10Classes);
  return 0;
}
