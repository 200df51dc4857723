#include "common/security/tls.h"

#include <cstdlib>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using ::testing::HasSubstr;

TEST(CheckLoopbackOnlyTest, AllowsOnlyLoopback) {
  for (const char* ok : {"127.0.0.1:7070", "127.3.4.5:1", "localhost:0", "[::1]:7070",
                         "unix:/tmp/baton.sock"}) {
    EXPECT_OK(CheckLoopbackOnly(ok, "--listen")) << ok;
  }
  for (const char* bad : {"0.0.0.0:7070", "[::]:7070", "198.18.0.1:7070", "example.com:1",
                          "10.0.0.1:80"}) {
    EXPECT_THAT(CheckLoopbackOnly(bad, "--listen"),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--listen is")))
        << bad;
  }
}

TEST(HostOfAddressTest, SplitsHostAndPort) {
  EXPECT_EQ(HostOfAddress("a.b:70"), "a.b");
  EXPECT_EQ(HostOfAddress("[::1]:70"), "::1");
  EXPECT_EQ(HostOfAddress("dns:///h:1"), "h");
  EXPECT_EQ(HostOfAddress("h"), "h");
  EXPECT_EQ(HostOfAddress("[::1"), "[::1");
}

TEST(CredentialsTest, ClearErrorsForMissingOrBadFiles) {
  TransportSecurity security;
  EXPECT_THAT(MakeServerCredentials(security).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_cert")));
  EXPECT_THAT(MakeChannelCredentials(security).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--ca")));
  const std::string not_pem = ::testing::TempDir() + "/not.pem";
  std::ofstream(not_pem) << "hello";
  security.tls.ca = not_pem;
  EXPECT_THAT(MakeChannelCredentials(security).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not a PEM file")));
  security.tls.ca = "/nonexistent/ca.pem";
  EXPECT_THAT(MakeChannelCredentials(security).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cannot read --ca")));
  security.insecure = true;
  EXPECT_FALSE(MakeChannelCredentials(security).ok());
}

TEST(CertificateCommonNameTest, ReadsTheSubjectCn) {
  const std::string dir = ::testing::TempDir();
  ASSERT_EQ(std::system(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                         "-keyout " + dir + "/k.pem -out " + dir + "/c.pem -days 1 "
                         "-subj /CN=worker-7 2>/dev/null").c_str()),
            0);
  absl::StatusOr<std::string> cn = CertificateCommonName(dir + "/c.pem");
  ASSERT_OK(cn.status());
  EXPECT_EQ(*cn, "worker-7");
  EXPECT_THAT(CertificateCommonName(dir + "/k.pem").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no certificate")));
}

}  // namespace
}  // namespace baton
