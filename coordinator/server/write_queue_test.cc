#include "coordinator/server/write_queue.h"

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "baton/v1/job_service.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

// A reactor whose client reads only when the test says so.
class FakeReactor {
 public:
  void StartWrite(const baton::v1::LogLine* msg) { in_flight.push_back(msg->text()); }
  void Finish(const grpc::Status& status) {
    ++finishes;
    finish_status = status;
  }
  std::vector<std::string> in_flight;  // every StartWrite, in order
  int finishes = 0;
  grpc::Status finish_status;
};

baton::v1::LogLine Line(size_t bytes) {
  baton::v1::LogLine line;
  line.set_text(std::string(bytes, 'x'));
  return line;
}

TEST(WriteQueueTest, AStalledClientIsCutOffWithItsMemoryBounded) {
  FakeReactor reactor;
  constexpr size_t kMax = 64 << 10;
  WriteQueue<baton::v1::LogLine, FakeReactor> queue(&reactor, kMax);
  // The client never completes the first write: everything else queues up to the bound.
  int accepted = 0;
  while (queue.Push(Line(1000))) {
    ++accepted;
    ASSERT_LE(queue.queued_bytes(), kMax);
    ASSERT_LT(accepted, 1000) << "the queue is unbounded";
  }
  EXPECT_GT(accepted, 50);
  EXPECT_EQ(reactor.in_flight.size(), 1u);
  // Only the message gRPC holds is kept; the call ends once its write completes.
  EXPECT_LE(queue.queued_bytes(), 1100u);
  EXPECT_FALSE(queue.Push(Line(10)));
  EXPECT_EQ(reactor.finishes, 0);
  queue.OnWriteDone(true);
  EXPECT_EQ(reactor.in_flight.size(), 1u) << "dropped messages were written";
  ASSERT_EQ(reactor.finishes, 1);
  EXPECT_EQ(reactor.finish_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(reactor.finish_status.error_message(), HasSubstr("not reading its stream"));
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

TEST(WriteQueueTest, AMessageLargerThanTheBoundEndsAnIdleCall) {
  FakeReactor reactor;
  WriteQueue<baton::v1::LogLine, FakeReactor> queue(&reactor, 100);
  EXPECT_FALSE(queue.Push(Line(1000)));
  EXPECT_TRUE(reactor.in_flight.empty());
  ASSERT_EQ(reactor.finishes, 1);
  EXPECT_EQ(reactor.finish_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST(WriteQueueTest, AReadingClientGetsEverythingInOrder) {
  FakeReactor reactor;
  WriteQueue<baton::v1::LogLine, FakeReactor> queue(&reactor, 10 << 10);
  for (int i = 0; i < 100; ++i) {
    baton::v1::LogLine line;
    line.set_text(std::to_string(i));
    ASSERT_TRUE(queue.Push(line));
    queue.OnWriteDone(true);  // the client keeps up
  }
  ASSERT_EQ(reactor.in_flight.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(reactor.in_flight[i], std::to_string(i));
  queue.Finish(absl::OkStatus());
  EXPECT_EQ(reactor.finishes, 1);
  EXPECT_TRUE(reactor.finish_status.ok());
}

}  // namespace
}  // namespace baton::coordinator
