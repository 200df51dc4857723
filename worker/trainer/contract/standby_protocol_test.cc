#include "worker/trainer/contract/standby_protocol.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A pipe holding `data`, write end closed: reads see `data`, then EOF.
class PipeWith {
 public:
  explicit PipeWith(const std::string& data) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    read_ = fds[0];
    EXPECT_EQ(::write(fds[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ::close(fds[1]);
  }
  ~PipeWith() { ::close(read_); }
  int fd() const { return read_; }

 private:
  int read_ = -1;
};

TEST(StandbyProtocolTest, RoundTripsEveryField) {
  StandbyRequest request;
  request.argv = {"/opt/baton-trainer", "--max_steps=5", "", "--hidden", "64,32"};
  request.env = {"A=1", "EMPTY=", "WITH_EQUALS=a=b", "SPACES=x y\nz"};
  request.working_dir = "/tmp/rank 0";
  absl::StatusOr<std::string> wire = EncodeStandbyRequest(request);
  ASSERT_OK(wire);
  PipeWith pipe(*wire + "trailing bytes are not read");

  absl::StatusOr<std::optional<StandbyRequest>> read = ReadStandbyRequest(pipe.fd());
  ASSERT_OK(read);
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->argv, request.argv);
  EXPECT_EQ((*read)->env, request.env);
  EXPECT_EQ((*read)->working_dir, request.working_dir);
  char c;
  EXPECT_EQ(::read(pipe.fd(), &c, 1), 1);  // The request ended where it should.
  EXPECT_EQ(c, 't');
}

TEST(StandbyProtocolTest, EmptyEnvironmentAndWorkingDir) {
  StandbyRequest request;
  request.argv = {"prog"};
  absl::StatusOr<std::string> wire = EncodeStandbyRequest(request);
  ASSERT_OK(wire);
  PipeWith pipe(*wire);
  absl::StatusOr<std::optional<StandbyRequest>> read = ReadStandbyRequest(pipe.fd());
  ASSERT_OK(read);
  ASSERT_TRUE(read->has_value());
  EXPECT_THAT((*read)->argv, ElementsAre("prog"));
  EXPECT_TRUE((*read)->env.empty());
  EXPECT_EQ((*read)->working_dir, "");
}

TEST(StandbyProtocolTest, EofBeforeARequestIsNoRequest) {
  PipeWith pipe("");
  absl::StatusOr<std::optional<StandbyRequest>> read = ReadStandbyRequest(pipe.fd());
  ASSERT_OK(read);
  EXPECT_FALSE(read->has_value());
}

TEST(StandbyProtocolTest, TruncatedOrCorruptRequestsAreDataLoss) {
  StandbyRequest request;
  request.argv = {"prog", "--flag=1"};
  request.env = {"A=1"};
  absl::StatusOr<std::string> wire = EncodeStandbyRequest(request);
  ASSERT_OK(wire);
  for (size_t keep : {size_t{3}, size_t{8}, wire->size() - 1}) {
    PipeWith pipe(wire->substr(0, keep));
    EXPECT_THAT(ReadStandbyRequest(pipe.fd()),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")))
        << keep;
  }
  {
    std::string bad = *wire;
    bad[0] = 'X';
    PipeWith pipe(bad);
    EXPECT_THAT(ReadStandbyRequest(pipe.fd()),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("magic")));
  }
  {
    // A count larger than the payload could hold.
    std::string payload("99999999", 8);
    payload.push_back('\0');
    std::string bad = "BSR1";
    const uint32_t size = static_cast<uint32_t>(payload.size());
    bad.append(reinterpret_cast<const char*>(&size), sizeof(size));
    PipeWith pipe(bad + payload);
    EXPECT_THAT(ReadStandbyRequest(pipe.fd()),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed")));
  }
  // Counts in another form than the encoder writes (whitespace, a sign, a leading zero):
  // standby_request_fuzz found "20\r" taken as 20.
  for (const std::string count : {"1\r", " 1", "+1", "01", ""}) {
    std::string payload = count;
    payload.append(std::string("\0p\0" "0\0\0", 6));
    std::string bad = "BSR1";
    const uint32_t size = static_cast<uint32_t>(payload.size());
    bad.append(reinterpret_cast<const char*>(&size), sizeof(size));
    PipeWith pipe(bad + payload);
    EXPECT_THAT(ReadStandbyRequest(pipe.fd()),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed")))
        << "count '" << count << "'";
  }
  {
    // The canonical form of the same request is read.
    std::string payload("1\0p\0" "0\0\0", 7);
    std::string good = "BSR1";
    const uint32_t size = static_cast<uint32_t>(payload.size());
    good.append(reinterpret_cast<const char*>(&size), sizeof(size));
    PipeWith pipe(good + payload);
    EXPECT_OK(ReadStandbyRequest(pipe.fd()));
  }
  {
    std::string bad = "BSR1";
    const uint32_t size = kMaxStandbyRequestBytes + 1;
    bad.append(reinterpret_cast<const char*>(&size), sizeof(size));
    PipeWith pipe(bad);
    EXPECT_THAT(ReadStandbyRequest(pipe.fd()),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("too large")));
  }
}

TEST(StandbyProtocolTest, EncodeRejectsWhatExecCouldNotCarry) {
  StandbyRequest request;
  EXPECT_THAT(EncodeStandbyRequest(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty argv")));
  request.argv = {"prog", std::string("a\0b", 3)};
  EXPECT_THAT(EncodeStandbyRequest(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NUL")));
}

}  // namespace
}  // namespace baton::trainer
