#include "worker/trainer/data/formats/cifar10.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/trainer/data/formats/file_util.h"

namespace baton::trainer {

absl::Status AppendCifar10File(const std::string& path, Cifar10Records* out) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  if (bytes.empty()) return absl::DataLossError(absl::StrCat(path, ": empty CIFAR-10 batch file"));
  if (bytes.size() % kCifar10RecordBytes != 0) {
    return absl::DataLossError(absl::StrFormat(
        "%s: not a CIFAR-10 binary batch: %d bytes is not a whole number of %d-byte records "
        "(truncated?)",
        path, bytes.size(), kCifar10RecordBytes));
  }
  const size_t count = bytes.size() / kCifar10RecordBytes;
  // Every label is checked before anything is appended: a bad file leaves `out` as it was.
  for (size_t i = 0; i < count; ++i) {
    const auto label = static_cast<uint8_t>(bytes[i * kCifar10RecordBytes]);
    if (label >= kCifar10Classes) {
      return absl::DataLossError(
          absl::StrFormat("%s: record %d has label %d, not in [0, 10): not a CIFAR-10 binary batch",
                          path, i, label));
    }
  }
  out->labels.reserve(out->labels.size() + count);
  out->images.reserve(out->images.size() + count * kCifar10ImageBytes);
  for (size_t i = 0; i < count; ++i) {
    const char* record = bytes.data() + i * kCifar10RecordBytes;
    out->labels.push_back(static_cast<uint8_t>(record[0]));
    out->images.insert(out->images.end(), record + 1, record + kCifar10RecordBytes);
  }
  return absl::OkStatus();
}

absl::Status WriteCifar10File(const std::string& path, const Cifar10Records& records) {
  if (records.images.size() != records.labels.size() * kCifar10ImageBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CIFAR-10 records: %d labels need %d image bytes, got %d", records.labels.size(),
        records.labels.size() * kCifar10ImageBytes, records.images.size()));
  }
  std::string bytes;
  bytes.reserve(records.labels.size() * kCifar10RecordBytes);
  for (size_t i = 0; i < records.labels.size(); ++i) {
    bytes.push_back(static_cast<char>(records.labels[i]));
    bytes.append(reinterpret_cast<const char*>(records.images.data()) + i * kCifar10ImageBytes,
                 kCifar10ImageBytes);
  }
  return WriteWholeFile(path, bytes);
}

}  // namespace baton::trainer
