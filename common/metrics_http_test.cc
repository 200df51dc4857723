#include "common/metrics_http.h"

#include <memory>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"

namespace baton {
namespace {

TEST(ServeMetricsTest, BindsAnOsChosenPortAndRefusesATakenOne) {
  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> first =
      ServeMetrics("127.0.0.1:0", registry);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->GetListeningPorts().at(0);
  EXPECT_GT(port, 0);
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> second =
      ServeMetrics(absl::StrCat("127.0.0.1:", port), registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace baton
