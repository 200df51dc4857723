#include "worker/trainer/snapshot/snapshot_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

constexpr char kMagic[8] = {'B', 'S', 'N', 'A', 'P', 'S', '0', '1'};
constexpr char kPrefix[] = "snapshot-";
constexpr char kSuffix[] = ".bin";
constexpr size_t kHeaderBytes = 64;
constexpr size_t kSlotHeaderBytes = 64;
constexpr size_t kSlotsStart = kHeaderBytes + 2 * kSlotHeaderBytes;
constexpr size_t kPage = 4096;

struct FileHeader {
  char magic[8];
  uint64_t slot_capacity;
};

// seq: odd while written, even (and > 0) once complete; the larger even one is newer.
struct SlotHeader {
  uint64_t seq;
  int64_t generation;
  int64_t step;
  uint64_t bytes;
};

static_assert(sizeof(FileHeader) <= kHeaderBytes);
static_assert(sizeof(SlotHeader) <= kSlotHeaderBytes);

FileHeader* HeaderAt(char* map) { return reinterpret_cast<FileHeader*>(map); }
SlotHeader* SlotAt(char* map, int slot) {
  return reinterpret_cast<SlotHeader*>(map + kHeaderBytes + slot * kSlotHeaderBytes);
}
uint64_t LoadSeq(const SlotHeader* s) { return __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE); }
void StoreSeq(SlotHeader* s, uint64_t v) { __atomic_store_n(&s->seq, v, __ATOMIC_RELEASE); }

size_t FileBytes(uint64_t capacity) { return kSlotsStart + 2 * capacity; }
char* SlotData(char* map, uint64_t capacity, int slot) {
  return map + kSlotsStart + slot * capacity;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// The capacity a file's header states, if the file is a snapshot file of a size that fits it.
bool ValidFile(const char* map, size_t size, uint64_t* capacity) {
  if (size < kSlotsStart) return false;
  FileHeader h;
  std::memcpy(&h, map, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return false;
  if (h.slot_capacity > (size - kSlotsStart) / 2) return false;
  *capacity = h.slot_capacity;
  return true;
}

// A read-only mapping of a whole file, unmapped on destruction.
struct Mapping {
  char* map = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (map != nullptr) ::munmap(map, size);
  }
};

absl::Status MapForReading(const std::string& path, Mapping& m) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return errno == ENOENT ? absl::NotFoundError(absl::StrCat(path, " is gone"))
                           : Errno("cannot open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, " is not a regular file"));
  }
  m.size = static_cast<size_t>(st.st_size);
  void* p = m.size > 0 ? ::mmap(nullptr, m.size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (p == MAP_FAILED) return Errno("cannot map", path);
  m.map = static_cast<char*>(p);
  return absl::OkStatus();
}

// Creates `path` (replacing nothing: the caller renames it into place) sized for slots of
// `capacity`, mapped read-write.
absl::StatusOr<std::pair<int, char*>> CreateFile(const std::string& path, uint64_t capacity) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Errno("cannot create", path);
  const size_t bytes = FileBytes(capacity);
  // Reserve the pages now: a full /dev/shm fails here, not with SIGBUS in a later copy.
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    errno = err;
    return Errno("cannot allocate", path);
  }
  // MAP_POPULATE: the pages are mapped now, not faulted in by the first copies (a 5 MiB
  // state costs ~5 ms of faults per slot otherwise).
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    ::unlink(path.c_str());
    return Errno("cannot map", path);
  }
  char* map = static_cast<char*>(p);
  std::memset(map, 0, kSlotsStart);
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.slot_capacity = capacity;
  std::memcpy(map, &h, sizeof(h));
  return std::make_pair(fd, map);
}

}  // namespace

SnapshotWriter::SnapshotWriter(std::string path, int fd, char* map, size_t map_bytes)
    : path_(std::move(path)), fd_(fd), map_(map), map_bytes_(map_bytes) {}

SnapshotWriter::~SnapshotWriter() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<SnapshotWriter>> SnapshotWriter::Open(const std::string& dir,
                                                                     const std::string& name) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot writer name '", name, "' is not 1-128 of [A-Za-z0-9._-]"));
  }
  const std::string path = absl::StrCat(dir, "/", kPrefix, name, kSuffix);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p =
          ::mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      uint64_t capacity = 0;
      if (p != MAP_FAILED && ValidFile(static_cast<char*>(p), st.st_size, &capacity)) {
        return std::unique_ptr<SnapshotWriter>(
            new SnapshotWriter(path, fd, static_cast<char*>(p), st.st_size));
      }
      if (p != MAP_FAILED) ::munmap(p, st.st_size);
    }
    ::close(fd);  // Not a snapshot file: replaced by the first Write.
  }
  ASSIGN_OR_RETURN(const auto created, CreateFile(absl::StrCat(path, ".tmp"), 0));
  if (::rename(absl::StrCat(path, ".tmp").c_str(), path.c_str()) != 0) {
    ::munmap(created.second, FileBytes(0));
    ::close(created.first);
    return Errno("cannot rename into", path);
  }
  return std::unique_ptr<SnapshotWriter>(
      new SnapshotWriter(path, created.first, created.second, FileBytes(0)));
}

size_t SnapshotWriter::capacity_bytes() const { return map_bytes_; }

absl::Status SnapshotWriter::Grow(size_t bytes) {
  const uint64_t capacity = (bytes + bytes / 4 + kPage - 1) / kPage * kPage;
  const std::string tmp = absl::StrCat(path_, ".tmp");
  ASSIGN_OR_RETURN(const auto created, CreateFile(tmp, capacity));
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const absl::Status error = Errno("cannot rename into", path_);
    ::munmap(created.second, FileBytes(capacity));
    ::close(created.first);
    ::unlink(tmp.c_str());
    return error;
  }
  ::munmap(map_, map_bytes_);
  ::close(fd_);
  fd_ = created.first;
  map_ = created.second;
  map_bytes_ = FileBytes(capacity);
  return absl::OkStatus();
}

absl::Status SnapshotWriter::Write(int64_t generation, const SnapshotImage& image,
                                   std::string* copy) {
  if (image.size() > HeaderAt(map_)->slot_capacity) RETURN_IF_ERROR(Grow(image.size()));
  const uint64_t capacity = HeaderAt(map_)->slot_capacity;
  SlotHeader* slots[2] = {SlotAt(map_, 0), SlotAt(map_, 1)};
  const uint64_t seq[2] = {LoadSeq(slots[0]), LoadSeq(slots[1])};
  // The newest complete slot stays; the other one (older, torn or empty) is written.
  const auto complete = [](uint64_t s) { return s != 0 && s % 2 == 0; };
  const bool newest_is_0 = complete(seq[0]) && (!complete(seq[1]) || seq[0] > seq[1]);
  const int slot = newest_is_0 ? 1 : 0;
  const uint64_t next = (std::max(seq[0], seq[1]) | 1) + 1;  // Even, above both.
  SlotHeader* s = slots[slot];
  StoreSeq(s, next - 1);  // Odd: in progress.
  image.WriteTo(SlotData(map_, capacity, slot));
  s->generation = generation;
  s->step = image.step();
  s->bytes = image.size();
  StoreSeq(s, next);
  if (copy != nullptr) copy->assign(SlotData(map_, capacity, slot), image.size());
  return absl::OkStatus();
}

std::vector<SnapshotRef> ListSnapshots(const std::string& dir) {
  std::vector<SnapshotRef> refs;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return refs;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) continue;
    const std::string path = absl::StrCat(dir, "/", name);
    Mapping m;
    uint64_t capacity = 0;
    if (!MapForReading(path, m).ok() || !ValidFile(m.map, m.size, &capacity)) continue;
    for (int slot = 0; slot < 2; ++slot) {
      const SlotHeader* s = SlotAt(m.map, slot);
      SnapshotRef ref{path, slot, LoadSeq(s), s->generation, s->step, s->bytes};
      if (ref.seq == 0 || ref.seq % 2 != 0 || ref.bytes == 0 || ref.bytes > capacity) continue;
      if (LoadSeq(s) != ref.seq) continue;  // Rewritten while read.
      refs.push_back(std::move(ref));
    }
  }
  ::closedir(d);
  std::sort(refs.begin(), refs.end(), [](const SnapshotRef& a, const SnapshotRef& b) {
    return std::tie(a.generation, a.step, a.seq) > std::tie(b.generation, b.step, b.seq);
  });
  return refs;
}

absl::StatusOr<std::string> ReadSnapshot(const SnapshotRef& ref) {
  Mapping m;
  RETURN_IF_ERROR(MapForReading(ref.path, m));
  uint64_t capacity = 0;
  if (!ValidFile(m.map, m.size, &capacity) || ref.slot < 0 || ref.slot > 1 ||
      ref.bytes > capacity) {
    return absl::DataLossError(absl::StrCat(ref.path, " was replaced since it was listed"));
  }
  const SlotHeader* s = SlotAt(m.map, ref.slot);
  if (LoadSeq(s) != ref.seq) {
    return absl::DataLossError(absl::StrCat(ref.path, " slot ", ref.slot, " was rewritten"));
  }
  std::string bytes(SlotData(m.map, capacity, ref.slot), ref.bytes);
  if (LoadSeq(s) != ref.seq) {
    return absl::DataLossError(
        absl::StrCat(ref.path, " slot ", ref.slot, " was rewritten while it was read"));
  }
  return bytes;
}

}  // namespace baton::trainer
