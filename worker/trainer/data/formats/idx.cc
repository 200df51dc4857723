#include "worker/trainer/data/formats/idx.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/trainer/data/formats/file_util.h"

namespace baton::trainer {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
constexpr size_t kMaxDims = 4;

uint32_t ReadBigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

void AppendBigEndian32(uint32_t v, std::string* out) {
  out->push_back(static_cast<char>((v >> 24) & 0xff));
  out->push_back(static_cast<char>((v >> 16) & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
  out->push_back(static_cast<char>(v & 0xff));
}

// Product of dims, or an error if it overflows 64 bits.
absl::StatusOr<uint64_t> NumElements(const std::vector<uint32_t>& dims, absl::string_view what) {
  uint64_t n = 1;
  for (uint32_t d : dims) {
    if (d != 0 && n > UINT64_MAX / d) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": IDX dimensions overflow"));
    }
    n *= d;
  }
  return n;
}

// INVALID_ARGUMENT unless an array of `dims` is what MNIST's `magic` stores.
absl::Status CheckMagic(const std::string& path, const std::vector<uint32_t>& dims, uint32_t magic,
                        absl::string_view kind) {
  const uint32_t got = (uint32_t{kTypeUnsignedByte} << 8) | static_cast<uint32_t>(dims.size());
  if (got == magic) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: not an MNIST %s file (magic %u with %u dims, expected %u)", path, kind,
                      got, dims.size(), magic));
}

absl::StatusOr<IdxArray> ReadIdxWithMagic(const std::string& path, uint32_t magic,
                                          absl::string_view kind) {
  ASSIGN_OR_RETURN(IdxArray array, ReadIdxFile(path));
  RETURN_IF_ERROR(CheckMagic(path, array.dims, magic, kind));
  return array;
}

// The header at the start of `bytes` (which may go on with data): its dims, its length,
// and the data bytes they call for. Errors as ParseIdx's for the header.
struct IdxHeader {
  std::vector<uint32_t> dims;
  size_t bytes = 0;
  uint64_t elements = 0;
};

absl::StatusOr<IdxHeader> ParseIdxHeader(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() < 4) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated IDX header (%u bytes)", what, bytes.size()));
  }
  const uint32_t magic = ReadBigEndian32(bytes.data());
  const auto type = static_cast<uint8_t>(bytes[2]);
  const auto ndims = static_cast<uint8_t>(bytes[3]);
  if (bytes[0] != 0 || bytes[1] != 0 || type != kTypeUnsignedByte || ndims == 0 ||
      ndims > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: bad IDX magic 0x%08x (expected 0x000008NN: unsigned bytes, 1..4 dims)", what, magic));
  }
  IdxHeader header;
  header.bytes = 4 + 4 * size_t{ndims};
  if (bytes.size() < header.bytes) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated IDX header (%u bytes, need %u for %u dims)", what,
                        bytes.size(), header.bytes, ndims));
  }
  for (size_t i = 0; i < ndims; ++i) {
    header.dims.push_back(ReadBigEndian32(bytes.data() + 4 + 4 * i));
  }
  ASSIGN_OR_RETURN(header.elements, NumElements(header.dims, what));
  return header;
}

// DATA_LOSS unless the `available` bytes after the header are exactly the data it calls for.
absl::Status CheckIdxDataSize(const IdxHeader& header, uint64_t available, absl::string_view what) {
  if (available == header.elements) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "%s: %s IDX file: header says %u data bytes, file has %u", what,
      available < header.elements ? "truncated" : "oversized", header.elements, available));
}

// The header at the start of `file`. Errors as ParseIdxHeader's, or the read's.
absl::StatusOr<IdxHeader> ReadIdxHeader(const ReadableFile& file, absl::string_view what) {
  char head[4 + 4 * kMaxDims];
  ASSIGN_OR_RETURN(const size_t n, file.ReadAt(head, sizeof(head), 0));
  return ParseIdxHeader(absl::string_view(head, n), what);
}

}  // namespace

absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, absl::string_view what) {
  ASSIGN_OR_RETURN(IdxHeader header, ParseIdxHeader(bytes, what));
  RETURN_IF_ERROR(CheckIdxDataSize(header, bytes.size() - header.bytes, what));
  IdxArray array;
  array.dims = std::move(header.dims);
  array.data.assign(bytes.begin() + header.bytes, bytes.end());
  return array;
}

absl::StatusOr<std::string> SerializeIdx(const IdxArray& array) {
  if (array.dims.empty() || array.dims.size() > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrFormat("IDX arrays have 1..4 dims, got %u", array.dims.size()));
  }
  ASSIGN_OR_RETURN(const uint64_t n, NumElements(array.dims, "IDX array"));
  if (n != array.data.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("IDX array: dims say %u elements, data has %u", n, array.data.size()));
  }
  std::string out;
  out.reserve(4 + 4 * array.dims.size() + array.data.size());
  out.push_back(0);
  out.push_back(0);
  out.push_back(static_cast<char>(kTypeUnsignedByte));
  out.push_back(static_cast<char>(array.dims.size()));
  for (uint32_t d : array.dims) AppendBigEndian32(d, &out);
  out.append(array.data.begin(), array.data.end());
  return out;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  // Straight into the array (a dataset's images are tens of MiB): the header first, then
  // the data once its size matches the file's. Anything but a regular file is read whole.
  ASSIGN_OR_RETURN(ReadableFile file, ReadableFile::Open(path));
  if (!file.size().has_value()) {
    ASSIGN_OR_RETURN(const std::string contents, file.ReadRest());
    return ParseIdx(contents, path);
  }
  ASSIGN_OR_RETURN(IdxHeader header, ReadIdxHeader(file, path));
  const uint64_t file_bytes = *file.size();
  RETURN_IF_ERROR(
      CheckIdxDataSize(header, file_bytes < header.bytes ? 0 : file_bytes - header.bytes, path));
  IdxArray array;
  array.dims = std::move(header.dims);
  array.data.resize(header.elements);
  ASSIGN_OR_RETURN(const size_t got, file.ReadAt(reinterpret_cast<char*>(array.data.data()),
                                                 array.data.size(), header.bytes));
  char past_end;
  ASSIGN_OR_RETURN(const size_t more, file.ReadAt(&past_end, 1, header.bytes + array.data.size()));
  // The file changed size while being read.
  RETURN_IF_ERROR(
      CheckIdxDataSize(IdxHeader{{}, header.bytes, array.data.size()}, got + more, path));
  return array;
}

absl::Status WriteIdxFile(const std::string& path, const IdxArray& array) {
  ASSIGN_OR_RETURN(const std::string bytes, SerializeIdx(array));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<MnistImages> ReadMnistImages(const std::string& path) {
  ASSIGN_OR_RETURN(IdxArray array, ReadIdxWithMagic(path, kIdxImagesMagic, "image"));
  MnistImages images;
  images.count = array.dims[0];
  images.rows = array.dims[1];
  images.cols = array.dims[2];
  images.pixels = std::move(array.data);
  return images;
}

absl::StatusOr<std::vector<uint32_t>> ReadMnistImagesDims(const std::string& path) {
  ASSIGN_OR_RETURN(const ReadableFile file, ReadableFile::Open(path));
  ASSIGN_OR_RETURN(IdxHeader header, ReadIdxHeader(file, path));
  RETURN_IF_ERROR(CheckMagic(path, header.dims, kIdxImagesMagic, "image"));
  return header.dims;
}

absl::StatusOr<std::vector<uint8_t>> ReadMnistLabels(const std::string& path) {
  ASSIGN_OR_RETURN(IdxArray array, ReadIdxWithMagic(path, kIdxLabelsMagic, "label"));
  return std::move(array.data);
}

absl::Status WriteMnistImages(const std::string& path, const MnistImages& images) {
  return WriteIdxFile(path, IdxArray{{images.count, images.rows, images.cols}, images.pixels});
}

absl::Status WriteMnistLabels(const std::string& path, const std::vector<uint8_t>& labels) {
  return WriteIdxFile(path, IdxArray{{static_cast<uint32_t>(labels.size())}, labels});
}

}  // namespace baton::trainer
