#pragma once

// The CIFAR-10 binary format ("CIFAR-10 binary version" of the official distribution).
//
// A batch file is a sequence of 3073-byte records: 1 label byte in [0, 10), then the 32x32
// image as three 1024-byte planes (red, green, blue), each row-major. The distribution has
// data_batch_1.bin .. data_batch_5.bin (10000 records each) and test_batch.bin.
//
// Plain C++ (no LibTorch). Functions are thread-safe.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::trainer {

inline constexpr int kCifar10Classes = 10;
inline constexpr int kCifar10Side = 32;
inline constexpr int kCifar10ImageBytes = 3 * kCifar10Side * kCifar10Side;  // 3072.
inline constexpr int kCifar10RecordBytes = 1 + kCifar10ImageBytes;          // 3073.
inline constexpr std::array<const char*, 5> kCifar10TrainFiles = {
    "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
    "data_batch_5.bin"};
inline constexpr char kCifar10TestFile[] = "test_batch.bin";
// The subdirectory the official archive unpacks to.
inline constexpr char kCifar10ArchiveDir[] = "cifar-10-batches-bin";

// Records of one or more batch files.
struct Cifar10Records {
  std::vector<uint8_t> labels;  // One per record, in [0, 10).
  std::vector<uint8_t> images;  // labels.size() * 3072 bytes: CHW planes per record.
};

// Reads one batch file and appends its records to `out`. NOT_FOUND if missing,
// FAILED_PRECONDITION if unreadable, DATA_LOSS (naming the file) if it is empty, its size
// is not a multiple of 3073 or a label is >= 10. On error `out` is unchanged.
absl::Status AppendCifar10File(const std::string& path, Cifar10Records* out);

// Writes `records` as one batch file (creating parent directories). INVALID_ARGUMENT if
// the sizes disagree, INTERNAL on I/O errors.
absl::Status WriteCifar10File(const std::string& path, const Cifar10Records& records);

}  // namespace baton::trainer
