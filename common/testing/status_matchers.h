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

// Each evaluates `expr` (an absl::Status or absl::StatusOr) exactly once; on failure the
// message names the expression and its status, and more can be streamed after it.
#define ASSERT_OK(expr) BATON_STATUS_MATCHERS_OK_(expr, GTEST_FAIL)
#define EXPECT_OK(expr) BATON_STATUS_MATCHERS_OK_(expr, ADD_FAILURE)

#define BATON_STATUS_MATCHERS_OK_(expr, fail)                                            \
  GTEST_AMBIGUOUS_ELSE_BLOCKER_                                                          \
  if (const ::absl::Status baton_ok_status_ = ::baton::testing_internal::GetStatus(expr); \
      baton_ok_status_.ok()) {                                                           \
  } else                                                                                 \
    fail() << "Value of: " #expr "\n  Expected: OK\n    Actual: " << baton_ok_status_ << "\n"

// Evaluates `rexpr` (an absl::StatusOr<T>) once; on error fails the test (fatally, as
// ASSERT_OK), otherwise moves its value into `lhs` (a declaration, e.g. `const T x`, or an
// existing variable). Use in functions returning void.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  BATON_ASSERT_OK_AND_ASSIGN_(BATON_STATUS_MATCHERS_CAT_(baton_statusor_, __LINE__), lhs, rexpr)
#define BATON_ASSERT_OK_AND_ASSIGN_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  ASSERT_OK(statusor.status());                           \
  lhs = std::move(statusor).value()
#define BATON_STATUS_MATCHERS_CAT_(a, b) BATON_STATUS_MATCHERS_CAT_INNER_(a, b)
#define BATON_STATUS_MATCHERS_CAT_INNER_(a, b) a##b
