#include "common/health/health_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

TEST(HealthCheckTest, RequestRoundTripsAnyServiceLength) {
  for (size_t n : {0, 1, 127, 128, 300, 20000}) {
    const std::string service(n, 's');
    const std::string bytes = EncodeHealthCheckRequest(service);
    EXPECT_EQ(DecodeHealthCheckRequest(bytes), service) << n;
  }
  // A length of 300 takes a two-byte varint (0xac 0x02), not one truncated byte.
  EXPECT_EQ(EncodeHealthCheckRequest(std::string(300, 's')).substr(0, 3), "\x0a\xac\x02");
  EXPECT_EQ(EncodeHealthCheckRequest("ab"), std::string("\x0a\x02"
                                                        "ab"));
}

TEST(HealthCheckTest, MalformedRequestsAreRefused) {
  EXPECT_EQ(DecodeHealthCheckRequest(std::string("\x0a\x05"
                                                 "ab")),
            std::nullopt)
      << "short";
  EXPECT_EQ(DecodeHealthCheckRequest(std::string("\x12\x01x")), std::nullopt) << "field 2";
  EXPECT_EQ(DecodeHealthCheckRequest(std::string("\x0a\xff")), std::nullopt) << "varint";
  EXPECT_EQ(DecodeHealthCheckRequest(std::string("\x0a\x01"
                                                 "a"
                                                 "\x0a\x01"
                                                 "b")),
            "b")
      << "the last field wins, as in protobuf";
}

TEST(HealthCheckTest, ResponseStatuses) {
  for (ServingStatus s :
       {ServingStatus::kServing, ServingStatus::kNotServing, ServingStatus::kServiceUnknown}) {
    EXPECT_EQ(DecodeHealthCheckResponse(EncodeHealthCheckResponse(s)), s);
  }
  EXPECT_EQ(EncodeHealthCheckResponse(ServingStatus::kServing), std::string("\x08\x01"));
  EXPECT_EQ(DecodeHealthCheckResponse(""), ServingStatus::kUnknown);
  EXPECT_EQ(DecodeHealthCheckResponse(std::string("\x08\x09")), ServingStatus::kUnknown);
  EXPECT_STREQ(ServingStatusName(ServingStatus::kNotServing), "NOT_SERVING");
}

}  // namespace
}  // namespace baton
