#include "worker/trainer/trainer.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/utils.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/data/idx_dataset.h"
#include "worker/trainer/data/synthetic_mnist.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/testing/rank_context.h"
#include "worker/trainer/testing/ticking_clock.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::FailAt;
using ::baton::trainer::testing::MakeGloo;
using ::baton::trainer::testing::MakeShm;
using ::baton::trainer::testing::RankContext;
using ::baton::trainer::testing::RunRanks;
using ::baton::trainer::testing::RunRanksWith;
using ::baton::trainer::testing::TickingClock;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using MetricLines = std::vector<std::map<std::string, double>>;

// Every clock reading in these tests advances time by this much.
constexpr absl::Duration kTick = absl::Milliseconds(1);

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A parsed metric line: key -> value. Fails the test on anything but {"key":number,...}.
std::map<std::string, double> ParseLine(absl::string_view line) {
  std::map<std::string, double> values;
  EXPECT_TRUE(absl::ConsumePrefix(&line, "{") && absl::ConsumeSuffix(&line, "}")) << line;
  for (absl::string_view field : absl::StrSplit(line, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits(':', 1));
    EXPECT_EQ(kv.size(), 2u) << field;
    if (kv.size() != 2) continue;
    absl::string_view key = kv[0];
    EXPECT_TRUE(absl::ConsumePrefix(&key, "\"") && absl::ConsumeSuffix(&key, "\"")) << field;
    double value;
    EXPECT_TRUE(absl::SimpleAtod(kv[1], &value)) << field;
    values[std::string(key)] = value;
  }
  return values;
}

// The file's bytes; empty if it cannot be read.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Reads a pickled Dict[str, Tensor] (final.pt) in file order.
std::vector<std::pair<std::string, at::Tensor>> LoadWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::pair<std::string, at::Tensor>> weights;
  if (bytes.empty()) {
    ADD_FAILURE() << "cannot read " << path;
    return weights;
  }
  const c10::IValue value = torch::jit::pickle_load(bytes);
  for (const auto& item : value.toGenericDict()) {
    weights.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return weights;
}

TrainerOptions MlpTrainer(std::vector<int64_t> hidden = {256, 128}) {
  TrainerOptions options;
  options.model.model = "mlp";
  options.model.hidden = std::move(hidden);
  return options;
}

// 12 steps of a small MLP, checkpointed every 6 steps into TempDir()/<dir>.
TrainerOptions CheckpointingTrainer(const std::string& dir) {
  TrainerOptions options = MlpTrainer({32});
  options.log_every = 6;
  options.checkpoint_every = 6;
  options.checkpoint_dir = TempDir() + "/" + dir;
  options.max_steps = 12;
  return options;
}

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new std::string(TempDir() + "/mnist");
    ASSERT_OK(WriteSyntheticMnistDir(*data_dir_, /*train_size=*/3000, /*test_size=*/500,
                                     /*seed=*/3));
  }

  static absl::StatusOr<std::unique_ptr<Dataset>> Open(Split split) {
    DataOptions data;
    data.dataset = "mnist";
    data.data_dir = *data_dir_;
    return OpenDataset(data, split);
  }

  // Runs a single-process training; metric lines go to a file and are returned parsed.
  absl::StatusOr<TrainResult> Train(const TrainerOptions& options, MetricLines* lines,
                                    const std::atomic<bool>* stop = nullptr) {
    absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
    if (!train.ok()) return train.status();
    absl::StatusOr<std::unique_ptr<Dataset>> test = Open(Split::kTest);
    if (!test.ok()) return test.status();
    const std::string metrics_path = TempDir() + "/metrics.jsonl";
    const int fd = ::open(metrics_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    MetricsWriter metrics(fd);
    LocalCommunicator comm;
    std::ostringstream log;
    TrainerContext context;
    context.train = train->get();
    context.test = test->get();
    context.comm = &comm;
    context.metrics = &metrics;
    context.clock = &clock_;
    context.log = &log;
    context.stop = stop;
    context.generation = generation_;
    if (!snapshot_dir_.empty()) {
      context.snapshot_dir = snapshot_dir_;
      context.snapshot_writer = "rank0";
    }
    absl::StatusOr<TrainResult> result = Trainer(options, context).Run();
    ::close(fd);
    std::ifstream in(metrics_path);
    for (std::string line; std::getline(in, line);) lines->push_back(ParseLine(line));
    log_ = log.str();
    return result;
  }

  static std::string* data_dir_;
  TickingClock clock_{kTick};  // Train()'s clock: no test depends on the machine's speed.
  std::string log_;
  int64_t generation_ = 0;    // TrainerContext::generation of Train().
  std::string snapshot_dir_;  // Train() takes snapshots (as writer "rank0") when set.
};

// A sample log ("<prefix>.<rank>" files): step -> the ids trained on in that step over all
// ranks, from the highest generation that logged the step.
std::map<int64_t, std::set<int64_t>> ReadSampleLog(const std::string& prefix, int ranks) {
  std::map<int64_t, std::pair<int64_t, std::set<int64_t>>> steps;
  for (int r = 0; r < ranks; ++r) {
    std::ifstream in(absl::StrCat(prefix, ".", r));
    EXPECT_TRUE(in.good()) << prefix << "." << r;
    int64_t generation, step, rank;
    std::string ids;
    while (in >> generation >> step >> rank >> ids) {
      EXPECT_EQ(rank, r);
      auto& [gen, set] = steps[step];
      if (generation > gen) set.clear();
      if (generation < gen) continue;
      gen = generation;
      for (absl::string_view id : absl::StrSplit(ids, ',')) {
        int64_t v;
        EXPECT_TRUE(absl::SimpleAtoi(id, &v)) << id;
        EXPECT_TRUE(set.insert(v).second) << "sample " << v << " twice in step " << step;
      }
    }
  }
  std::map<int64_t, std::set<int64_t>> out;
  for (auto& [step, entry] : steps) out[step] = std::move(entry.second);
  return out;
}

std::string* TrainerTest::data_dir_ = nullptr;

TEST_F(TrainerTest, SingleProcessTrainingLearns) {
  TrainerOptions options = MlpTrainer();
  options.max_steps = 100;
  options.log_every = 10;
  options.checkpoint_dir = TempDir() + "/ckpt";
  MetricLines lines;
  absl::StatusOr<TrainResult> result = Train(options, &lines);
  ASSERT_OK(result);

  EXPECT_EQ(result->steps, 100);
  EXPECT_EQ(result->epoch, 2);  // 3000 / 64 = 46 steps per epoch.
  EXPECT_FALSE(result->stopped);
  EXPECT_TRUE(result->restored_from.empty());
  ASSERT_EQ(lines.size(), 10u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"], 10.0 * (i + 1));
    for (const char* key : {"epoch", "loss", "accuracy", "samples_per_sec", "lr", "time_step_s",
                            "time_data_s", "time_forward_s", "time_backward_s", "time_comm_wait_s",
                            "time_optimizer_s", "grad_norm"}) {
      EXPECT_EQ(lines[i].count(key), 1u) << key << " missing in line " << i;
    }
    for (const char* key :
         {"loss_scale", "skipped_steps", "tokens_per_sec", "mem_allocated_bytes"}) {
      EXPECT_EQ(lines[i].count(key), 0u) << key << " in line " << i;
    }
    EXPECT_EQ(lines[i]["lr"], 0.05);
    EXPECT_GT(lines[i]["grad_norm"], 0);
  }
  EXPECT_EQ(lines[0].count("eval_accuracy"), 0u);
  EXPECT_EQ(lines.back()["epoch"], 2);

  // Loss falls from chance level (ln 10 = 2.30) and the model clearly learns.
  EXPECT_GT(lines.front()["loss"], 1.0);
  EXPECT_LT(lines.back()["loss"], 0.5 * lines.front()["loss"]);
  EXPECT_GT(lines.back()["accuracy"], 0.8);
  EXPECT_LT(lines.front()["accuracy"], lines.back()["accuracy"]);
  EXPECT_NEAR(result->first_loss, lines.front()["loss"], 1e-6);
  EXPECT_NEAR(result->loss, lines.back()["loss"], 1e-6);
  ASSERT_TRUE(result->eval_accuracy.has_value());
  EXPECT_GT(*result->eval_accuracy, 0.8);
  EXPECT_EQ(lines.back()["eval_accuracy"], *result->eval_accuracy);
  EXPECT_THAT(log_, HasSubstr("step 100/100 epoch 2 loss "));

  // Rank 0's final weights hold every parameter with its shape; a training-state
  // checkpoint of the last step sits next to them.
  EXPECT_EQ(result->checkpoint_path, options.checkpoint_dir + "/final.pt");
  const auto saved = LoadWeights(result->checkpoint_path);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : saved) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("layers.0.weight", "layers.0.bias", "layers.1.weight",
                                 "layers.1.bias", "layers.2.weight", "layers.2.bias"));
  ASSERT_EQ(saved.size(), 6u);
  EXPECT_EQ(saved[0].second.sizes(), (std::vector<int64_t>{256, 784}));
  EXPECT_EQ(saved[5].second.sizes(), (std::vector<int64_t>{10}));
  EXPECT_EQ(::access((options.checkpoint_dir + "/ckpt-00000100.pt").c_str(), R_OK), 0);
}

// On a clock that ticks once per reading, every phase of every step is a whole number of
// ticks: each phase is measured (at least one tick per step), and the phases partition the
// step, so they sum to time_step_s exactly. The window's rate is finite and positive.
TEST_F(TrainerTest, PhaseTimesPartitionEachStepExactly) {
  TrainerOptions options = MlpTrainer({32});
  options.max_steps = 20;
  options.log_every = 5;
  options.step.accumulation_steps = 2;
  MetricLines lines;
  ASSERT_OK(Train(options, &lines));
  ASSERT_EQ(lines.size(), 4u);
  const double steps = 5;
  // A per-step average (seconds) as a whole number of ticks over the window's 5 steps.
  auto ticks = [&](double per_step_seconds) {
    return std::llround(per_step_seconds * steps / absl::ToDoubleSeconds(kTick));
  };
  for (const auto& line : lines) {
    int64_t sum = 0;
    for (const char* phase : {"time_data_s", "time_forward_s", "time_backward_s",
                              "time_comm_wait_s", "time_optimizer_s"}) {
      ASSERT_EQ(line.count(phase), 1u) << phase;
      EXPECT_GE(ticks(line.at(phase)), steps) << phase << ": not measured in some step";
      sum += ticks(line.at(phase));
    }
    // Two micro-batches per step: data, forward and backward are lapped twice.
    EXPECT_GE(ticks(line.at("time_forward_s")), 2 * steps);
    EXPECT_EQ(sum, ticks(line.at("time_step_s"))) << "the phases do not partition the step";
    ASSERT_EQ(line.count("samples_per_sec"), 1u);
    EXPECT_GT(line.at("samples_per_sec"), 0);
  }
}

TEST_F(TrainerTest, SameSeedSameRunAndEpochBudget) {
  TrainerOptions options = MlpTrainer({32});
  options.max_epochs = 1;
  options.max_steps = 1000;  // The epoch limit comes first: 46 steps.
  options.log_every = 20;
  MetricLines a, b;
  absl::StatusOr<TrainResult> first = Train(options, &a);
  absl::StatusOr<TrainResult> second = Train(options, &b);
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(first->steps, 46);
  ASSERT_EQ(a.size(), 3u);  // Steps 20, 40 and the last one, 46.
  EXPECT_EQ(a.back()["step"], 46);
  EXPECT_EQ(first->loss, second->loss);
  EXPECT_EQ(first->eval_accuracy, second->eval_accuracy);
  EXPECT_TRUE(first->checkpoint_path.empty());
}

// Accumulation: an epoch has floor(46 / 4) = 11 steps of 4 micro-batches; the 2 leftover
// micro-batches are skipped, so epoch 1 starts at step 11.
TEST_F(TrainerTest, AccumulationStepsCountOptimizerSteps) {
  TrainerOptions options = MlpTrainer({32});
  options.step.accumulation_steps = 4;
  options.max_steps = 12;
  options.log_every = 11;
  MetricLines lines;
  absl::StatusOr<TrainResult> result = Train(options, &lines);
  ASSERT_OK(result);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 11);
  EXPECT_EQ(lines[0]["epoch"], 0);
  EXPECT_EQ(lines[1]["step"], 12);
  EXPECT_EQ(lines[1]["epoch"], 1);
  EXPECT_EQ(result->epoch, 1);
}

// Resuming from a checkpoint continues exactly: 12 steps, then 12 more from the step-12
// checkpoint, end with the weights of 24 steps in one go (data position, momentum and
// the step counter are restored).
TEST_F(TrainerTest, ResumeFromCheckpointIsExact) {
  TrainerOptions options = CheckpointingTrainer("resumed");
  MetricLines first, second, straight;
  ASSERT_OK(Train(options, &first));
  options.max_steps = 24;
  absl::StatusOr<TrainResult> resumed = Train(options, &second);
  ASSERT_OK(resumed);
  EXPECT_EQ(resumed->restored_from, options.checkpoint_dir + "/ckpt-00000012.pt");
  EXPECT_EQ(resumed->steps, 24);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second.front()["step"], 18);

  TrainerOptions reference = options;
  reference.checkpoint_dir = TempDir() + "/straight";
  reference.checkpoint_every = 0;
  ASSERT_OK(Train(reference, &straight));
  const auto want = LoadWeights(reference.checkpoint_dir + "/final.pt");
  const auto got = LoadWeights(options.checkpoint_dir + "/final.pt");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(got[i].second.equal(want[i].second)) << want[i].first;
  }
  EXPECT_EQ(second.back()["loss"], straight.back()["loss"]);
}

// With snapshots, rank 0 writes each checkpoint from the step's in-memory snapshot on a
// thread of its own: the files are the very bytes a synchronous save writes.
TEST_F(TrainerTest, CheckpointsWrittenFromSnapshotsAreTheSynchronousOnes) {
  MetricLines sync_lines, async_lines;
  const TrainerOptions sync = CheckpointingTrainer("from-training");
  torch::manual_seed(11);  // Checkpoints hold the process's generator: the same in both runs.
  ASSERT_OK(Train(sync, &sync_lines));
  EXPECT_THAT(log_, Not(HasSubstr("from in-memory snapshots")));
  snapshot_dir_ = TempDir() + "/snapshots";
  std::filesystem::create_directories(snapshot_dir_);
  TrainerOptions async = CheckpointingTrainer("from-snapshots");
  async.snapshot_every = 5;  // Checkpoint steps (6, 12) are snapshotted regardless.
  torch::manual_seed(11);
  ASSERT_OK(Train(async, &async_lines));
  EXPECT_THAT(log_, HasSubstr("checkpoints are written from in-memory snapshots, off the "
                              "training thread (step 6 first)"));
  for (const char* name : {"/ckpt-00000006.pt", "/ckpt-00000012.pt", "/final.pt"}) {
    const std::string want = ReadFile(sync.checkpoint_dir + name);
    ASSERT_FALSE(want.empty()) << name;
    EXPECT_TRUE(ReadFile(async.checkpoint_dir + name) == want) << name << " differs";
  }
}

// The generation fences the checkpoint directory (checkpoint/checkpoint_manager.h): a newer
// generation resumes from an older one's files and records where it started; from then on
// the older generation refuses to train, and writes and deletes nothing.
TEST_F(TrainerTest, ASupersededGenerationRefusesToTrain) {
  TrainerOptions options = CheckpointingTrainer("fenced");
  MetricLines lines;
  generation_ = 2;
  ASSERT_OK(Train(options, &lines));
  generation_ = 3;
  options.max_steps = 18;
  absl::StatusOr<TrainResult> resumed = Train(options, &lines);
  ASSERT_OK(resumed);
  EXPECT_EQ(resumed->restored_from, options.checkpoint_dir + "/ckpt-00000012-g2.pt");
  EXPECT_EQ(resumed->steps, 18);
  std::ifstream record(options.checkpoint_dir + "/gen-00000003.start");
  const std::string text((std::istreambuf_iterator<char>(record)),
                         std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "baton-generation-start-v1\njob \ngeneration 3\nresumed_step 12\n");

  auto names = [&] {
    std::set<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(options.checkpoint_dir)) {
      out.insert(entry.path().filename().string());
    }
    return out;
  };
  const std::set<std::string> before = names();
  EXPECT_EQ(before.count("ckpt-00000018-g3.pt"), 1u);
  const auto final_weights = LoadWeights(options.checkpoint_dir + "/final.pt");
  generation_ = 2;
  options.max_steps = 24;
  EXPECT_THAT(Train(options, &lines),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("generation 2 is superseded by generation 3")));
  EXPECT_EQ(names(), before);
  const auto after = LoadWeights(options.checkpoint_dir + "/final.pt");
  ASSERT_EQ(after.size(), final_weights.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].second.equal(final_weights[i].second)) << after[i].first;
  }
}

// With a global batch, a gang that shrinks from 2 ranks to 1 between checkpoints trains
// on exactly the samples, step by step, of a run that never changed size, and ends with
// the same weights up to fp32 summation order.
TEST_F(TrainerTest, GlobalBatchResumesExactlyAtAnotherWorldSize) {
  TrainerOptions options = MlpTrainer({32});
  options.global_batch = 32;
  options.batch_size = 16;
  options.log_every = 6;
  options.checkpoint_every = 6;
  options.max_steps = 12;

  TrainerOptions straight = options;
  straight.checkpoint_dir = TempDir() + "/global-straight";
  straight.sample_log = TempDir() + "/global-straight-samples";
  MetricLines lines;
  ASSERT_OK(Train(straight, &lines));
  EXPECT_THAT(log_, HasSubstr("global batch 32 = 1 ranks x 2 micro-batches x 16"));

  // Generation 1: two ranks (16 samples each per step) for 6 steps.
  TrainerOptions resized = options;
  resized.checkpoint_dir = TempDir() + "/global-resized";
  resized.sample_log = TempDir() + "/global-resized-samples";
  resized.max_steps = 6;
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  ASSERT_OK(train);
  TickingClock clock(kTick);
  const std::vector<int64_t> steps = RunRanks<int64_t>(2, [&](Communicator& comm) {
    RankContext rank(**train, comm, clock, /*generation=*/1);
    absl::StatusOr<TrainResult> result = Trainer(resized, rank.context).Run();
    EXPECT_OK(result);
    return result.ok() ? result->steps : -1;
  });
  EXPECT_THAT(steps, ElementsAre(6, 6));
  // Generation 2: one rank resumes from step 6 and finishes.
  resized.max_steps = 12;
  generation_ = 2;
  absl::StatusOr<TrainResult> resumed = Train(resized, &lines);
  ASSERT_OK(resumed);
  EXPECT_EQ(resumed->restored_from, resized.checkpoint_dir + "/ckpt-00000006-g1.pt");

  const auto want = ReadSampleLog(straight.sample_log, 1);
  ASSERT_EQ(want.size(), 12u);
  EXPECT_EQ(want.begin()->second.size(), 32u);
  EXPECT_EQ(ReadSampleLog(resized.sample_log, 2), want);

  const auto want_weights = LoadWeights(straight.checkpoint_dir + "/final.pt");
  const auto got_weights = LoadWeights(resized.checkpoint_dir + "/final.pt");
  ASSERT_EQ(got_weights.size(), want_weights.size());
  for (size_t i = 0; i < want_weights.size(); ++i) {
    const at::Tensor& w = want_weights[i].second;
    const double rel = (got_weights[i].second - w).norm().item<double>() / w.norm().item<double>();
    EXPECT_LT(rel, 1e-5) << want_weights[i].first;
  }
}

TEST_F(TrainerTest, StopRequestEndsBeforeTheNextStep) {
  std::atomic<bool> stop{true};
  TrainerOptions options = MlpTrainer();
  options.max_steps = 50;
  MetricLines lines;
  absl::StatusOr<TrainResult> result = Train(options, &lines, &stop);
  ASSERT_OK(result);
  EXPECT_TRUE(result->stopped);
  EXPECT_EQ(result->steps, 0);
  EXPECT_TRUE(lines.empty());
}

void ExpectSameWeights(const std::string& got_path, const std::string& want_path) {
  const auto want = LoadWeights(want_path);
  const auto got = LoadWeights(got_path);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_TRUE(got[i].second.equal(want[i].second))
        << want[i].first << ": max difference "
        << (got[i].second - want[i].second).abs().max().item<double>() << " of "
        << want[i].second.abs().max().item<double>();
  }
}

// A rank's result and log.
struct RankRun {
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  std::string log;
};

// Sets up a rank's context (its rank given) before it trains.
using RankSetup = std::function<void(int rank, TrainerContext& context)>;

// `world` ranks of `options` (generation `generation`) over `make`'s communicators, each
// context set up by `setup` (if given) first.
std::vector<RankRun> RunTrainers(const Dataset& train, const TrainerOptions& options, int world,
                                 int64_t generation, const CommunicatorFactory& make,
                                 const RankSetup& setup = nullptr) {
  TickingClock clock(kTick);
  return RunRanksWith<RankRun>(world, make, [&](Communicator& comm) {
    RankContext rank(train, comm, clock, generation);
    if (setup) setup(comm.rank(), rank.context);
    RankRun out;
    out.result = Trainer(options, rank.context).Run();
    out.log = rank.log.str();
    return out;
  });
}

// As on separate hosts: each rank a snapshot directory <root>/h<rank> and its writer. An
// empty root: no snapshots.
RankSetup SnapshotsUnder(const std::string& root) {
  return [root](int rank, TrainerContext& context) {
    if (root.empty()) return;
    context.snapshot_dir = absl::StrCat(root, "/h", rank);
    std::filesystem::create_directories(context.snapshot_dir);
    context.snapshot_writer = absl::StrCat("rank", rank);
  };
}

// RunTrainers with each rank's checkpoint_request pointing at `checkpoint_request` (may be
// null), the results only.
std::vector<absl::StatusOr<TrainResult>> RunGang(const Dataset& train,
                                                 const TrainerOptions& options, int world,
                                                 int64_t generation,
                                                 const std::atomic<bool>* checkpoint_request,
                                                 const CommunicatorFactory& make = MakeGloo) {
  std::vector<absl::StatusOr<TrainResult>> results;
  for (RankRun& run : RunTrainers(train, options, world, generation, make,
                                  [checkpoint_request](int, TrainerContext& context) {
                                    context.checkpoint_request = checkpoint_request;
                                  })) {
    results.push_back(std::move(run.result));
  }
  return results;
}

// The ZeRO tests' training: a small MLP, AdamW with weight decay, and a global batch that
// is the same samples per step on 2 ranks (12 each) and on 3 (8 each).
TrainerOptions ZeroAdamW() {
  TrainerOptions options = MlpTrainer({32});
  options.global_batch = 24;
  options.batch_size = 12;
  options.optimizer.name = "adamw";
  options.optimizer.lr = 1e-3;
  options.optimizer.weight_decay = 0.01;
  return options;
}

// ZeRO stages 1 and 2 end to end (AdamW with weight decay, small gradient buckets): the
// same bits as stage 0, on two ranks straight and across a resize from two ranks to
// three, with a checkpoint request (which a sharded stage shares with every rank: all take
// part in the save) in between. Over shared memory, whose sums do not depend on the stage
// (zero_optimizer_test: over Gloo stage 2 at world 3 agrees within rounding only).
TEST_F(TrainerTest, ZeroStagesMatchStageZeroAcrossAResize) {
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  ASSERT_OK(train);
  TrainerOptions options = ZeroAdamW();
  options.step.reducer.bucket_cap_mb = 0.02;  // Several buckets: stage 2 has segments.
  options.log_every = 6;
  options.checkpoint_every = 6;
  options.max_steps = 6;
  const CommunicatorFactory shm = MakeShm(absl::Seconds(60));

  // Each stage: 6 steps on 2 ranks, then 6 more on 3.
  std::string dirs[3];
  for (int stage : {0, 1, 2}) {
    SCOPED_TRACE(stage);
    TrainerOptions o = options;
    o.zero_stage = stage;
    o.checkpoint_dir = dirs[stage] = absl::StrCat(TempDir(), "/zero-", stage);
    for (const auto& r : RunGang(**train, o, 2, /*generation=*/1, nullptr, shm)) ASSERT_OK(r);
    std::filesystem::copy_file(dirs[stage] + "/final.pt", dirs[stage] + "/final-6.pt",
                               std::filesystem::copy_options::overwrite_existing);
    if (stage > 0) {
      // The first 6 steps already agree bit for bit.
      ExpectSameWeights(dirs[stage] + "/final-6.pt", dirs[0] + "/final-6.pt");
      // Generation 2 (3 ranks) restores step 6 and is asked for a checkpoint at once: every
      // rank stops and the gathered state is saved again.
      const std::atomic<bool> request{true};
      o.max_steps = 12;
      for (const auto& r : RunGang(**train, o, 3, /*generation=*/2, &request, shm)) {
        ASSERT_OK(r);
        EXPECT_TRUE(r->checkpointed);
        EXPECT_EQ(r->steps, 6);
      }
      EXPECT_TRUE(std::filesystem::exists(dirs[stage] + "/ckpt-00000006-g2.pt"));
    }
    o.max_steps = 12;
    const std::vector<absl::StatusOr<TrainResult>> resumed =
        RunGang(**train, o, 3, /*generation=*/3, nullptr, shm);
    for (const auto& r : resumed) {
      ASSERT_OK(r);
      EXPECT_EQ(r->steps, 12);
      EXPECT_FALSE(r->restored_from.empty());
    }
  }
  ExpectSameWeights(dirs[1] + "/final.pt", dirs[0] + "/final.pt");
  ExpectSameWeights(dirs[2] + "/final.pt", dirs[0] + "/final.pt");
}

// ZeRO with in-memory snapshots (TrainingSession::MaybeSnapshotSharded): every rank exports
// the optimizer state at the same steps and each writer snapshots the whole of it. Two
// ranks, as on two hosts, lose a peer in step 6's gradient exchange; the last periodic
// snapshot (step 5) is restored from memory: on 2 ranks bit for bit as an uninterrupted
// run, and on 3 (the shards cut anew from memory) bit for bit as a run resized at step 5
// through a disk checkpoint.
TEST_F(TrainerTest, ZeroSnapshotsRestoreFromMemoryAtTheSameOrAnotherWorldSize) {
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  ASSERT_OK(train);
  TrainerOptions options = ZeroAdamW();
  options.step.reducer.bucket_cap_mb = 1000;  // One gradient exchange per step.
  options.log_every = 8;
  options.checkpoint_every = 0;
  options.snapshot_every = 2;  // Steps 1, 3, 5, ...
  const CommunicatorFactory shm = MakeShm(absl::Seconds(60));
  const auto run = [&](const TrainerOptions& o, int world, int64_t generation,
                       const std::string& snapshots, const CommunicatorFactory& make) {
    return RunTrainers(**train, o, world, generation, make, SnapshotsUnder(snapshots));
  };
  for (int stage : {1, 2}) {
    SCOPED_TRACE(stage);
    TrainerOptions o = options;
    o.zero_stage = stage;
    const std::string dir = absl::StrCat(TempDir(), "/zero-snapshots-", stage);
    // References: 8 steps on 2 ranks; 5 on 2, then 3 on 3 through the disk.
    o.checkpoint_dir = dir + "/straight";
    o.max_steps = 8;
    for (const RankRun& out : run(o, 2, 1, "", shm)) ASSERT_OK(out.result);
    o.checkpoint_dir = dir + "/resized";
    o.max_steps = 5;
    for (const RankRun& out : run(o, 2, 1, "", shm)) ASSERT_OK(out.result);
    o.max_steps = 8;
    for (const RankRun& out : run(o, 3, 2, "", shm)) ASSERT_OK(out.result);

    // 16000 elements: the whole gradient (25,450), not a bookkeeping collective.
    o.checkpoint_dir = dir + "/lost";
    for (const RankRun& out : run(o, 2, 1, dir + "/memory", FailAt(shm, 6, 16000))) {
      EXPECT_THAT(out.result, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("peer is gone")));
    }
    std::filesystem::copy(dir + "/memory", dir + "/memory-copy",
                          std::filesystem::copy_options::recursive);
    // Generation 2 on `world` ranks, from the snapshots under `memory`, ends as `reference`.
    const auto resume = [&](int world, const std::string& memory, const std::string& reference) {
      for (const RankRun& out : run(o, world, 2, memory, shm)) {
        ASSERT_OK(out.result);
        EXPECT_EQ(out.result->steps, 8);
        EXPECT_THAT(out.log, HasSubstr("restored in-memory snapshot of generation 1 (rank 0's "
                                       "copy) at step 5"));
      }
      ExpectSameWeights(o.checkpoint_dir + "/final.pt", reference + "/final.pt");
    };
    resume(2, dir + "/memory", dir + "/straight");
    o.checkpoint_dir = dir + "/lost-resized";
    resume(3, dir + "/memory-copy", dir + "/resized");
  }
}

// Restoring a snapshot is collective: a gang with a rank that has no snapshot directory
// (its worker runs without --snapshot_root) takes none, on any rank, rather than leaving
// that rank out of the restore's collectives.
TEST_F(TrainerTest, ARankWithoutASnapshotDirectoryTurnsSnapshotsOffForTheGang) {
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  ASSERT_OK(train);
  TrainerOptions options = MlpTrainer({32});
  options.batch_size = 12;
  options.max_steps = 4;
  options.log_every = 4;
  options.snapshot_every = 1;
  const std::string root = TempDir() + "/half-snapshots";
  const std::vector<RankRun> got =
      RunTrainers(**train, options, 2, /*generation=*/1, MakeShm(absl::Seconds(60)),
                  [&](int rank, TrainerContext& context) {
                    if (rank != 0) return;
                    context.snapshot_dir = root;
                    std::filesystem::create_directories(root);
                    context.snapshot_writer = "rank0";
                  });
  for (const RankRun& out : got) {
    ASSERT_OK(out.result);
    EXPECT_EQ(out.result->steps, 4);
  }
  EXPECT_THAT(got[0].log, HasSubstr("in-memory snapshots are off: not every rank has a "
                                    "snapshot directory"));
  EXPECT_TRUE(std::filesystem::is_empty(root));
}

// Shared-memory collectives run on the thread that waits for them (ShmOptions::
// collectives_on_waiter) train bit for bit as on the communication thread: several buckets,
// started during backward, all waited for at its end.
TEST_F(TrainerTest, ShmCollectivesOnTheWaiterTrainAsOnTheThread) {
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  ASSERT_OK(train);
  TrainerOptions options = MlpTrainer({32});
  options.batch_size = 12;
  options.step.reducer.bucket_cap_mb = 0.02;
  options.log_every = 6;
  options.max_steps = 6;
  std::string dirs[2];
  for (bool on_waiter : {false, true}) {
    TrainerOptions o = options;
    o.checkpoint_dir = dirs[on_waiter] = absl::StrCat(TempDir(), "/waiter-", on_waiter);
    for (const auto& r :
         RunGang(**train, o, 2, /*generation=*/1, nullptr, MakeShm(absl::Seconds(60), on_waiter))) {
      ASSERT_OK(r);
      EXPECT_EQ(r->steps, 6);
    }
  }
  ExpectSameWeights(dirs[1] + "/final.pt", dirs[0] + "/final.pt");
}

// A peer lost mid-step, on snapshot writer ranks (training_session.h, SnapshotOnPeerLoss):
// every rank's gradient all-reduce of step 4 fails (the test's communicator), after
// forward already moved BatchNorm's running statistics and the data position. Each rank
// snapshots step 3 with those undone, although its periodic snapshots are rare; the next
// generation resumes from that snapshot and ends bit for bit as an uninterrupted run.
TEST_F(TrainerTest, APeerLostMidStepIsSnapshottedAtTheLastCompletedStep) {
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  ASSERT_OK(train);
  TrainerOptions options;
  options.model.model = "resnet18";  // BatchNorm buffers.
  options.batch_size = 2;
  options.max_steps = 5;
  options.log_every = 5;
  options.checkpoint_every = 0;
  options.snapshot_every = 1000;              // Only the first step's, periodically.
  options.step.reducer.bucket_cap_mb = 1000;  // One gradient all-reduce per step.
  const auto run = [&](const std::string& name, int64_t generation, bool snapshots,
                       const CommunicatorFactory& make) {
    TrainerOptions o = options;
    o.checkpoint_dir = TempDir() + "/" + name;
    return RunTrainers(**train, o, 2, generation, make,
                       SnapshotsUnder(snapshots ? TempDir() + "/peer-lost-snapshots" : ""));
  };
  const CommunicatorFactory shm = MakeShm(absl::Seconds(60));
  for (const RankRun& out : run("peer-lost-ref", 1, /*snapshots=*/false, shm)) {
    ASSERT_OK(out.result);
  }
  // 10000 elements: a resnet18 gradient bucket, not the ranks' step agreement.
  for (const RankRun& out : run("peer-lost", 1, /*snapshots=*/true, FailAt(shm, 4, 10000))) {
    EXPECT_THAT(out.result, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("peer is gone")));
    EXPECT_THAT(out.log, HasSubstr("in-memory snapshot of step 3 taken on losing a peer (the "
                                   "step in flight undone)"));
  }
  const std::vector<RankRun> resumed = run("peer-lost", 2, /*snapshots=*/true, shm);
  for (const RankRun& out : resumed) {
    ASSERT_OK(out.result);
    EXPECT_EQ(out.result->steps, 5);
  }
  EXPECT_THAT(resumed[0].log, HasSubstr("restored in-memory snapshot of generation 1 (rank 0's "
                                        "copy) at step 3"));
  ExpectSameWeights(TempDir() + "/peer-lost/final.pt", TempDir() + "/peer-lost-ref/final.pt");
}

// Two ranks (threads) with fp16 loss scaling, accumulation, clipping, small buckets and
// fp16 compression train, agree, and report the fp16 keys.
TEST_F(TrainerTest, TwoRanksWithEveryStepFeatureAgree) {
  absl::StatusOr<std::unique_ptr<Dataset>> train = Open(Split::kTrain);
  absl::StatusOr<std::unique_ptr<Dataset>> test = Open(Split::kTest);
  ASSERT_OK(train);
  ASSERT_OK(test);
  TrainerOptions options = MlpTrainer({64});
  options.batch_size = 16;
  options.max_steps = 30;
  options.log_every = 10;
  options.step.precision = Precision::kFp16;
  options.step.accumulation_steps = 2;
  options.step.max_grad_norm = 1.0;
  options.step.reducer.bucket_cap_mb = 0.05;
  options.step.reducer.compression = GradCompression::kFp16;
  const std::vector<RankRun> got =
      RunTrainers(**train, options, 2, /*generation=*/0, MakeGloo,
                  [&](int, TrainerContext& context) { context.test = test->get(); });
  for (const RankRun& out : got) {
    ASSERT_OK(out.result);
    EXPECT_EQ(out.result->steps, 30);
    EXPECT_LT(out.result->loss, out.result->first_loss);
    EXPECT_THAT(out.log, HasSubstr("loss_scale 65536 skipped 0"));
  }
  ASSERT_TRUE(got[0].result->eval_accuracy.has_value());
  EXPECT_EQ(got[0].result->eval_accuracy, got[1].result->eval_accuracy);
  EXPECT_GT(*got[0].result->eval_accuracy, 0.5);
}

TEST(TrainerOptionsTest, RejectsBadOptionsNamingTheFlag) {
  TrainerOptions ok = MlpTrainer();
  ok.max_steps = 1;
  ASSERT_OK(ValidateTrainerOptions(ok));
  auto with = [&ok](auto mutate) {
    TrainerOptions o = ok;
    mutate(o);
    return ValidateTrainerOptions(o);
  };
  EXPECT_THAT(with([](TrainerOptions& o) { o.batch_size = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--batch_size")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.optimizer.lr = -1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--lr")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.optimizer.momentum = 1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--momentum")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.log_every = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--log_every")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.max_steps = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_epochs")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.step.accumulation_steps = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--accumulation_steps")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.step.reducer.bucket_cap_mb = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--bucket_cap_mb")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.step.max_grad_norm = -1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_grad_norm")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.prefetch_batches = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--prefetch_batches")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.keep_checkpoints = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--keep_checkpoints")));
  // The table's range (1..1000), the one submit enforces; the trainer used to accept it.
  EXPECT_THAT(with([](TrainerOptions& o) { o.keep_checkpoints = 5000; }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--keep_checkpoints: 5000 is out of range; must be 1..1000"));
  EXPECT_THAT(with([](TrainerOptions& o) { o.model.hidden = {65537}; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--hidden[0]: 65537")));
  EXPECT_THAT(with([](TrainerOptions& o) { o.global_batch = -1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--global_batch")));
  EXPECT_THAT(with([](TrainerOptions& o) {
                o.global_batch = 64;
                o.step.accumulation_steps = 2;
              }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--accumulation_steps at 1")));
}

TEST(MlpTest, ParsesHiddenWidthsAndInitialisesFromSeed) {
  EXPECT_THAT(*ParseHiddenWidths("256,128"), ElementsAre(256, 128));
  EXPECT_TRUE(ParseHiddenWidths("")->empty());
  EXPECT_THAT(ParseHiddenWidths("256,,1"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(ParseHiddenWidths("-3"), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));

  const MlpOptions options{/*input_dim=*/6, /*hidden=*/{4}, /*num_classes=*/3};
  Mlp a(options, 5), b(options, 5), c(options, 6);
  EXPECT_TRUE(a->parameters()[0].equal(b->parameters()[0]));
  EXPECT_FALSE(a->parameters()[0].equal(c->parameters()[0]));
  EXPECT_EQ(a->forward(at::zeros({2, 6})).sizes(), (std::vector<int64_t>{2, 3}));
}

TEST(MnistDatasetTest, NormalisesPixelsAndValidatesLabels) {
  MnistImages images{2, 1, 2, {0, 255, 51, 102}};
  absl::StatusOr<MnistDataset> data =
      MnistDataset::FromRaw(images, std::vector<uint8_t>{7, 2}, "mem");
  ASSERT_OK(data);
  EXPECT_EQ(data->size(), 2);
  EXPECT_EQ(data->feature_dim(), 2);
  const std::vector<int64_t> order = {1, 0};
  const MnistBatch batch = data->GetBatch(order);
  const at::Tensor want =
      (at::tensor({0.2f, 0.4f, 0.0f, 1.0f}).reshape({2, 2}) - kMnistMean) / kMnistStd;
  EXPECT_TRUE(batch.inputs.allclose(want, 1e-6, 1e-6));
  EXPECT_TRUE(batch.targets.equal(at::tensor({int64_t{2}, int64_t{7}})));

  EXPECT_THAT(MnistDataset::FromRaw(images, std::vector<uint8_t>{7, 10}, "mem"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("label 10 of sample 1")));
  EXPECT_THAT(MnistDataset::FromRaw(images, std::vector<uint8_t>{7}, "mem"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("2 images but 1 labels")));
}

TEST(MnistDatasetTest, DirectoryNeedsTrainFilesAndBothOrNoTestFiles) {
  const std::string dir = TempDir() + "/partial";
  EXPECT_THAT(LoadMnistDir(dir),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("train-images-idx3-ubyte")));
  ASSERT_OK(WriteSyntheticMnistDir(dir, 10, 10, 1));
  ASSERT_EQ(::unlink((dir + "/t10k-labels-idx1-ubyte").c_str()), 0);
  EXPECT_THAT(LoadMnistDir(dir),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("only one of")));
  ASSERT_EQ(::unlink((dir + "/t10k-images-idx3-ubyte").c_str()), 0);
  absl::StatusOr<MnistSplits> train_only = LoadMnistDir(dir);
  ASSERT_OK(train_only);
  EXPECT_FALSE(train_only->test.has_value());
  absl::StatusOr<std::optional<MnistDataset>> no_test = LoadMnistTest(dir);
  ASSERT_OK(no_test);
  EXPECT_FALSE(no_test->has_value());
}

// The test split alone is checked against the train images' size (read from their header).
TEST(MnistDatasetTest, TestImagesOfAnotherSizeThanTrainAreDataLoss) {
  const std::string dir = TempDir() + "/mismatched";
  ASSERT_OK(WriteSyntheticMnistDir(dir, 10, 10, 1));
  ASSERT_OK(WriteMnistImages(dir + "/t10k-images-idx3-ubyte",
                             MnistImages{10, 14, 14, std::vector<uint8_t>(10 * 14 * 14, 1)}));
  absl::StatusOr<MnistDataset> train = LoadMnistTrain(dir);
  ASSERT_OK(train);
  EXPECT_EQ(train->size(), 10);
  EXPECT_THAT(LoadMnistTest(dir), StatusIs(absl::StatusCode::kDataLoss,
                                           HasSubstr("test images have 196 pixels, train 784")));
}

}  // namespace
}  // namespace baton::trainer
