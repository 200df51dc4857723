#include "worker/trainer/contract/rejoin_protocol.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::baton::StatusIs;
using ::testing::HasSubstr;

// A pipe holding `bytes`, its write end closed: the read end.
int PipeWith(const std::string& bytes) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  EXPECT_EQ(::write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fds[1]);
  return fds[0];
}

LaunchEnv Current() {
  LaunchEnv env;
  env.rank = 1;
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = 1000;
  env.job_id = "j-1";
  env.generation = 3;
  env.metrics_fd = 3;
  return env;
}

LaunchEnv Next() {
  LaunchEnv env = Current();
  env.generation = 4;
  env.rank = 0;
  env.world_size = 3;
  env.local_rank = 1;
  env.local_world_size = 2;
  env.group_rank = 1;
  env.master_addr = "198.18.0.2";
  env.master_port = 2000;
  return env;
}

absl::StatusOr<std::optional<LaunchEnv>> Read(const std::string& bytes) {
  const int fd = PipeWith(bytes);
  absl::StatusOr<std::optional<LaunchEnv>> read = ReadRejoin(fd, Current());
  ::close(fd);
  return read;
}

TEST(RejoinProtocol, RoundTripsTheNextGenerationKeepingJobAndMetricsFd) {
  ASSERT_OK_AND_ASSIGN(const std::optional<LaunchEnv> next, Read(EncodeRejoin(Next())));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->generation, 4);
  EXPECT_EQ(next->rank, 0);
  EXPECT_EQ(next->world_size, 3);
  EXPECT_EQ(next->local_rank, 1);
  EXPECT_EQ(next->local_world_size, 2);
  EXPECT_EQ(next->group_rank, 1);
  EXPECT_EQ(next->master_addr, "198.18.0.2");
  EXPECT_EQ(next->master_port, 2000);
  EXPECT_EQ(next->job_id, "j-1");
  EXPECT_EQ(next->metrics_fd, 3);
}

TEST(RejoinProtocol, EofBeforeAMessageMeansNoFurtherGeneration) {
  ASSERT_OK_AND_ASSIGN(const std::optional<LaunchEnv> next, Read(""));
  EXPECT_FALSE(next.has_value());
}

// Two messages in the pipe: each read takes one, nothing past it.
TEST(RejoinProtocol, ReadsOneMessageAtATime) {
  LaunchEnv later = Next();
  later.generation = 5;
  const int fd = PipeWith(EncodeRejoin(Next()) + EncodeRejoin(later));
  ASSERT_OK_AND_ASSIGN(std::optional<LaunchEnv> first, ReadRejoin(fd, Current()));
  ASSERT_OK_AND_ASSIGN(std::optional<LaunchEnv> second, ReadRejoin(fd, *first));
  EXPECT_EQ(first->generation, 4);
  EXPECT_EQ(second->generation, 5);
  ::close(fd);
}

TEST(RejoinProtocol, RefusesWhatIsNotAWholeValidMessage) {
  const std::string good = EncodeRejoin(Next());
  EXPECT_THAT(Read(good.substr(0, good.size() - 1)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("EOF before its empty line")));
  EXPECT_THAT(Read("BATON_JOB_ID=other\n" + good),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'BATON_JOB_ID=other'")));
  EXPECT_THAT(Read("RANK=1\n" + good),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK twice")));
  std::string no_port = good;
  no_port.replace(no_port.find("MASTER_PORT=2000\n"), 17, "");
  EXPECT_THAT(Read(no_port),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no MASTER_PORT")));
  LaunchEnv bad_rank = Next();
  bad_rank.rank = 3;
  EXPECT_THAT(Read(EncodeRejoin(bad_rank)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rejoin message: environment variable RANK=3 must be in [0, 3)")));
  LaunchEnv same = Next();
  same.generation = 3;
  EXPECT_THAT(Read(EncodeRejoin(same)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("BATON_GENERATION=3 is not above this rank's 3")));
  EXPECT_THAT(Read(std::string(kMaxRejoinMessageBytes + 10, 'x')),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("longer than 4096")));
  EXPECT_THAT(Read("\n"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
}

TEST(RejoinProtocol, OnlyAPeersLossIsRejoinable) {
  EXPECT_TRUE(RejoinableFailure(absl::UnavailableError("gloo all-reduce failed")));
  EXPECT_FALSE(RejoinableFailure(absl::FailedPreconditionError("superseded")));
  EXPECT_FALSE(RejoinableFailure(absl::InternalError("CUDA error")));
  EXPECT_FALSE(RejoinableFailure(absl::OkStatus()));
}

TEST(RejoinProtocol, ExportSetsTheProcessEnvironment) {
  ExportRejoinEnv(Next());
  EXPECT_STREQ(std::getenv("BATON_GENERATION"), "4");
  EXPECT_STREQ(std::getenv("RANK"), "0");
  EXPECT_STREQ(std::getenv("MASTER_ADDR"), "198.18.0.2");
  EXPECT_STREQ(std::getenv("MASTER_PORT"), "2000");
  EXPECT_STREQ(std::getenv("LOCAL_WORLD_SIZE"), "2");
}

}  // namespace
}  // namespace baton::trainer
