#include "worker/process/rank_cgroups.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace baton::worker {
namespace {

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(RankCgroupsTest, OomKillsReadsTheMemoryControllersCount) {
  const std::string dir = Dir("oom");
  std::ofstream(dir + "/memory.events")
      << "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n";
  EXPECT_EQ(RankCgroups::OomKills(dir), 2);
}

TEST(RankCgroupsTest, NoMemoryControllerMeansNoOomKill) {
  EXPECT_EQ(RankCgroups::OomKills(Dir("no-memory-controller")), 0);  // no memory.events
  const std::string dir = Dir("no-oom-line");
  std::ofstream(dir + "/memory.events") << "low 0\nhigh 0\n";
  EXPECT_EQ(RankCgroups::OomKills(dir), 0);
}

}  // namespace
}  // namespace baton::worker
