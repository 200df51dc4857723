#include "coordinator/store/testing/etcd_suite.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

std::unique_ptr<EtcdMember> EtcdSuite::member_;

void EtcdSuite::SetUpTestSuite() {
  static int suites = 0;  // A data directory per suite of the binary.
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<std::unique_ptr<EtcdMember>> m =
      EtcdMember::Start(absl::StrCat(tmp ? tmp : "/tmp", "/etcd-", suites++));
  ASSERT_TRUE(m.ok()) << m.status();
  member_ = *std::move(m);
}

void EtcdSuite::TearDownTestSuite() { member_.reset(); }

void EtcdSuite::SetUp() { ASSERT_NE(member_, nullptr) << "the suite's etcd member did not start"; }

}  // namespace baton::coordinator
