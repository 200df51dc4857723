#include "coordinator/control/profile_table.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/message_limits.h"
#include "common/testing/status_matchers.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

using Result = absl::StatusOr<baton::v1::ProfileJobResponse>;

class ProfileTableTest : public ::testing::Test {
 protected:
  // A request for ranks 0 (worker w1) and 1 (worker w2) of j-1 generation 2, due in 60 s;
  // its result lands in `result`.
  ProfileTable::Request TwoRanks(std::optional<Result>* result) {
    ProfileTable::Request r;
    r.job_id = "j-1";
    r.generation = 2;
    r.rank_workers = {{0, "w1"}, {1, "w2"}};
    r.deadline = clock_.Now() + absl::Seconds(60);
    r.done = [result](Result res) { *result = std::move(res); };
    return r;
  }

  static baton::v1::ProfileTrace Trace(const std::string& id, int32_t rank,
                                       const std::string& json) {
    baton::v1::ProfileTrace t;
    t.set_job_id("j-1");
    t.set_generation(2);
    t.set_request_id(id);
    t.set_rank(rank);
    t.set_trace_json(json);
    return t;
  }

  FakeClock clock_;
  ProfileTable table_{&clock_, /*max_pending=*/2};
};

TEST_F(ProfileTableTest, CompletesWhenEveryRankAnsweredInRankOrder) {
  std::optional<Result> result;
  absl::StatusOr<std::string> id = table_.Add(TwoRanks(&result));
  ASSERT_OK(id.status());
  EXPECT_THAT(*id, MatchesRegex("[A-Za-z0-9._-]{1,64}"));
  ASSERT_OK(table_.OnTrace("w2", Trace(*id, 1, "{\"r\":1}")));
  EXPECT_FALSE(result.has_value());
  ASSERT_OK(table_.OnTrace("w1", Trace(*id, 0, "{\"r\":0}")));
  ASSERT_TRUE(result.has_value());
  ASSERT_OK(result->status());
  EXPECT_EQ((*result)->job_id(), "j-1");
  EXPECT_EQ((*result)->generation(), 2);
  ASSERT_EQ((*result)->traces_size(), 2);
  EXPECT_EQ((*result)->traces(0).rank(), 0);
  EXPECT_EQ((*result)->traces(0).trace_json(), "{\"r\":0}");
  EXPECT_EQ((*result)->traces(1).rank(), 1);
  EXPECT_EQ(table_.size(), 0u);
  // A late duplicate of a finished request is unknown.
  EXPECT_THAT(table_.OnTrace("w1", Trace(*id, 0, "{}")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(*id)));
}

TEST_F(ProfileTableTest, ExpiresAtItsDeadlineNamingTheMissingRanks) {
  std::optional<Result> result;
  absl::StatusOr<std::string> id_or = table_.Add(TwoRanks(&result));
  ASSERT_OK(id_or.status());
  const std::string id = *id_or;
  ASSERT_OK(table_.OnTrace("w1", Trace(id, 0, "{}")));
  clock_.Advance(absl::Seconds(60) - absl::Milliseconds(1));
  EXPECT_EQ(table_.ExpireDue(), 0);
  EXPECT_FALSE(result.has_value());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(table_.ExpireDue(), 1);
  ASSERT_TRUE(result.has_value());
  EXPECT_THAT(result->status(), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                         HasSubstr("missing: rank 1 on worker w2)")));
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(ProfileTableTest, BoundedRefusesBeyondMaxPendingUntilOneFinishes) {
  std::optional<Result> a, b, c;
  absl::StatusOr<std::string> id_a_or = table_.Add(TwoRanks(&a));
  ASSERT_OK(id_a_or.status());
  const std::string id_a = *id_a_or;
  ASSERT_OK(table_.Add(TwoRanks(&b)).status());
  EXPECT_THAT(table_.Add(TwoRanks(&c)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("at most 2")));
  EXPECT_FALSE(c.has_value());  // A refused request is never answered through `done`.
  ASSERT_OK(table_.OnTrace("w1", Trace(id_a, 0, "{}")));
  ASSERT_OK(table_.OnTrace("w2", Trace(id_a, 1, "{}")));
  ASSERT_TRUE(a.has_value());
  ASSERT_OK(table_.Add(TwoRanks(&c)).status());
  EXPECT_EQ(table_.size(), 2u);
}

TEST_F(ProfileTableTest, IdsAreUnique) {
  std::optional<Result> a, b;
  absl::StatusOr<std::string> id_a_or = table_.Add(TwoRanks(&a));
  ASSERT_OK(id_a_or.status());
  const std::string id_a = *id_a_or;
  absl::StatusOr<std::string> id_b_or = table_.Add(TwoRanks(&b));
  ASSERT_OK(id_b_or.status());
  const std::string id_b = *id_b_or;
  EXPECT_NE(id_a, id_b);
}

TEST_F(ProfileTableTest, RejectsDuplicateUnknownAndForeignReplies) {
  std::optional<Result> result;
  absl::StatusOr<std::string> id_or = table_.Add(TwoRanks(&result));
  ASSERT_OK(id_or.status());
  const std::string id = *id_or;
  ASSERT_OK(table_.OnTrace("w1", Trace(id, 0, "{}")));
  EXPECT_THAT(table_.OnTrace("w1", Trace(id, 0, "{}")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("rank 0 answered twice")));
  EXPECT_THAT(table_.OnTrace("w1", Trace("p99-0", 1, "{}")),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  // Rank 1 runs on w2: w1 may not answer for it.
  EXPECT_THAT(table_.OnTrace("w1", Trace(id, 1, "{}")),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("worker w1")));
  // A rank that was not asked.
  EXPECT_THAT(table_.OnTrace("w2", Trace(id, 5, "{}")),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  baton::v1::ProfileTrace other_gen = Trace(id, 1, "{}");
  other_gen.set_generation(3);
  EXPECT_THAT(table_.OnTrace("w2", other_gen),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_FALSE(result.has_value());
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(ProfileTableTest, RankErrorFailsTheRequestNamingIt) {
  std::optional<Result> result;
  absl::StatusOr<std::string> id_or = table_.Add(TwoRanks(&result));
  ASSERT_OK(id_or.status());
  const std::string id = *id_or;
  baton::v1::ProfileTrace bad = Trace(id, 1, "");
  bad.set_error("profile request: bad token 'steps=0'");
  ASSERT_OK(table_.OnTrace("w2", bad));
  ASSERT_OK(table_.OnTrace("w1", Trace(id, 0, "{}")));
  ASSERT_TRUE(result.has_value());
  EXPECT_THAT(result->status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("rank 1 on worker w2 sent no trace: profile request: bad")));
}

TEST_F(ProfileTableTest, TracesOverTheReplyBoundAreResourceExhausted) {
  std::optional<Result> result;
  absl::StatusOr<std::string> id_or = table_.Add(TwoRanks(&result));
  ASSERT_OK(id_or.status());
  const std::string id = *id_or;
  const std::string big(kMaxProfileTraceBytes, 'x');
  ASSERT_OK(table_.OnTrace("w1", Trace(id, 0, big)));
  ASSERT_OK(table_.OnTrace("w2", Trace(id, 1, big)));
  ASSERT_TRUE(result.has_value());
  EXPECT_THAT(result->status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("fewer ranks")));
}

TEST_F(ProfileTableTest, FailWhereFinishesMatchingRequestsWithMissingRanks) {
  std::optional<Result> a, b;
  absl::StatusOr<std::string> id_a_or = table_.Add(TwoRanks(&a));
  ASSERT_OK(id_a_or.status());
  const std::string id_a = *id_a_or;
  ProfileTable::Request other = TwoRanks(&b);
  other.job_id = "j-2";
  ASSERT_OK(table_.Add(std::move(other)).status());
  ASSERT_OK(table_.OnTrace("w1", Trace(id_a, 0, "{}")));
  table_.FailWhere([](const std::string& job, int64_t, const std::map<int32_t, std::string>&) {
    return job == "j-1" ? absl::UnavailableError("worker w2 was lost") : absl::OkStatus();
  });
  ASSERT_TRUE(a.has_value());
  EXPECT_THAT(a->status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker w2 was lost (missing: rank 1 on worker w2)")));
  EXPECT_FALSE(b.has_value());
  table_.FailAll(absl::UnavailableError("halted"));
  ASSERT_TRUE(b.has_value());
  EXPECT_THAT(b->status(), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(ProfileTableTest, DoneMayAddAnotherRequest) {
  std::optional<Result> a, b;
  ProfileTable::Request r = TwoRanks(&a);
  r.rank_workers = {{0, "w1"}};
  r.done = [&](Result res) {
    a = std::move(res);
    ASSERT_OK(table_.Add(TwoRanks(&b)).status());
  };
  absl::StatusOr<std::string> id_or = table_.Add(std::move(r));
  ASSERT_OK(id_or.status());
  const std::string id = *id_or;
  ASSERT_OK(table_.OnTrace("w1", Trace(id, 0, "{}")));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(table_.size(), 1u);
}

}  // namespace
}  // namespace baton::coordinator
