#pragma once

// gMock matchers for absl::Status / absl::StatusOr (Debian's Abseil ships none).
//   EXPECT_THAT(DoIt(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workers.min")));
//   ASSERT_OK(DoIt());

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace testing_internal {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace testing_internal

MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has status code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = testing_internal::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()),
                                       result_listener);
}

}  // namespace baton

#define ASSERT_OK(expr) ASSERT_TRUE((expr).ok()) << ::baton::testing_internal::GetStatus(expr)
#define EXPECT_OK(expr) EXPECT_TRUE((expr).ok()) << ::baton::testing_internal::GetStatus(expr)
