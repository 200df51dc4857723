#include "worker/agent/worker_identity.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(WorkerIdentityTest, CreatesOnceThenKeeps) {
  const std::string dir = FreshDir("identity");
  absl::StatusOr<std::string> first = LoadOrCreateWorkerId(dir);
  ASSERT_OK(first);
  EXPECT_THAT(*first, ::testing::MatchesRegex("w-[0-9a-f]{16}"));
  absl::StatusOr<std::string> second = LoadOrCreateWorkerId(dir);
  ASSERT_OK(second);
  EXPECT_EQ(*first, *second);
}

TEST(WorkerIdentityTest, ReadsExistingIdTrimmed) {
  const std::string dir = FreshDir("identity-existing");
  std::ofstream(dir + "/worker_id") << "  gpu-box-7 \n";
  absl::StatusOr<std::string> id = LoadOrCreateWorkerId(dir);
  ASSERT_OK(id);
  EXPECT_EQ(*id, "gpu-box-7");
}

TEST(WorkerIdentityTest, MissingDirectoryIsAnError) {
  EXPECT_THAT(LoadOrCreateWorkerId(FreshDir("identity-x") + "/missing"),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("worker_id")));
}

}  // namespace
}  // namespace baton::worker
