#include "worker/trainer/contract/lease_page.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace baton::trainer {

int64_t BootTimeNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

absl::StatusOr<LeasePage> LeasePage::Map(int fd) {
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("lease page fd ", fd, " is not open"));
  }
  if (st.st_size < static_cast<off_t>(sizeof(int64_t))) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease page fd ", fd, " has ", st.st_size, " bytes, not 8 or more"));
  }
  void* page = ::mmap(nullptr, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED) {
    return absl::InternalError(
        absl::StrCat("cannot map lease page fd ", fd, ": ", ::strerror(errno)));
  }
  return LeasePage(static_cast<const int64_t*>(page));
}

absl::StatusOr<std::optional<LeasePage>> LeasePage::FromEnvironment() {
  const char* value = std::getenv(kEnvLeaseFd);
  if (value == nullptr) return std::nullopt;
  int fd;
  if (!absl::SimpleAtoi(value, &fd) || fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", kEnvLeaseFd, "='", value,
                     "' is not a file descriptor number"));
  }
  absl::StatusOr<LeasePage> page = Map(fd);
  if (!page.ok()) return page.status();
  return std::optional<LeasePage>(std::move(*page));
}

LeasePage::LeasePage(LeasePage&& other) noexcept : page_(std::exchange(other.page_, nullptr)) {}

LeasePage& LeasePage::operator=(LeasePage&& other) noexcept {
  if (this != &other) {
    if (page_ != nullptr) ::munmap(const_cast<int64_t*>(page_), sizeof(int64_t));
    page_ = std::exchange(other.page_, nullptr);
  }
  return *this;
}

LeasePage::~LeasePage() {
  if (page_ != nullptr) ::munmap(const_cast<int64_t*>(page_), sizeof(int64_t));
}

int64_t LeasePage::deadline_nanos() const {
  return page_ == nullptr ? kNoLease : __atomic_load_n(page_, __ATOMIC_ACQUIRE);
}

}  // namespace baton::trainer
