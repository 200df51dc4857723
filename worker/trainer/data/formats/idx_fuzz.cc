// Fuzz target: IDX files (idx.h). Invariants: no crash; an array ParseIdx accepts has
// 1..4 dims and exactly their product of bytes, and serialises back to the same bytes; the
// MNIST readers accept only what ParseIdx accepts, with consistent sizes.

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "tools/fuzz/scratch_file.h"
#include "worker/trainer/data/formats/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::trainer;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto array = ParseIdx(bytes, "fuzz");
  if (array.ok()) {
    uint64_t product = 1;
    for (uint32_t d : array->dims) product *= d;
    FUZZ_CHECK(!array->dims.empty() && array->dims.size() <= 4);
    FUZZ_CHECK(product == array->data.size());
    const auto serialized = SerializeIdx(*array);
    FUZZ_CHECK(serialized.ok() && *serialized == bytes);
  }
  const std::string path = baton::fuzz::WriteScratchFile(bytes);
  const auto images = ReadMnistImages(path);
  if (images.ok()) {
    FUZZ_CHECK(array.ok());
    FUZZ_CHECK(images->pixels.size() == uint64_t{images->count} * images->rows * images->cols);
  }
  const auto labels = ReadMnistLabels(path);
  if (labels.ok()) FUZZ_CHECK(array.ok() && labels->size() == array->data.size());
  return 0;
}
