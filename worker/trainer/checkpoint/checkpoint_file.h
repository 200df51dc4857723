#pragma once

// The on-disk framing of Baton's step checkpoints, independent of what they hold. Plain
// C++, no LibTorch; every function is thread-compatible (no shared state).
//
// A sealed checkpoint is a ZIP archive (what torch::pickle_save / Python's torch.save
// write) whose archive comment is a 20-byte trailer:
//
//   offset  size  field
//        0     8  magic "BTNCKPT1"
//        8     8  payload length L, little-endian (= file size - 20)
//       16     4  CRC-32 (IEEE, as zlib.crc32) of the first L bytes, little-endian
//
// Declaring the trailer as the ZIP comment (the end-of-central-directory record's comment
// length is set to 20 before the CRC is taken) keeps the file a valid ZIP, so Python's
// torch.load still reads it. A truncated, extended or bit-flipped file fails
// VerifySealedArchive.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

inline constexpr size_t kCheckpointTrailerSize = 20;

// CRC-32 with the IEEE polynomial (reflected 0xEDB88320, init/xorout 0xFFFFFFFF), the value
// of zlib's crc32() and Python's zlib.crc32(). `crc` continues a previous result.
uint32_t Crc32(absl::string_view data, uint32_t crc = 0);

// Appends the trailer to `archive`, a ZIP archive without an archive comment.
// INVALID_ARGUMENT if `archive` does not end with an end-of-central-directory record with
// an empty comment.
absl::Status SealArchive(std::vector<char>& archive);

// OK iff `bytes` is a sealed archive whose length and CRC match its trailer; DATA_LOSS
// saying what is wrong otherwise.
absl::Status VerifySealedArchive(absl::string_view bytes);

// The temporary file WriteFileAtomically writes first: <path><kTemporaryInfix><pid>.
inline constexpr char kTemporaryInfix[] = ".tmp.";

// Replaces `path` with `contents` atomically: writes <path>.tmp.<pid> in the same
// directory, fsyncs it, renames it over `path` and fsyncs the directory, so a reader sees
// either the old file or the whole new one, even after a crash. Creates missing parent
// directories. INTERNAL (with the OS error) on failure; the temporary file is removed.
// `before_rename`, when set, runs once the temporary file is durable, immediately before
// the rename; if it returns an error, the temporary file is removed, `path` is left as it
// was, and that error is returned.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::function<absl::Status()>& before_rename = nullptr);

// The whole file. NOT_FOUND if it does not exist, INTERNAL on other read errors.
absl::StatusOr<std::vector<char>> ReadFileBytes(const std::string& path);

}  // namespace baton::trainer
