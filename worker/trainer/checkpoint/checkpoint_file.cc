#include "worker/trainer/checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/private_file.h"
#include "worker/trainer/checkpoint/little_endian.h"

namespace baton::trainer {
namespace {

constexpr char kMagic[8] = {'B', 'T', 'N', 'C', 'K', 'P', 'T', '1'};
// ZIP end-of-central-directory record: signature, ..., comment length at offset 20.
constexpr size_t kEocdSize = 22;
constexpr uint32_t kEocdSignature = 0x06054b50;

// Slicing-by-8 tables: table[0] is the classic byte table; table[k][b] is the CRC of byte
// b followed by k zero bytes.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

CrcTables MakeCrcTables() {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

absl::Status OsError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("writing", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t Crc32(absl::string_view data, uint32_t crc) {
  static const CrcTables kT = MakeCrcTables();
  const char* p = data.data();
  size_t n = data.size();
  crc = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t one = static_cast<uint32_t>(LoadLittleEndian({p, 4})) ^ crc;
    const uint32_t two = static_cast<uint32_t>(LoadLittleEndian({p + 4, 4}));
    crc = kT[7][one & 0xff] ^ kT[6][(one >> 8) & 0xff] ^ kT[5][(one >> 16) & 0xff] ^
          kT[4][one >> 24] ^ kT[3][two & 0xff] ^ kT[2][(two >> 8) & 0xff] ^
          kT[1][(two >> 16) & 0xff] ^ kT[0][two >> 24];
  }
  for (; n > 0; ++p, --n) crc = kT[0][(crc ^ static_cast<unsigned char>(*p)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

absl::Status SealArchive(std::vector<char>& archive) {
  if (archive.size() < kEocdSize) return absl::InvalidArgumentError("archive too short");
  char* eocd = archive.data() + archive.size() - kEocdSize;
  if (LoadLittleEndian({eocd, 4}) != kEocdSignature || LoadLittleEndian({eocd + 20, 2}) != 0) {
    return absl::InvalidArgumentError(
        "archive does not end with a comment-less ZIP end-of-central-directory record");
  }
  StoreLittleEndian(eocd + 20, kCheckpointTrailerSize, 2);
  const uint64_t length = archive.size();
  const uint32_t crc = Crc32(absl::string_view(archive.data(), archive.size()));
  char trailer[kCheckpointTrailerSize];
  std::memcpy(trailer, kMagic, sizeof(kMagic));
  StoreLittleEndian(trailer + 8, length, 8);
  StoreLittleEndian(trailer + 16, crc, 4);
  archive.insert(archive.end(), trailer, trailer + kCheckpointTrailerSize);
  return absl::OkStatus();
}

absl::Status VerifySealedArchive(absl::string_view bytes) {
  if (bytes.size() < kEocdSize + kCheckpointTrailerSize) {
    return absl::DataLossError(absl::StrCat("file too short (", bytes.size(), " bytes)"));
  }
  const char* trailer = bytes.data() + bytes.size() - kCheckpointTrailerSize;
  if (std::memcmp(trailer, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("no checkpoint trailer (truncated or not a Baton checkpoint)");
  }
  const uint64_t length = LoadLittleEndian({trailer + 8, 8});
  if (length != bytes.size() - kCheckpointTrailerSize) {
    return absl::DataLossError(absl::StrCat("length mismatch: trailer says ", length,
                                            " bytes, file has ",
                                            bytes.size() - kCheckpointTrailerSize));
  }
  const uint32_t want = static_cast<uint32_t>(LoadLittleEndian({trailer + 16, 4}));
  const uint32_t got = Crc32(bytes.substr(0, length));
  if (want != got) {
    return absl::DataLossError(
        absl::StrCat("CRC-32 mismatch: trailer ", absl::Hex(want), ", contents ", absl::Hex(got)));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::function<absl::Status()>& before_rename) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  // 0700 directories, a 0600 temporary file created exclusively: nothing planted in the
  // directory (a symlink, a file another process holds open) is ever written through.
  if (absl::Status made = MakePrivateDirs(dir.string()); !made.ok()) {
    return absl::InternalError(made.message());
  }
  const std::string tmp = absl::StrCat(path, kTemporaryInfix, ::getpid());
  absl::StatusOr<int> created = CreateExclusive(tmp);
  if (!created.ok()) return absl::InternalError(created.status().message());
  const int fd = *created;
  absl::Status status = WriteAll(fd, contents, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = OsError("fsync", tmp);
  if (::close(fd) != 0 && status.ok()) status = OsError("closing", tmp);
  if (status.ok() && before_rename) status = before_rename();
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = OsError("renaming to", path);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return OsError("opening", dir.string());
  const bool synced = ::fsync(dir_fd) == 0;
  ::close(dir_fd);
  if (!synced) return OsError("fsync", dir.string());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<char>> ReadFileBytes(const std::string& path) {
  const int fd = OpenPrivate(path, O_RDONLY);  // A symlink fails (ELOOP).
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return OsError("opening", path);
  }
  std::vector<char> bytes;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const absl::Status status = OsError("reading", path);
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace baton::trainer
