#include "worker/trainer/contract/rejoin_protocol.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

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

// The worker's side: the message from a launch environment, and the rank's waiting line.
TEST(RejoinProtocol, EncodesFromALaunchEnvironmentAndParsesWaitingLines) {
  ASSERT_OK_AND_ASSIGN(
      const std::string message,
      EncodeRejoinFromEnv({"PATH=/bin", "RANK=0", "WORLD_SIZE=3", "LOCAL_RANK=1",
                           "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "MASTER_ADDR=198.18.0.2",
                           "MASTER_PORT=2000", "BATON_GENERATION=4", "BATON_JOB_ID=j-1"}));
  EXPECT_EQ(message, EncodeRejoin(Next()));
  EXPECT_THAT(EncodeRejoinFromEnv({"RANK=5", "WORLD_SIZE=2"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK=5")));
  EXPECT_EQ(ParseWaitingLine("waiting 7"), 7);
  EXPECT_EQ(ParseWaitingLine("Lwaiting 8"), 8);  // A standby's loaded byte first.
  EXPECT_EQ(ParseWaitingLine("waiting x"), std::nullopt);
  EXPECT_EQ(ParseWaitingLine("L"), std::nullopt);
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

// Over a socket pair the rank says it waits; over a pipe the announcement is dropped.
TEST(RejoinProtocol, AnnouncesWaitingOnASocket) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  AnnounceWaiting(sv[1], 7);
  char buf[32] = {};
  ASSERT_EQ(::read(sv[0], buf, sizeof(buf) - 1), 10);
  EXPECT_STREQ(buf, "waiting 7\n");
  // The worker's message comes back the other way on the same fd.
  const std::string message = EncodeRejoin(Next());
  ASSERT_EQ(::write(sv[0], message.data(), message.size()), static_cast<ssize_t>(message.size()));
  ASSERT_OK_AND_ASSIGN(std::optional<LaunchEnv> next, ReadRejoin(sv[1], Current()));
  EXPECT_EQ(next->generation, 4);
  ::close(sv[0]);
  ::close(sv[1]);
  const int fd = PipeWith("");
  AnnounceWaiting(fd, 7);  // The read end of a pipe: ignored.
  ::close(fd);
}

// Signals that interrupt the wait: with the stop flag set the wait ends (CANCELLED);
// without it the read goes on and takes the message.
class RejoinSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(fds_), 0);
    struct sigaction action = {};
    action.sa_handler = [](int) {};  // No SA_RESTART: a blocked read(2) returns EINTR.
    sigemptyset(&action.sa_mask);
    ASSERT_EQ(::sigaction(SIGUSR1, &action, nullptr), 0);
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // Signals this thread every millisecond (the read may not have blocked yet when one comes)
  // until `done`, at most 10000 times; after `then_write` of them writes the message.
  std::thread Signaller(int then_write) {
    const pthread_t reader = pthread_self();
    return std::thread([this, reader, then_write] {
      for (int i = 0; i < 10000 && !done_.load(); ++i) {
        ::pthread_kill(reader, SIGUSR1);
        if (i == then_write) {
          const std::string message = EncodeRejoin(Next());
          ASSERT_EQ(::write(fds_[1], message.data(), message.size()),
                    static_cast<ssize_t>(message.size()));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  int fds_[2];
  std::atomic<bool> done_{false};
};

TEST_F(RejoinSignalTest, AStopSignalEndsTheWait) {
  std::atomic<bool> stop{true};  // As the SIGTERM handler leaves it.
  std::thread signaller = Signaller(/*then_write=*/-1);
  EXPECT_THAT(ReadRejoin(fds_[0], Current(), &stop),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("stopped while waiting")));
  done_.store(true);
  signaller.join();
}

TEST_F(RejoinSignalTest, OtherSignalsAreRiddenOut) {
  std::atomic<bool> stop{false};
  std::thread signaller = Signaller(/*then_write=*/20);
  absl::StatusOr<std::optional<LaunchEnv>> next = ReadRejoin(fds_[0], Current(), &stop);
  done_.store(true);
  signaller.join();
  ASSERT_OK(next.status());
  EXPECT_EQ((*next)->generation, 4);
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
