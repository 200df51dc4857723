#include "coordinator/ha/etcd_target.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseStoreFlagTest, SqliteIsNoEtcdTarget) {
  const auto t = ParseStoreFlag("sqlite");
  ASSERT_OK(t);
  EXPECT_FALSE(t->has_value());
}

TEST(ParseStoreFlagTest, ReadsEndpointsPrefixAndLimits) {
  const auto t = ParseStoreFlag(
      "etcd://etcd-0.etcd:2379,10.0.0.2:2379,[::1]:2379/team/a/?max_txn_ops=1024&"
      "max_request_bytes=8388608");
  ASSERT_OK(t);
  ASSERT_TRUE(t->has_value());
  EXPECT_THAT((*t)->endpoints, ElementsAre("etcd-0.etcd:2379", "10.0.0.2:2379", "[::1]:2379"));
  EXPECT_EQ((*t)->store.prefix, "/team/a/");
  EXPECT_EQ((*t)->store.max_txn_ops, 1024);
  EXPECT_EQ((*t)->store.max_request_bytes, 8388608);
  const auto plain = ParseStoreFlag("etcd://127.0.0.1:2379");
  ASSERT_OK(plain);
  EXPECT_EQ((*plain)->store.prefix, "/baton/");
  EXPECT_EQ((*plain)->store.max_txn_ops, 128);  // etcd's default
}

TEST(ParseStoreFlagTest, NamesWhatIsWrong) {
  const struct {
    const char* flag;
    const char* error;
  } cases[] = {
      {"postgres://x", "unknown store"},
      {"etcd://", "endpoint '' is not HOST:PORT"},
      {"etcd://h1:2379,,h2:2379", "endpoint '' is not HOST:PORT"},
      {"etcd://h1", "endpoint 'h1' is not HOST:PORT"},
      {"etcd://h1:0", "endpoint 'h1:0'"},
      {"etcd://h1:2379/", "prefix '' is empty"},
      {"etcd://h1:2379/a//b", "has an empty part"},
      {"etcd://h1:2379?max_txn_ops=x", "'max_txn_ops=x' is not NAME=NUMBER"},
      {"etcd://h1:2379?max_txn_ops=1", "allowed are max_txn_ops (>= 2)"},
      {"etcd://h1:2379?quota=5", "'quota=5': allowed are"},
  };
  for (const auto& c : cases) {
    const auto t = ParseStoreFlag(c.flag);
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << c.flag;
    EXPECT_THAT(t.status().message(), HasSubstr(c.error)) << c.flag;
    EXPECT_THAT(t.status().message(), HasSubstr("allowed: 'sqlite' or 'etcd://")) << c.flag;
  }
}

}  // namespace
}  // namespace baton::coordinator
