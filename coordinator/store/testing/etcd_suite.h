#pragma once

// A gtest suite whose tests share one real etcd member (EtcdMember): started before the
// suite's first test, under $TEST_TMPDIR (or /tmp), and stopped after its last. Tests
// derive from it and read member(); SetUp fails the test if the member did not start (a
// derived SetUp calls it first and returns on HasFatalFailure()).

#include <memory>

#include "coordinator/store/testing/etcd_member.h"
#include "gtest/gtest.h"

namespace baton::coordinator {

class EtcdSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;

  static const EtcdMember& member() { return *member_; }

 private:
  static std::unique_ptr<EtcdMember> member_;
};

}  // namespace baton::coordinator
