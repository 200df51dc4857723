#include "worker/trainer/comm/host/host_topology.h"

#include <future>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct GroupingCase {
  std::string name;
  std::vector<std::string> keys;
  std::vector<std::vector<int>> hosts;
  std::vector<int> host_of;
  std::vector<int> local_rank_of;
  bool any_shared;
};

TEST(HostTopologyTest, GroupsRanksByKeyInOrderOfTheirLowestRank) {
  const std::vector<GroupingCase> cases = {
      {"one rank", {"a"}, {{0}}, {0}, {0}, false},
      {"one host", {"a", "a", "a"}, {{0, 1, 2}}, {0, 0, 0}, {0, 1, 2}, true},
      {"2 x 2", {"a", "a", "b", "b"}, {{0, 1}, {2, 3}}, {0, 0, 1, 1}, {0, 1, 0, 1}, true},
      {"interleaved", {"b", "a", "b", "a"}, {{0, 2}, {1, 3}}, {0, 1, 0, 1}, {0, 0, 1, 1}, true},
      {"uneven 2+1", {"x", "x", "y"}, {{0, 1}, {2}}, {0, 0, 1}, {0, 1, 0}, true},
      {"every rank alone", {"x", "y", "z"}, {{0}, {1}, {2}}, {0, 1, 2}, {0, 0, 0}, false},
  };
  for (const GroupingCase& c : cases) {
    SCOPED_TRACE(c.name);
    const HostTopology t = GroupByHostKey(c.keys);
    EXPECT_EQ(t.hosts, c.hosts);
    EXPECT_EQ(t.host_of, c.host_of);
    EXPECT_EQ(t.local_rank_of, c.local_rank_of);
    EXPECT_EQ(t.AnyHostShared(), c.any_shared);
    EXPECT_EQ(t.world_size(), static_cast<int>(c.keys.size()));
    for (int r = 0; r < t.world_size(); ++r) {
      EXPECT_EQ(t.IsLeader(r), t.hosts[t.host_of[r]][0] == r) << "rank " << r;
    }
  }
}

TEST(HostTopologyTest, DescribesItself) {
  EXPECT_EQ(GroupByHostKey({"a", "a", "b"}).ToString(), "2 hosts: 0,1 | 2");
  EXPECT_EQ(SingleHost(2).ToString(), "1 host: 0,1");
}

TEST(HostTopologyTest, DefaultKeyIsStableAndNamesTheMachineAndNamespaces) {
  const std::string key = DefaultHostKey();
  EXPECT_EQ(key, DefaultHostKey());
  EXPECT_THAT(key, HasSubstr(" shm_dev="));
  EXPECT_THAT(key, HasSubstr(" pid_ns="));
  EXPECT_THAT(key, ::testing::Not(HasSubstr("none")));
}

TEST(HostTopologyTest, ExchangeThroughTheStoreGivesEveryRankTheSameGrouping) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::vector<std::string> keys = {"h1", "", "h1", ""};  // "": the default key
  std::vector<std::future<absl::StatusOr<HostTopology>>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return ExchangeHostKeys(store, r, 4, keys[r]);
    }));
  }
  for (auto& f : ranks) {
    const absl::StatusOr<HostTopology> t = f.get();
    ASSERT_OK(t);
    EXPECT_THAT(t->hosts, ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3)));
  }
  EXPECT_THAT(ExchangeHostKeys(store, 4, 4, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 4")));
}

}  // namespace
}  // namespace baton::trainer
