#include "worker/process/lease_fence.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "worker/trainer/contract/lease_page.h"

namespace baton::worker {
namespace {

absl::Status OsError(const char* what) {
  return absl::InternalError(absl::StrCat("lease page: ", what, ": ", ::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseFence>> LeaseFence::Create() {
  UniqueFd fd(::memfd_create("baton-lease", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return OsError("memfd_create");
  const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return OsError("ftruncate");
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (mapped == MAP_FAILED) return OsError("mmap");
  auto* page = static_cast<int64_t*>(mapped);
  __atomic_store_n(page, trainer::kNoLease, __ATOMIC_RELEASE);
  // From here on only the mapping above can write: no write(2), no new writable mapping,
  // no resizing, no removing the seals.
  if (::fcntl(fd.get(), F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    const absl::Status s = OsError("F_ADD_SEALS");
    ::munmap(mapped, size);
    return s;
  }
  return std::unique_ptr<LeaseFence>(new LeaseFence(std::move(fd), page));
}

LeaseFence::~LeaseFence() { ::munmap(page_, static_cast<size_t>(::sysconf(_SC_PAGESIZE))); }

void LeaseFence::SetRemaining(absl::Duration remaining) {
  int64_t deadline = trainer::kNoLease;
  if (remaining != absl::InfiniteDuration()) {
    const int64_t now = trainer::BootTimeNanos();
    const int64_t left = absl::ToInt64Nanoseconds(remaining);  // Saturates.
    deadline = left > 0 && now > trainer::kNoLease - left ? trainer::kNoLease - 1 : now + left;
  }
  __atomic_store_n(page_, deadline, __ATOMIC_RELEASE);
}

}  // namespace baton::worker
