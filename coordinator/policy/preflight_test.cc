#include "coordinator/policy/preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/time/proto_time.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = HostVerdict::Kind;

constexpr double kFast = 1e9;  // bytes/s

// Answers of a gang where every link of the ring plan carries `rate(from, to)` bytes/s
// over one second.
std::map<std::string, baton::v1::PreflightResult> Answers(
    const std::vector<std::string>& gang,
    const std::function<double(const std::string&, const std::string&)>& rate) {
  std::map<std::string, baton::v1::PreflightResult> out;
  const std::vector<std::vector<int>> plan = PreflightSendTo(static_cast<int>(gang.size()));
  for (size_t i = 0; i < gang.size(); ++i) {
    baton::v1::PreflightResult& r = out[gang[i]];
    baton::v1::HostCheck* shm = r.add_checks();
    shm->set_name("shm");
    shm->set_ok(true);
    for (int j : plan[i]) {
      baton::v1::LinkMeasurement* l = r.add_links();
      l->set_peer_worker_id(gang[j]);
      const double bps = rate(gang[i], gang[j]);
      if (bps < 0) {
        l->set_error("198.18.0.9:4000: Connection refused");
        continue;
      }
      l->set_bytes(static_cast<int64_t>(bps));
      *l->mutable_duration() = ToProto(absl::Seconds(1));
      *l->mutable_connect_latency() = ToProto(absl::Microseconds(80 + 10 * j));
    }
  }
  return out;
}

std::vector<Kind> Kinds(const PreflightVerdict& v) {
  std::vector<Kind> out;
  for (const HostVerdict& h : v.hosts) out.push_back(h.kind);
  return out;
}

const std::vector<std::string> kGang = {"w1", "w2", "w3", "w4", "w5"};

TEST(PreflightSendToTest, RingOfNextTwoOrTheOtherOne) {
  EXPECT_THAT(PreflightSendTo(1), ElementsAre(ElementsAre()));
  EXPECT_THAT(PreflightSendTo(2), ElementsAre(ElementsAre(1), ElementsAre(0)));
  EXPECT_THAT(PreflightSendTo(3),
              ElementsAre(ElementsAre(1, 2), ElementsAre(2, 0), ElementsAre(0, 1)));
  // Every host sends on two links and receives on two, from distinct peers.
  const auto plan = PreflightSendTo(8);
  std::vector<int> in(8, 0);
  for (const auto& to : plan) {
    EXPECT_EQ(to.size(), 2u);
    for (int j : to) ++in[j];
  }
  EXPECT_THAT(in, ::testing::Each(2));
}

TEST(JudgePreflightTest, EvenLinksAllPass) {
  const PreflightVerdict v = JudgePreflight(
      kGang, Answers(kGang, [](auto&, auto&) { return kFast; }), 0.5, absl::Seconds(5));
  EXPECT_THAT(Kinds(v), ::testing::Each(Kind::kOk));
  EXPECT_TRUE(v.bandwidth_judged);
  EXPECT_DOUBLE_EQ(v.median_bps, kFast);
  EXPECT_EQ(v.median_latency, absl::Microseconds(100));
  EXPECT_THAT(PreflightSummary(v, absl::Milliseconds(230)),
              HasSubstr("5 host(s) checked in 230ms, median bandwidth 1 GB/s, median connect "
                        "latency 100us: all passed"));
}

// Each way of throttling one host's link names that host and none of its neighbours.
struct ThrottleCase {
  const char* name;
  bool out, in;  // which directions of w3's link are slow
};

class ThrottledHostTest : public ::testing::TestWithParam<ThrottleCase> {};

TEST_P(ThrottledHostTest, OnlyTheThrottledHostIsSlow) {
  const ThrottleCase c = GetParam();
  const auto rate = [&](const std::string& from, const std::string& to) {
    if ((c.out && from == "w3") || (c.in && to == "w3")) return 2e6;
    return kFast;
  };
  const PreflightVerdict v = JudgePreflight(kGang, Answers(kGang, rate), 0.5, absl::Seconds(5));
  EXPECT_THAT(Kinds(v), ElementsAre(Kind::kOk, Kind::kOk, Kind::kSlow, Kind::kOk, Kind::kOk))
      << c.name;
  EXPECT_THAT(v.hosts[2].reason, HasSubstr("of the gang's median 1 GB/s (below 50%)"));
  EXPECT_THAT(v.hosts[2].reason, HasSubstr("2 MB/s"));
}

INSTANTIATE_TEST_SUITE_P(Directions, ThrottledHostTest,
                         ::testing::Values(ThrottleCase{"egress", true, false},
                                           ThrottleCase{"ingress", false, true},
                                           ThrottleCase{"both", true, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JudgePreflightTest, NoiseWithinTheFractionIsNotSlow) {
  // Every link between 0.6x and 1x of the fastest: nobody below half the median.
  const auto rate = [](const std::string& from, const std::string& to) {
    return kFast * (0.6 + 0.1 * ((from[1] + to[1]) % 5));
  };
  EXPECT_THAT(Kinds(JudgePreflight(kGang, Answers(kGang, rate), 0.5, absl::Seconds(5))),
              ::testing::Each(Kind::kOk));
  // A fraction of 0 never calls a host slow.
  const auto slow_w3 = [](const std::string& from, const std::string& to) {
    return from == "w3" || to == "w3" ? 1.0 : kFast;
  };
  EXPECT_THAT(Kinds(JudgePreflight(kGang, Answers(kGang, slow_w3), 0, absl::Seconds(5))),
              ::testing::Each(Kind::kOk));
}

TEST(JudgePreflightTest, SilentFailedCheckAndUnreachableHostsFail) {
  auto answers = Answers(kGang, [](const std::string& from, const std::string& to) {
    return to == "w4" ? -1.0 : kFast;  // nobody reaches w4
  });
  answers.erase("w1");  // w1 never answered
  baton::v1::HostCheck* shm = answers["w2"].mutable_checks(0);
  shm->set_ok(false);
  shm->set_detail("cannot reserve 32 MiB in /dev/shm (1 MiB free of 64 MiB): No space left");
  const PreflightVerdict v = JudgePreflight(kGang, answers, 0.5, absl::Seconds(5));
  EXPECT_THAT(Kinds(v),
              ElementsAre(Kind::kFailed, Kind::kFailed, Kind::kOk, Kind::kFailed, Kind::kOk));
  EXPECT_THAT(v.hosts[0].reason, HasSubstr("no pre-flight answer within 5s"));
  EXPECT_THAT(v.hosts[1].reason, HasSubstr("shm: cannot reserve 32 MiB"));
  EXPECT_THAT(v.hosts[3].reason,
              HasSubstr("none of its peers reached it (from w2: 198.18.0.9:4000: Connection "
                        "refused; from w3: "));
}

TEST(JudgePreflightTest, WorkersOfOneMachineJudgeNoBandwidth) {
  const auto slow_w3 = [](const std::string& from, const std::string& to) {
    return from == "w3" || to == "w3" ? 1e6 : kFast;
  };
  const PreflightVerdict v = JudgePreflight(kGang, Answers(kGang, slow_w3), 0.5, absl::Seconds(5),
                                            /*judge_bandwidth=*/false);
  EXPECT_FALSE(v.bandwidth_judged);
  EXPECT_THAT(Kinds(v), ::testing::Each(Kind::kOk));
}

TEST(JudgePreflightTest, TwoHostsJudgeNoBandwidth) {
  const std::vector<std::string> two = {"w1", "w2"};
  const PreflightVerdict v = JudgePreflight(
      two, Answers(two, [](const std::string& from, auto&) { return from == "w1" ? 1.0 : kFast; }),
      0.5, absl::Seconds(5));
  EXPECT_FALSE(v.bandwidth_judged);
  EXPECT_THAT(Kinds(v), ElementsAre(Kind::kOk, Kind::kOk));
}

TEST(HostsToLeaveOutTest, FailedFirstThenSlowestWhileMinAllows) {
  PreflightVerdict v;
  v.hosts = {{"w1", Kind::kSlow, 5e6, 5e6, "slow"},
             {"w2", Kind::kOk, kFast, kFast, ""},
             {"w3", Kind::kSlow, 1e6, 9e6, "slow"},
             {"w4", Kind::kFailed, -1, -1, "no answer"},
             {"w5", Kind::kOk, kFast, kFast, ""}};
  const auto ids = [](const std::vector<const HostVerdict*>& hs) {
    std::vector<std::string> out;
    for (const HostVerdict* h : hs) out.push_back(h->worker_id);
    return out;
  };
  EXPECT_THAT(ids(HostsToLeaveOut(v, 5, 1)), ElementsAre("w4", "w3", "w1"));
  EXPECT_THAT(ids(HostsToLeaveOut(v, 5, 3)), ElementsAre("w4", "w3"));
  EXPECT_THAT(ids(HostsToLeaveOut(v, 5, 4)), ElementsAre("w4"));
  EXPECT_THAT(ids(HostsToLeaveOut(v, 5, 5)), ElementsAre());
}

TEST(FormatRateTest, DecimalUnits) {
  EXPECT_EQ(FormatRate(1.25e9), "1.25 GB/s");
  EXPECT_EQ(FormatRate(850e6), "850 MB/s");
  EXPECT_EQ(FormatRate(12e3), "12 kB/s");
  EXPECT_EQ(FormatRate(5), "5 B/s");
}

}  // namespace
}  // namespace baton::coordinator
