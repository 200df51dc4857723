#include "worker/supervisor/job_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// ResolvePath's value, or its error as text.
std::string Resolved(const std::string& path) {
  absl::StatusOr<std::string> r = ResolvePath(path);
  return r.ok() ? *r : r.status().ToString();
}

class JobPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char real[PATH_MAX];
    const std::string dir = MakeTestDir("paths");
    ASSERT_NE(::realpath(dir.c_str(), real), nullptr);
    root_ = real;
    policy_.work_dir = root_ + "/work";
    policy_.allowed_roots = {root_ + "/shared"};
    for (const char* d :
         {"/work/jobs/j-1/ckpt", "/work/jobs/j-2/ckpt", "/shared/data", "/elsewhere"}) {
      std::filesystem::create_directories(root_ + d);
    }
  }
  absl::Status Check(const std::string& checkpoint_dir, const std::string& job = "j-1") {
    baton::v1::JobSpec spec;
    spec.set_checkpoint_dir(checkpoint_dir);
    return CheckJobPaths(spec, job, policy_);
  }
  std::string root_;
  PathPolicy policy_;
};

TEST_F(JobPathsTest, ResolvesExistingPartsThroughSymlinksAndTheRestLexically) {
  ASSERT_EQ(::symlink((root_ + "/elsewhere").c_str(), (root_ + "/shared/link").c_str()), 0);
  EXPECT_EQ(Resolved(root_ + "/shared/./data/../data/new/x"), root_ + "/shared/data/new/x");
  EXPECT_EQ(Resolved(root_ + "/shared/link/new"), root_ + "/elsewhere/new");
  EXPECT_EQ(Resolved(root_ + "/shared/new/../../elsewhere"), root_ + "/elsewhere");
  EXPECT_THAT(ResolvePath("relative/path"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST_F(JobPathsTest, PathsUnderTheJobsOwnDirectoryOrAnAllowedRootPass) {
  EXPECT_OK(Check(root_ + "/work/jobs/j-1/ckpt"));
  EXPECT_OK(Check(root_ + "/work/jobs/j-1/not-yet/created"));
  EXPECT_OK(Check(root_ + "/shared/ckpt/j-1"));
  EXPECT_OK(Check(""));  // The default: the job's own directory.
}

TEST_F(JobPathsTest, AnotherJobsDirectoryOrTheWorkersFilesAreRefused) {
  EXPECT_THAT(Check(root_ + "/work/jobs/j-2/ckpt"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("checkpoint_dir"), HasSubstr("j-2"))));
  EXPECT_THAT(Check(root_ + "/work"), StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(Check(root_ + "/work/jobs"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
}

TEST_F(JobPathsTest, PathsOutsideTheAllowedRootsAreRefused) {
  EXPECT_THAT(Check(root_ + "/elsewhere"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("is not under an allowed path of this worker")));
  EXPECT_THAT(Check("/"), StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
}

TEST_F(JobPathsTest, DotDotEscapesAreRefused) {
  EXPECT_THAT(Check(root_ + "/shared/../elsewhere"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("resolved: " + root_ + "/elsewhere")));
  EXPECT_THAT(Check(root_ + "/work/jobs/j-1/../j-2/ckpt"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(Check(root_ + "/work/jobs/j-1/new/../../j-2"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
}

TEST_F(JobPathsTest, SymlinkEscapesAreRefused) {
  ASSERT_EQ(::symlink((root_ + "/elsewhere").c_str(), (root_ + "/shared/out").c_str()), 0);
  ASSERT_EQ(::symlink((root_ + "/work/jobs/j-2").c_str(), (root_ + "/shared/j2").c_str()), 0);
  ASSERT_EQ(::symlink((root_ + "/missing").c_str(), (root_ + "/shared/dangling").c_str()), 0);
  EXPECT_THAT(Check(root_ + "/shared/out/ckpt"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(Check(root_ + "/shared/j2/ckpt"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(Check(root_ + "/shared/dangling"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("checkpoint_dir")));
}

TEST_F(JobPathsTest, EveryPathFieldIsChecked) {
  baton::v1::JobSpec spec;
  spec.mutable_command()->set_working_dir(root_ + "/elsewhere");
  EXPECT_THAT(CheckJobPaths(spec, "j-1", policy_),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("command.working_dir")));
  spec.Clear();
  spec.mutable_trainer()->set_data_dir(root_ + "/elsewhere");
  EXPECT_THAT(CheckJobPaths(spec, "j-1", policy_),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("trainer.data_dir")));
  spec.mutable_trainer()->set_data_dir(root_ + "/shared/data");
  spec.mutable_trainer()->set_sample_log(root_ + "/work/samples.log");
  EXPECT_THAT(CheckJobPaths(spec, "j-1", policy_),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("trainer.sample_log")));
}

TEST_F(JobPathsTest, IsolationHidesTheWorkDirButTheJobsDirAndEverySecretFile) {
  // The quickstart's layout: every PKI file in one directory outside the work_dir, the key
  // reached through a symlink as Kubernetes mounts a Secret.
  std::filesystem::create_directories(root_ + "/pki/..data");
  for (const char* f : {"/pki/..data/w1.key", "/pki/w1.crt", "/pki/ca.crt"}) {
    std::ofstream(root_ + f) << "secret";
  }
  std::filesystem::create_symlink("..data/w1.key", root_ + "/pki/w1.key");
  policy_.secret_files = {root_ + "/pki/w1.key", root_ + "/pki/w1.crt", root_ + "/pki/ca.crt"};
  absl::StatusOr<FsIsolation> isolation = IsolationFor("j-1", policy_);
  ASSERT_OK(isolation);
  EXPECT_THAT(isolation->hidden,
              ::testing::ElementsAre(root_ + "/work", root_ + "/pki/..data/w1.key",
                                     root_ + "/pki/w1.crt", root_ + "/pki/ca.crt"));
  EXPECT_THAT(isolation->exceptions, ::testing::ElementsAre(root_ + "/work/jobs/j-1"));
}

// A job may use its own snapshot directory only: the root is hidden (already, under the
// work_dir; on its own, elsewhere) but for <root>/<job> (or its snapshot_name).
TEST_F(JobPathsTest, IsolationHidesOtherJobsSnapshots) {
  std::filesystem::create_directories(root_ + "/work/snapshots/j-1");
  policy_.snapshot_root = root_ + "/work/snapshots";
  ASSERT_OK_AND_ASSIGN(FsIsolation under_work, IsolationFor("j-1", policy_));
  EXPECT_THAT(under_work.hidden, ::testing::ElementsAre(root_ + "/work"));
  EXPECT_THAT(under_work.exceptions,
              ::testing::ElementsAre(root_ + "/work/jobs/j-1", root_ + "/work/snapshots/j-1"));
  std::filesystem::create_directories(root_ + "/tmpfs/snap/j-1");
  policy_.snapshot_root = root_ + "/tmpfs/snap";
  ASSERT_OK_AND_ASSIGN(FsIsolation elsewhere, IsolationFor("j-1", policy_));
  EXPECT_THAT(elsewhere.hidden, ::testing::ElementsAre(root_ + "/work", root_ + "/tmpfs/snap"));
  EXPECT_THAT(elsewhere.exceptions,
              ::testing::ElementsAre(root_ + "/work/jobs/j-1", root_ + "/tmpfs/snap/j-1"));
  // Named by id and creation time (SnapshotDirs::DirName): only that one, not <root>/<job>,
  // which a job of another coordinator with the same id may have left.
  policy_.snapshot_name = "j-1.1700000000000000000";
  ASSERT_OK_AND_ASSIGN(FsIsolation named, IsolationFor("j-1", policy_));
  EXPECT_THAT(named.exceptions,
              ::testing::ElementsAre(root_ + "/work/jobs/j-1",
                                     root_ + "/tmpfs/snap/j-1.1700000000000000000"));
}

}  // namespace
}  // namespace baton::worker
