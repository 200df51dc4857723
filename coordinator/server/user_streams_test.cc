#include "coordinator/server/user_streams.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Principal Who(const std::string& user, const std::string& token_hash) {
  return Principal{user, Role::kSubmitter, token_hash};
}

TEST(UserStreamsTest, BoundsEachUserAndEveryoneNamingTheLimit) {
  UserStreams streams(UserStreamLimits{/*max_per_user=*/2, /*max_total=*/3});
  auto noop = [](const absl::Status&) {};
  absl::StatusOr<uint64_t> a1 = streams.Open(Who("alice", "ha"), noop);
  absl::StatusOr<uint64_t> a2 = streams.Open(Who("alice", "ha"), noop);
  ASSERT_OK(a1);
  ASSERT_OK(a2);
  EXPECT_THAT(streams.Open(Who("alice", "ha"), noop),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("(--max_streams_per_user=2)")));
  ASSERT_OK(streams.Open(Who("bob", "hb"), noop));
  EXPECT_THAT(streams.Open(Who("carol", "hc"), noop),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("at most 3 open watch and log streams of all users together "
                                 "(--max_streams)")));
  EXPECT_EQ(streams.open(), 3);
  streams.Close(*a1);
  streams.Close(*a1);  // Twice: ignored.
  EXPECT_EQ(streams.open_of("alice"), 1);
  EXPECT_OK(streams.Open(Who("alice", "ha"), noop));
}

TEST(UserStreamsTest, EndsTheStreamsOfRevokedTokensOnly) {
  UserStreams streams;
  std::vector<std::string> ended;
  auto end_of = [&](std::string name) {
    return [&ended, name](const absl::Status& s) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
      EXPECT_THAT(s.message(), HasSubstr("revoked"));
      ended.push_back(name);
    };
  };
  ASSERT_OK(streams.Open(Who("alice", "old"), end_of("alice-1")));
  ASSERT_OK(streams.Open(Who("alice", "old"), end_of("alice-2")));
  ASSERT_OK(streams.Open(Who("bob", "kept"), end_of("bob")));
  EXPECT_EQ(streams.EndRevoked([](const std::string& h) { return h == "kept"; }), 2);
  EXPECT_THAT(ended, ElementsAre("alice-1", "alice-2"));
}

}  // namespace
}  // namespace baton::coordinator
