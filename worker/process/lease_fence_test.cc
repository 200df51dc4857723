#include "worker/process/lease_fence.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/trainer/contract/lease_page.h"

namespace baton::worker {
namespace {

using trainer::LeasePage;

TEST(LeaseFenceTest, ReadersSeeTheDeadlineItPublishes) {
  absl::StatusOr<std::unique_ptr<LeaseFence>> fence = LeaseFence::Create();
  ASSERT_TRUE(fence.ok()) << fence.status();
  absl::StatusOr<LeasePage> page = LeasePage::Map((*fence)->fd());
  ASSERT_TRUE(page.ok()) << page.status();

  // No lease yet: nothing runs out.
  EXPECT_EQ(page->deadline_nanos(), trainer::kNoLease);
  EXPECT_FALSE(page->Expired());

  const int64_t before = trainer::BootTimeNanos();
  (*fence)->SetRemaining(absl::Hours(1));
  const int64_t after = trainer::BootTimeNanos();
  EXPECT_GE(page->deadline_nanos(), before + int64_t{3600} * 1000000000);
  EXPECT_LE(page->deadline_nanos(), after + int64_t{3600} * 1000000000);
  EXPECT_FALSE(page->Expired());
  EXPECT_TRUE(page->Expired(after + int64_t{3601} * 1000000000));

  (*fence)->SetRemaining(absl::ZeroDuration());
  EXPECT_TRUE(page->Expired());
  (*fence)->SetRemaining(-absl::InfiniteDuration());
  EXPECT_TRUE(page->Expired());
  (*fence)->SetRemaining(absl::InfiniteDuration());
  EXPECT_EQ(page->deadline_nanos(), trainer::kNoLease);
  // The worker's own view (what its shims read) is the same page.
  EXPECT_EQ(*(*fence)->page(), trainer::kNoLease);
}

// What a rank holding the fd (and knowing our source) would try, to keep running past its
// lease: every way to write the page is refused.
TEST(LeaseFenceTest, AHolderOfTheFdCannotMoveTheDeadline) {
  absl::StatusOr<std::unique_ptr<LeaseFence>> fence = LeaseFence::Create();
  ASSERT_TRUE(fence.ok()) << fence.status();
  (*fence)->SetRemaining(absl::Seconds(-1));
  const int fd = (*fence)->fd();
  const int64_t forever = trainer::kNoLease;

  errno = 0;
  EXPECT_EQ(::pwrite(fd, &forever, sizeof(forever), 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::mmap(nullptr, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_NE(::ftruncate(fd, 0), 0);
  EXPECT_NE(::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0) << "the seals are sealed";
  // Reopened through /proc, as a rank could: still sealed (the seals are the inode's).
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const int again = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(again, 0);
  EXPECT_EQ(::pwrite(again, &forever, sizeof(forever), 0), -1);
  EXPECT_EQ(::mmap(nullptr, 8, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0), MAP_FAILED);
  ::close(again);
  // A private writable mapping changes only the writer's copy.
  void* cow = ::mmap(nullptr, 8, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ASSERT_NE(cow, MAP_FAILED);
  *static_cast<int64_t*>(cow) = forever;
  ::munmap(cow, 8);

  absl::StatusOr<LeasePage> page = LeasePage::Map(fd);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->Expired());
}

TEST(LeasePageTest, RefusesWhatIsNotAPage) {
  EXPECT_FALSE(LeasePage::Map(-1).ok());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  absl::StatusOr<LeasePage> page = LeasePage::Map(fds[0]);
  EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace baton::worker
