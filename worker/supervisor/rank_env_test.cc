#include "worker/supervisor/rank_env.h"

#include <algorithm>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using ::testing::Not;

std::map<std::string, std::string> AsMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    EXPECT_TRUE(out.emplace(e.substr(0, eq), e.substr(eq + 1)).second) << "repeated: " << e;
  }
  return out;
}

RankEnvInput Input() {
  RankEnvInput in;
  in.base_env = {"PATH=/usr/bin:/bin", "HOME=/home/w", "RANK=99"};
  in.job_id = "j-000007";
  in.generation = 3;
  in.world_size = 8;
  in.master_addr = "10.0.0.1";
  in.master_port = 29500;
  in.rank.set_rank(5);
  in.rank.set_local_rank(1);
  in.rank.set_local_world_size(4);
  in.rank.set_group_rank(1);
  in.metrics_fd = 3;
  return in;
}

TEST(BuildRankEnvTest, SetsEveryTorchrunAndBatonVariable) {
  const std::map<std::string, std::string> env = AsMap(BuildRankEnv(Input()));
  const std::map<std::string, std::string> expected = {
      {"RANK", "5"},
      {"WORLD_SIZE", "8"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "5"},
      {"ROLE_WORLD_SIZE", "8"},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RUN_ID", "j-000007"},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"BATON_JOB_ID", "j-000007"},
      {"BATON_GENERATION", "3"},
      {"BATON_METRICS_FD", "3"},
      {"OMP_NUM_THREADS", "1"},
      {"PATH", "/usr/bin:/bin"},
      {"HOME", "/home/w"},
  };
  EXPECT_EQ(env, expected);  // The worker's stale RANK=99 is overridden.
}

TEST(BuildRankEnvTest, CheckpointDirOnlyWhenGiven) {
  EXPECT_EQ(AsMap(BuildRankEnv(Input())).count("BATON_CHECKPOINT_DIR"), 0u);
  RankEnvInput in = Input();
  in.checkpoint_dir = "/shared/ckpt";
  in.spec_env["BATON_CHECKPOINT_DIR"] = "/elsewhere";  // reserved: ignored
  EXPECT_EQ(AsMap(BuildRankEnv(in)).at("BATON_CHECKPOINT_DIR"), "/shared/ckpt");
}

TEST(BuildRankEnvTest, OutputIsSortedByName) {
  const std::vector<std::string> env = BuildRankEnv(Input());
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
}

TEST(BuildRankEnvTest, RestartCountIsGenerationMinusOneAtLeastZero) {
  RankEnvInput in = Input();
  in.generation = 1;
  EXPECT_EQ(AsMap(BuildRankEnv(in))["TORCHELASTIC_RESTART_COUNT"], "0");
  in.generation = 0;
  EXPECT_EQ(AsMap(BuildRankEnv(in))["TORCHELASTIC_RESTART_COUNT"], "0");
}

TEST(BuildRankEnvTest, GroupWorldSizeRoundsUp) {
  RankEnvInput in = Input();
  in.world_size = 5;  // 4 + 1 processes: two workers.
  EXPECT_EQ(AsMap(BuildRankEnv(in))["GROUP_WORLD_SIZE"], "2");
  in.world_size = 1;
  in.rank.set_local_world_size(1);
  EXPECT_EQ(AsMap(BuildRankEnv(in))["GROUP_WORLD_SIZE"], "1");
}

TEST(BuildRankEnvTest, SpecEnvAddsAndOverridesButNotReservedNames) {
  RankEnvInput in = Input();
  in.spec_env = {{"NCCL_DEBUG", "INFO"},
                 {"HOME", "/scratch"},
                 {"RANK", "0"},
                 {"MASTER_PORT", "1"},
                 {"BATON_METRICS_FD", "9"}};
  std::vector<std::string> ignored;
  const std::map<std::string, std::string> env = AsMap(BuildRankEnv(in, &ignored));
  EXPECT_EQ(env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(env.at("HOME"), "/scratch");
  EXPECT_EQ(env.at("RANK"), "5");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(env.at("BATON_METRICS_FD"), "3");
  EXPECT_THAT(ignored, ElementsAre("BATON_METRICS_FD", "MASTER_PORT", "RANK"));
}

// The assignment's GPUs win over the worker's CUDA_VISIBLE_DEVICES and the spec's.
TEST(BuildRankEnvTest, VisibleDevicesOnlyWhenGivenAndOverEverythingElse) {
  RankEnvInput in = Input();
  in.base_env.push_back("CUDA_VISIBLE_DEVICES=0,1,2,3");
  in.spec_env = {{"CUDA_VISIBLE_DEVICES", "3"}};
  std::vector<std::string> ignored;
  EXPECT_EQ(AsMap(BuildRankEnv(in, &ignored)).at("CUDA_VISIBLE_DEVICES"), "3");
  EXPECT_THAT(ignored, ::testing::IsEmpty());
  in.visible_devices = {"2", "3"};
  EXPECT_EQ(AsMap(BuildRankEnv(in, &ignored)).at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_THAT(ignored, ElementsAre("CUDA_VISIBLE_DEVICES"));
}

TEST(BuildRankEnvTest, OmpNumThreadsOnlyWhenUnset) {
  RankEnvInput in = Input();
  in.base_env.push_back("OMP_NUM_THREADS=8");
  EXPECT_EQ(AsMap(BuildRankEnv(in))["OMP_NUM_THREADS"], "8");
  in = Input();
  in.spec_env = {{"OMP_NUM_THREADS", "4"}};
  EXPECT_EQ(AsMap(BuildRankEnv(in))["OMP_NUM_THREADS"], "4");
}

TEST(BuildRankEnvTest, PassesOnlyTheAllowlistOfTheWorkersEnvironment) {
  RankEnvInput in = Input();
  in.base_env = {"PATH=/usr/bin:/bin",         "LD_LIBRARY_PATH=/opt/lib", "HOME=/home/w",
                 "LANG=C.UTF-8",               "LC_ALL=C",                 "TMPDIR=/scratch",
                 "CUDA_VISIBLE_DEVICES=0,1",   "NCCL_DEBUG=INFO",          "NVIDIA_DRIVER=x",
                 "GLOO_SOCKET_IFNAME=eth0",    "AWS_SECRET_ACCESS_KEY=s3", "BATON_TOKEN=t",
                 "SSH_AUTH_SOCK=/tmp/agent",   "LD_PRELOAD=/evil.so",      "FLAGS_x=1"};
  in.spec_env = {{"LD_PRELOAD", "/mine.so"}};
  const std::map<std::string, std::string> env = AsMap(BuildRankEnv(in));
  for (const char* kept : {"PATH", "LD_LIBRARY_PATH", "HOME", "LANG", "LC_ALL", "TMPDIR",
                           "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "NVIDIA_DRIVER",
                           "GLOO_SOCKET_IFNAME"}) {
    EXPECT_TRUE(env.count(kept)) << kept;
  }
  for (const char* dropped : {"AWS_SECRET_ACCESS_KEY", "BATON_TOKEN", "SSH_AUTH_SOCK", "FLAGS_x"}) {
    EXPECT_FALSE(env.count(dropped)) << dropped;
  }
  EXPECT_EQ(env.at("LD_PRELOAD"), "/mine.so");  // The job's own env is the job's choice.
}

}  // namespace
}  // namespace baton::worker
