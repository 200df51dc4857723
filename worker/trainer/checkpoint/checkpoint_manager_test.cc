#include "worker/trainer/checkpoint/checkpoint_manager.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/testing/python_runner.h"

extern char** environ;

namespace baton::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// The test binary re-executes itself for the child processes; these select the role.
constexpr char kRoleEnv[] = "BATON_CKPT_TEST_ROLE";
constexpr char kDirEnv[] = "BATON_CKPT_TEST_DIR";
constexpr char kOptimizerEnv[] = "BATON_CKPT_TEST_OPTIMIZER";
constexpr char kRoleWriter[] = "writer";  // Saves checkpoints until killed.
constexpr char kRoleResume[] = "resume";  // Restores, trains to kTotalSteps, saves final.pt.

// ---- a tiny training rig: model with buffers and dropout, optimizer, schedule, and a
// ---- data order drawn from the caller's own std::mt19937 -----------------------------

constexpr int64_t kDatasetSize = 64;
constexpr int64_t kBatch = 8;
constexpr int64_t kBatchesPerEpoch = kDatasetSize / kBatch;
constexpr int64_t kTotalSteps = 20;
constexpr int64_t kPadElements = 2 << 20;  // 8 MiB of float: makes the writer's files big.

struct Rig {
  torch::nn::Sequential model{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<LrSchedule> schedule;
  std::mt19937 order;
  at::Tensor x;
  at::Tensor y;
  at::Tensor pad;  // Only for the writer: an extra large named tensor.
  TrainingProgress progress;
};

std::unique_ptr<Rig> MakeRig(uint64_t init_seed, const std::string& optimizer_name,
                             int64_t width = 16) {
  torch::manual_seed(init_seed);
  auto rig = std::make_unique<Rig>();
  rig->model = torch::nn::Sequential(torch::nn::Linear(4, width), torch::nn::BatchNorm1d(width),
                                     torch::nn::ReLU(), torch::nn::Dropout(0.25),
                                     torch::nn::Linear(width, 3));
  rig->model->train();
  OptimizerOptions o;
  o.name = optimizer_name;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 0.01;
  rig->optimizer = std::move(MakeOptimizer(rig->model->parameters(), o)).value();
  LrScheduleOptions s;
  s.kind = "cosine";
  s.base_lr = 0.05;
  s.warmup_steps = 3;
  s.total_steps = kTotalSteps;
  s.min_lr = 0.001;
  rig->schedule = LrSchedule::Create(s).value();
  rig->order.seed(static_cast<uint32_t>(init_seed * 7 + 1));
  rig->x = torch::sin(torch::arange(kDatasetSize * 4, torch::kFloat32).reshape({kDatasetSize, 4}) *
                      0.37);
  rig->y = torch::arange(kDatasetSize, torch::kInt64).remainder(3);
  return rig;
}

void TrainSteps(Rig& rig, int n) {
  for (int k = 0; k < n; ++k) {
    SetLearningRate(*rig.optimizer, rig.schedule->LrAt(rig.progress.step));
    std::vector<int64_t> idx(kBatch);
    for (int64_t& i : idx) i = static_cast<int64_t>(rig.order() % kDatasetSize);
    const at::Tensor index = torch::tensor(idx, torch::kInt64);
    const at::Tensor xb = rig.x.index_select(0, index) + 0.05 * torch::randn({kBatch, 4});
    const at::Tensor yb = rig.y.index_select(0, index);
    rig.optimizer->zero_grad();
    torch::nn::functional::cross_entropy(rig.model->forward(xb), yb).backward();
    rig.optimizer->step();
    ++rig.progress.step;
    rig.progress.samples_seen += kBatch;
    if (++rig.progress.batch_in_epoch == kBatchesPerEpoch) {
      rig.progress.batch_in_epoch = 0;
      ++rig.progress.epoch;
    }
  }
}

NamedTensors LiveTensors(Rig& rig) {
  NamedTensors tensors;
  for (const auto& p : rig.model->named_parameters()) tensors.emplace_back(p.key(), p.value());
  for (const auto& b : rig.model->named_buffers()) tensors.emplace_back(b.key(), b.value());
  if (rig.pad.defined()) tensors.emplace_back("pad", rig.pad);
  return tensors;
}

TrainingState StateOf(Rig& rig) {
  TrainingState state;
  state.progress = rig.progress;
  std::ostringstream order;
  order << rig.order;
  state.progress.rng_extra = order.str();
  state.tensors = LiveTensors(rig);
  state.optimizer = rig.optimizer.get();
  return state;
}

void AdoptProgress(Rig& rig, const TrainingProgress& progress) {
  rig.progress = progress;
  std::istringstream(progress.rng_extra) >> rig.order;
}

// Per parameter, in order: the momentum buffer (SGD) or exp_avg, exp_avg_sq and step (AdamW).
std::vector<at::Tensor> OptimizerStateTensors(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> out;
  for (auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) {
      auto it = optimizer.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it == optimizer.state().end()) {
        out.emplace_back();
        continue;
      }
      if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
        out.push_back(sgd->momentum_buffer().clone());
      } else if (auto* adam = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
        out.push_back(adam->exp_avg().clone());
        out.push_back(adam->exp_avg_sq().clone());
        out.push_back(torch::tensor(adam->step()));
      }
    }
  }
  return out;
}

// Same dtype, shape and bytes.
bool BitIdentical(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor ca = a.detach().contiguous();
  const at::Tensor cb = b.detach().contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

std::map<std::string, at::Tensor> Snapshot(Rig& rig) {
  std::map<std::string, at::Tensor> snapshot;
  for (const auto& [name, t] : LiveTensors(rig)) snapshot[name] = t.detach().clone();
  return snapshot;
}

std::string NewDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

CheckpointManager Manager(const std::string& dir, int32_t keep = 3, int64_t every = 1,
                          int64_t generation = 0) {
  CheckpointManagerOptions options;
  options.dir = dir;
  options.keep = keep;
  options.checkpoint_every = every;
  options.generation = generation;
  return CheckpointManager::Create(options).value();
}

// The writer of `generation` in `dir`, keeping `keep` checkpoints.
CheckpointManager ManagerOf(const std::string& dir, int64_t generation, int32_t keep = 3) {
  return Manager(dir, keep, /*every=*/1, generation);
}

// The names in `dir`, sorted.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<char> ReadAll(const std::string& path) { return ReadFileBytes(path).value(); }

void WriteRaw(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Starts this test binary again as a child process with `role`.
pid_t SpawnSelf(const std::string& role, const std::string& dir,
                const std::string& optimizer_name) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(absl::StrCat(kRoleEnv, "=", role));
  env_strings.push_back(absl::StrCat(kDirEnv, "=", dir));
  env_strings.push_back(absl::StrCat(kOptimizerEnv, "=", optimizer_name));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
  EXPECT_EQ(rc, 0) << std::strerror(rc);
  return rc == 0 ? pid : -1;
}

int WaitExitCode(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// ---- round trip ------------------------------------------------------------------------

class RoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTripTest, RestoresTensorsOptimizerCountersAndRng) {
  const std::string dir = NewDir("roundtrip_" + GetParam());
  const CheckpointManager manager = Manager(dir);
  std::unique_ptr<Rig> a = MakeRig(1, GetParam());
  TrainSteps(*a, 11);
  a->progress.world_size = 4;
  a->progress.scaler_scale = 32768.0;
  a->progress.scaler_growth_tracker = 17;
  absl::StatusOr<std::string> path = manager.Save(StateOf(*a));
  ASSERT_OK(path);
  EXPECT_EQ(*path, dir + "/ckpt-00000011.pt");

  const std::map<std::string, at::Tensor> tensors = Snapshot(*a);
  const std::vector<at::Tensor> optimizer_state = OptimizerStateTensors(*a->optimizer);
  ASSERT_FALSE(optimizer_state.empty());
  for (const at::Tensor& t : optimizer_state) ASSERT_TRUE(t.defined());
  const at::Tensor next_draw = torch::rand({6});
  std::mt19937 order_copy = a->order;
  const uint32_t next_order = order_copy();

  // A "fresh process": other weights, other optimizer hyperparameters, other RNG.
  std::unique_ptr<Rig> b = MakeRig(999, GetParam());
  SetLearningRate(*b->optimizer, 0.123);
  torch::manual_seed(4242);
  const at::Tensor first_weight = b->model->parameters()[0];
  TrainingState state = StateOf(*b);
  absl::StatusOr<RestoredCheckpoint> restored = manager.RestoreLatest(state);
  ASSERT_OK(restored);
  EXPECT_EQ(restored->path, *path);
  EXPECT_EQ(restored->step, 11);
  EXPECT_THAT(restored->skipped, SizeIs(0));
  AdoptProgress(*b, state.progress);

  for (const auto& [name, t] : LiveTensors(*b)) {
    EXPECT_TRUE(BitIdentical(t, tensors.at(name))) << name;
  }
  EXPECT_TRUE(b->model->parameters()[0].is_same(first_weight)) << "restored in place";
  const std::vector<at::Tensor> restored_state = OptimizerStateTensors(*b->optimizer);
  ASSERT_EQ(restored_state.size(), optimizer_state.size());
  for (size_t i = 0; i < optimizer_state.size(); ++i) {
    EXPECT_TRUE(BitIdentical(restored_state[i], optimizer_state[i])) << "state tensor " << i;
  }
  EXPECT_EQ(GetLearningRate(*b->optimizer), 0.123) << "hyperparameters stay the live ones";
  EXPECT_EQ(state.progress.step, 11);
  EXPECT_EQ(state.progress.epoch, 1);
  EXPECT_EQ(state.progress.batch_in_epoch, 3);
  EXPECT_EQ(state.progress.samples_seen, 88);
  EXPECT_EQ(state.progress.world_size, 4);
  EXPECT_EQ(state.progress.scaler_scale, 32768.0);
  EXPECT_EQ(state.progress.scaler_growth_tracker, 17);
  EXPECT_TRUE(BitIdentical(torch::rand({6}), next_draw)) << "CPU generator restored";
  EXPECT_EQ(b->order(), next_order) << "caller's generator restored from rng_extra";
}

TEST_P(RoundTripTest, RestoreWithoutRngLeavesGeneratorsAlone) {
  const std::string dir = NewDir("no_rng_" + GetParam());
  const CheckpointManager manager = Manager(dir);
  std::unique_ptr<Rig> a = MakeRig(1, GetParam());
  TrainSteps(*a, 2);
  ASSERT_OK(manager.Save(StateOf(*a)));
  std::unique_ptr<Rig> b = MakeRig(2, GetParam());
  torch::manual_seed(77);
  const at::Tensor expected = torch::rand({4});
  torch::manual_seed(77);
  TrainingState state = StateOf(*b);
  RestoreOptions options;
  options.restore_rng = false;
  ASSERT_OK(manager.RestoreLatest(state, options));
  EXPECT_TRUE(BitIdentical(torch::rand({4}), expected));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, RoundTripTest, ::testing::Values("sgd", "adamw"));

// ---- newest valid, pruning, mismatches --------------------------------------------------

TEST(CheckpointManagerTest, SkipsCorruptFilesNewestFirst) {
  const std::string dir = NewDir("newest_valid");
  const CheckpointManager manager = Manager(dir, /*keep=*/10);
  std::unique_ptr<Rig> a = MakeRig(1, "sgd");
  for (int64_t step : {10, 20, 30}) {
    TrainSteps(*a, 1);
    a->progress.step = step;
    ASSERT_OK(manager.Save(StateOf(*a)));
  }
  // ckpt-40: a sealed, CRC-valid archive that is not a Baton checkpoint.
  {
    c10::Dict<std::string, at::Tensor> foreign;
    foreign.insert("w", torch::ones({2}));
    std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(foreign));
    ASSERT_OK(SealArchive(bytes));
    WriteRaw(manager.PathForStep(40), bytes);
  }
  // A complete checkpoint under a temporary name is never considered.
  fs::copy_file(manager.PathForStep(30), manager.PathForStep(50) + ".tmp.12345");
  // ckpt-30 truncated (a torn write without the atomic protocol).
  fs::resize_file(manager.PathForStep(30), fs::file_size(manager.PathForStep(30)) / 2);

  std::unique_ptr<Rig> b = MakeRig(2, "sgd");
  TrainingState state = StateOf(*b);
  absl::StatusOr<RestoredCheckpoint> restored = manager.RestoreLatest(state);
  ASSERT_OK(restored);
  EXPECT_EQ(restored->step, 20);
  EXPECT_EQ(state.progress.step, 20);
  ASSERT_THAT(restored->skipped, SizeIs(2));
  EXPECT_THAT(restored->skipped[0], HasSubstr("ckpt-00000040.pt: malformed checkpoint"));
  EXPECT_THAT(restored->skipped[1], HasSubstr("ckpt-00000030.pt: no checkpoint trailer"));

  // One flipped bit in the middle of ckpt-20.
  std::vector<char> bytes = ReadAll(manager.PathForStep(20));
  bytes[bytes.size() / 2] ^= 0x04;
  WriteRaw(manager.PathForStep(20), bytes);
  restored = manager.RestoreLatest(state);
  ASSERT_OK(restored);
  EXPECT_EQ(restored->step, 10);
  ASSERT_THAT(restored->skipped, SizeIs(3));
  EXPECT_THAT(restored->skipped[2], HasSubstr("CRC-32 mismatch"));

  EXPECT_THAT(manager.RestoreFrom(manager.PathForStep(20), state),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC-32")));

  WriteRaw(manager.PathForStep(10), std::vector<char>(1000, 'x'));
  EXPECT_THAT(manager.RestoreLatest(state),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no valid checkpoint")));
  EXPECT_THAT(Manager(NewDir("empty")).RestoreLatest(state),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no checkpoint")));
}

TEST(CheckpointManagerTest, KeepsTheNewestAndRemovesStaleTemporaries) {
  const std::string dir = NewDir("prune");
  const CheckpointManager manager = Manager(dir, /*keep=*/2, /*every=*/5);
  WriteRaw(dir + "/ckpt-00000009.pt.tmp.1", std::vector<char>(10, 'x'));  // A dead writer's.
  WriteRaw(dir + "/notes.txt", std::vector<char>(3, 'x'));                // Not ours: kept.
  std::unique_ptr<Rig> a = MakeRig(1, "sgd");
  for (int64_t step = 1; step <= 5; ++step) {
    a->progress.step = step;
    ASSERT_OK(manager.Save(StateOf(*a)));
  }
  EXPECT_THAT(manager.ListSteps(), ElementsAre(4, 5));
  EXPECT_THAT(Names(dir), ElementsAre("ckpt-00000004.pt", "ckpt-00000005.pt", "notes.txt"));

  // After a restore skipped a corrupt ckpt-9 (the loop resumed from 5), saving step 6
  // drops the abandoned later file instead of pruning the new one away.
  WriteRaw(manager.PathForStep(9), std::vector<char>(10, 'x'));
  a->progress.step = 6;
  ASSERT_OK(manager.Save(StateOf(*a)));
  EXPECT_THAT(manager.ListSteps(), ElementsAre(5, 6));

  EXPECT_FALSE(manager.ShouldSave(0));
  EXPECT_TRUE(manager.ShouldSave(5));
  EXPECT_FALSE(manager.ShouldSave(7));
  EXPECT_TRUE(manager.ShouldSave(10));
  EXPECT_FALSE(Manager(dir, 3, /*every=*/0).ShouldSave(5));

  CheckpointManagerOptions defaults;
  defaults.dir = dir;
  EXPECT_EQ(CheckpointManager::Create(defaults)->options().keep, 3);
  defaults.keep = -1;
  EXPECT_THAT(CheckpointManager::Create(defaults).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("keep_checkpoints")));
  defaults.keep = 3;
  defaults.generation = -1;
  EXPECT_THAT(CheckpointManager::Create(defaults).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("generation")));
  defaults.dir = "";
  EXPECT_THAT(CheckpointManager::Create(defaults).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
}

TEST(CheckpointManagerTest, RejectsStateThatDoesNotFitAndLeavesItAlone) {
  const std::string dir = NewDir("mismatch");
  const CheckpointManager manager = Manager(dir);
  std::unique_ptr<Rig> a = MakeRig(1, "sgd");
  TrainSteps(*a, 1);
  ASSERT_OK(manager.Save(StateOf(*a)));

  std::unique_ptr<Rig> narrow = MakeRig(2, "sgd", /*width=*/8);
  const std::map<std::string, at::Tensor> before = Snapshot(*narrow);
  TrainingState state = StateOf(*narrow);
  EXPECT_THAT(manager.RestoreLatest(state),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("tensor \"0.weight\"")));
  for (const auto& [name, t] : LiveTensors(*narrow)) EXPECT_TRUE(BitIdentical(t, before.at(name)));
  EXPECT_EQ(state.progress.step, 0);

  std::unique_ptr<Rig> adamw = MakeRig(2, "adamw");
  state = StateOf(*adamw);
  EXPECT_THAT(manager.RestoreLatest(state),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("optimizer is sgd")));

  std::unique_ptr<Rig> c = MakeRig(2, "sgd");
  state = StateOf(*c);
  state.tensors.pop_back();  // The model "lost" a buffer.
  EXPECT_THAT(manager.RestoreLatest(state),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("model lacks")));

  state = StateOf(*c);
  state.tensors.push_back(state.tensors.front());
  EXPECT_THAT(manager.Save(state),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate")));
}

// ---- checkpoints written by someone else (the job's own ranks can write the directory) --

// Python that writes checkpoint files as an attacker would: sealed (the trailer's CRC is
// right), with contents of its choosing. seal_bytes(path, zip) seals the ZIP archive `zip`
// (bytes without an archive comment) into `path`; seal(path, obj) torch.save()s `obj` and
// seals it.
constexpr char kSealPy[] = R"py(
import os, struct, zlib, torch
def seal_bytes(path, zip):
    data = bytearray(zip)
    assert data[-22:-18] == b'PK\x05\x06' and data[-2:] == b'\0\0'
    data[-2:] = struct.pack('<H', 20)
    data += b'BTNCKPT1' + struct.pack('<QI', len(data), zlib.crc32(bytes(data)))
    open(path, 'wb').write(bytes(data))
def seal(path, obj):
    torch.save(obj, path + '.zip')
    zip = open(path + '.zip', 'rb').read()
    os.unlink(path + '.zip')
    seal_bytes(path, zip)
)py";

// Each attack: a directory holding one honest checkpoint (step 1), then the attacker's file.
class CheckpointAttackTest : public ::testing::Test {
 protected:
  void SaveHonestCheckpoint(const std::string& name) {
    dir_ = NewDir(name);
    manager_.emplace(Manager(dir_));
    std::unique_ptr<Rig> a = MakeRig(1, "sgd");
    TrainSteps(*a, 1);
    ASSERT_OK(manager_->Save(StateOf(*a)));
  }

  // Restores into a fresh rig: the honest checkpoint, after skipping exactly one file for a
  // reason containing `why`.
  void ExpectRestoredSkippingOne(const std::string& why) {
    std::unique_ptr<Rig> b = MakeRig(2, "sgd");
    TrainingState state = StateOf(*b);
    absl::StatusOr<RestoredCheckpoint> restored = manager_->RestoreLatest(state);
    ASSERT_OK(restored);
    EXPECT_EQ(restored->step, 1);
    ASSERT_EQ(restored->skipped.size(), 1u);
    EXPECT_THAT(restored->skipped[0], HasSubstr(why));
  }

  std::string dir_;
  std::optional<CheckpointManager> manager_;
};

// A pickle that calls os.system when unpickled in Python (its REDUCE of a GLOBAL): the
// trainer's unpickler has no resolver for globals, so the file is corrupt to it, skipped,
// and nothing runs.
TEST_F(CheckpointAttackTest, APickleThatCallsAFunctionIsSkippedAndRunsNothing) {
  SaveHonestCheckpoint("pickle_call");
  const std::string marker = dir_ + "/ran";
  ASSERT_OK(testing::RunPython3(
      absl::StrCat(kSealPy, R"py(
class Call:
    def __reduce__(self):
        return (os.system, ('touch )py", marker, R"py(',))
seal(')py", manager_->PathForStep(7), R"py(', {'format': 'baton-checkpoint-v2', 'step': Call()})
)py"),
      dir_));
  ExpectRestoredSkippingOne(manager_->PathForStep(7));
  EXPECT_FALSE(fs::exists(marker));
}

// A pickle whose string header claims 2 GiB (0x7e000007 bytes) in a file of a few hundred:
// LibTorch's unpickler would allocate the 2 GiB before finding the stream short. The scan
// before it (pickle_scan.h) refuses the file first, naming the claim.
TEST_F(CheckpointAttackTest, APickleClaimingGigabytesIsRefusedBeforeTheUnpicklerAllocates) {
  SaveHonestCheckpoint("pickle_length");
  ASSERT_OK(testing::RunPython3(
      absl::StrCat(kSealPy, R"py(
import io, zipfile
path = ')py", manager_->PathForStep(5), R"py('
torch.save({'format': 'baton-checkpoint-v2', 'pad': 'abc'}, path + '.src')
src = zipfile.ZipFile(path + '.src')
out = io.BytesIO()
with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
    for info in src.infolist():
        data = src.read(info)
        if info.filename.endswith('/data.pkl'):
            assert data.count(b'X\x03\x00\x00\x00abc') == 1
            data = data.replace(b'X\x03\x00\x00\x00abc', b'X\x07\x00\x00\x7eabc')
        z.writestr(info.filename, data)
os.unlink(path + '.src')
seal_bytes(path, out.getvalue())
)py"),
      dir_));
  ExpectRestoredSkippingOne("claims 2113929223 bytes");
}

// Format v1 kept the optimizer state as a TorchScript archive, whose loader is TorchScript's
// importer (which a crafted archive crashed: checkpoint_contents_fuzz). A v1 file is
// refused, naming the format, and the job neither resumes from an older file nor starts
// over.
TEST_F(CheckpointAttackTest, FormatV1IsRefusedNotLoadedAndNotSkipped) {
  SaveHonestCheckpoint("v1");
  ASSERT_OK(testing::RunPython3(absl::StrCat(kSealPy, "seal('", manager_->PathForStep(2),
                                             "', {'format': 'baton-checkpoint-v1', "
                                             "'optimizer': torch.zeros(8, dtype=torch.uint8)})\n"),
                                dir_));
  std::unique_ptr<Rig> b = MakeRig(2, "sgd");
  const std::map<std::string, at::Tensor> before = Snapshot(*b);
  TrainingState state = StateOf(*b);
  EXPECT_THAT(manager_->RestoreLatest(state),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(manager_->PathForStep(2)), HasSubstr("baton-checkpoint-v1"))));
  for (const auto& [name, t] : LiveTensors(*b)) EXPECT_TRUE(BitIdentical(t, before.at(name)));
  EXPECT_EQ(state.progress.step, 0);
}

// Rewrites the checkpoint at `path` as a writer of the directory could: decoded, edited
// by `edit`, pickled and sealed again.
void RewriteCheckpoint(const std::string& path,
                       const std::function<void(c10::impl::GenericDict&)>& edit) {
  c10::impl::GenericDict d = torch::jit::pickle_load(ReadAll(path)).toGenericDict();
  edit(d);
  std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(d));
  ASSERT_OK(SealArchive(bytes));
  WriteRaw(path, bytes);
}

// The state dict of parameter `i` in a checkpoint's "optimizer_state".
c10::impl::GenericDict OptimizerStateOf(c10::impl::GenericDict& d, size_t i) {
  return d.at(c10::IValue("optimizer_state")).toListRef()[i].toGenericDict();
}

// Optimizer state is checked against the live optimizer before anything is loaded: a
// tensor of another shape (which SGD would index out of bounds on its next step), a name
// the optimizer does not keep, a state per parameter missing, a negative AdamW step, an
// AdamW state without its second moment.
TEST(CheckpointOptimizerStateTest, StateThatDoesNotFitIsRefusedAndLeavesTheOptimizerAlone) {
  struct Case {
    std::string optimizer;
    std::function<void(c10::impl::GenericDict&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"sgd",
       [](c10::impl::GenericDict& d) {
         OptimizerStateOf(d, 0).insert_or_assign("momentum_buffer", torch::zeros({1000}));
       },
       "\"momentum_buffer\" is Float[1000]"},
      {"sgd",
       [](c10::impl::GenericDict& d) {
         OptimizerStateOf(d, 1).insert("code", torch::zeros({1}));
       },
       "\"code\" is not sgd state"},
      {"sgd",
       [](c10::impl::GenericDict& d) {
         c10::List<c10::IValue> states = d.at(c10::IValue("optimizer_state")).toList();
         states.pop_back();
       },
       "optimizer state for"},
      {"adamw",
       [](c10::impl::GenericDict& d) {
         OptimizerStateOf(d, 0).insert_or_assign("step", at::scalar_tensor(-5, at::kLong));
       },
       "non-negative"},
      {"adamw",
       [](c10::impl::GenericDict& d) { OptimizerStateOf(d, 0).erase("exp_avg_sq"); },
       "needs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    const std::string dir = NewDir("optimizer_state");
    const CheckpointManager manager = Manager(dir);
    std::unique_ptr<Rig> a = MakeRig(1, c.optimizer);
    TrainSteps(*a, 2);
    ASSERT_OK(manager.Save(StateOf(*a)));
    RewriteCheckpoint(manager.PathForStep(2), c.edit);
    std::unique_ptr<Rig> b = MakeRig(2, c.optimizer);
    const std::map<std::string, at::Tensor> before = Snapshot(*b);
    TrainingState state = StateOf(*b);
    EXPECT_THAT(manager.RestoreLatest(state),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.error)));
    for (const auto& [name, t] : LiveTensors(*b)) EXPECT_TRUE(BitIdentical(t, before.at(name)));
    EXPECT_TRUE(b->optimizer->state().empty());
  }
}

// ---- generations: fencing a superseded writer (split-brain safety) ----------------------

// A rig whose extra tensor "pad" carries a marker, so a test can tell which writer's
// checkpoint a restore loaded.
std::unique_ptr<Rig> MarkedRig() {
  std::unique_ptr<Rig> rig = MakeRig(1, "sgd");
  rig->pad = torch::zeros({1});
  return rig;
}

absl::StatusOr<std::string> SaveMarked(const CheckpointManager& manager, Rig& rig, int64_t step,
                                       float marker) {
  rig.pad.fill_(marker);
  rig.progress.step = step;
  return manager.Save(StateOf(rig));
}

// Restores into `rig` and returns the marker of the checkpoint loaded.
float RestoreMarker(const CheckpointManager& manager, Rig& rig,
                    RestoredCheckpoint* restored = nullptr) {
  TrainingState state = StateOf(rig);
  absl::StatusOr<RestoredCheckpoint> result = manager.RestoreLatest(state);
  EXPECT_OK(result);
  if (!result.ok()) return -1;
  if (restored != nullptr) *restored = *result;
  return rig.pad.item<float>();
}

// The writer of `generation` of `job` in `dir`.
CheckpointManager JobManagerOf(const std::string& dir, const std::string& job,
                               int64_t generation) {
  CheckpointManagerOptions options;
  options.dir = dir;
  options.checkpoint_every = 1;
  options.generation = generation;
  options.job = job;
  return CheckpointManager::Create(options).value();
}

// A job resubmitted into the directory of an earlier one continues from that job's newest
// checkpoint and adopts the directory: the earlier job's records go, its writers are fenced.
TEST(GenerationTest, ALaterJobContinuesFromAnEarlierJobsCheckpointsAndAdoptsTheDirectory) {
  const std::string dir = NewDir("adopted");
  std::unique_ptr<Rig> rig = MarkedRig();
  const CheckpointManager a1 = JobManagerOf(dir, "j-a", 1);
  const CheckpointManager a3 = JobManagerOf(dir, "j-a", 3);
  ASSERT_OK(a1.RecordStart(0));
  ASSERT_OK(SaveMarked(a1, *rig, 10, 110));
  ASSERT_OK(a3.RecordStart(10));
  ASSERT_OK(SaveMarked(a3, *rig, 20, 320));
  const std::string record = absl::StrCat(dir, "/gen-00000003.start");
  const std::vector<char> text = ReadAll(record);
  EXPECT_EQ(std::string(text.begin(), text.end()),
            "baton-generation-start-v1\njob j-a\ngeneration 3\nresumed_step 10\n");

  const CheckpointManager b1 = JobManagerOf(dir, "j-b", 1);
  RestoredCheckpoint restored;
  EXPECT_EQ(RestoreMarker(b1, *rig, &restored), 320);  // j-a's newest, though its generation is 3
  ASSERT_OK(b1.RecordStart(restored.step));
  EXPECT_THAT(Names(dir), ElementsAre("ckpt-00000010-g1.pt", "ckpt-00000020-g3.pt",
                                      "gen-00000001.start"));
  ASSERT_OK(SaveMarked(b1, *rig, 21, 121));
  // j-a's generation 3, were it still running, is fenced by j-b's record.
  EXPECT_THAT(SaveMarked(a3, *rig, 22, 322),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("generation 3 is superseded by generation 1 of job j-b")));
  EXPECT_EQ(RestoreMarker(JobManagerOf(dir, "j-b", 2), *rig), 121);
}

TEST(GenerationTest, AStaleWriterCannotCommitOrDeleteOnceANewerGenerationStarted) {
  const std::string dir = NewDir("fenced_writer");
  const CheckpointManager old_writer = ManagerOf(dir, 5, /*keep=*/1);
  const CheckpointManager new_writer = ManagerOf(dir, 6);
  std::unique_ptr<Rig> rig = MarkedRig();
  ASSERT_OK(old_writer.RecordStart(0));
  ASSERT_OK(SaveMarked(old_writer, *rig, 10, 510));
  RestoredCheckpoint restored;
  EXPECT_EQ(RestoreMarker(new_writer, *rig, &restored), 510);
  EXPECT_EQ(restored.generation, 5);
  ASSERT_OK(new_writer.RecordStart(restored.step));
  ASSERT_OK(SaveMarked(new_writer, *rig, 11, 611));
  ASSERT_OK(SaveMarked(new_writer, *rig, 12, 612));
  const std::vector<std::string> before = Names(dir);
  EXPECT_THAT(before,
              ElementsAre("ckpt-00000010-g5.pt", "ckpt-00000011-g6.pt", "ckpt-00000012-g6.pt",
                          "gen-00000005.start", "gen-00000006.start"));
  const std::vector<char> newest = ReadAll(dir + "/ckpt-00000012-g6.pt");

  // The stale writer (keep=1: it would prune everything but its own file) goes on.
  for (int64_t step : {11, 12, 13}) {
    EXPECT_THAT(SaveMarked(old_writer, *rig, step, 500 + step),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("generation 5 is superseded by generation 6")));
  }
  EXPECT_THAT(old_writer.RecordStart(10),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat("generation 6 (", dir,
                                              "/gen-00000006.start exists): refusing to record "
                                              "its start in ",
                                              dir, "/gen-00000005.start"))));
  EXPECT_EQ(Names(dir), before) << "nothing written, replaced or deleted";
  EXPECT_EQ(ReadAll(dir + "/ckpt-00000012-g6.pt"), newest);
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 7), *rig), 612);

  // Even without generation 6's start record (lost), generation 5's pruning leaves
  // generation 6's files alone.
  fs::remove(dir + "/gen-00000006.start");
  ASSERT_OK(SaveMarked(old_writer, *rig, 14, 514));
  EXPECT_THAT(Names(dir), ElementsAre("ckpt-00000011-g6.pt", "ckpt-00000012-g6.pt",
                                      "ckpt-00000014-g5.pt", "gen-00000005.start"));
}

TEST(GenerationTest, AForkWrittenBeforeTheNewerStartIsIgnoredByRestoreAndPruned) {
  const std::string dir = NewDir("stale_fork");
  const CheckpointManager old_writer = ManagerOf(dir, 5);
  const CheckpointManager new_writer = ManagerOf(dir, 6);
  std::unique_ptr<Rig> rig = MarkedRig();
  ASSERT_OK(old_writer.RecordStart(0));
  ASSERT_OK(SaveMarked(old_writer, *rig, 10, 510));
  ASSERT_OK(SaveMarked(old_writer, *rig, 20, 520));
  RestoredCheckpoint restored;
  EXPECT_EQ(RestoreMarker(new_writer, *rig, &restored), 520);
  // Generation 5 commits step 30 after generation 6 restored, before its start record:
  // allowed (nothing newer has started yet), and a fork of the lineage generation 6 took.
  ASSERT_OK(SaveMarked(old_writer, *rig, 30, 530));
  ASSERT_OK(new_writer.RecordStart(restored.step));
  const std::vector<char> record = ReadAll(dir + "/gen-00000006.start");
  EXPECT_EQ(std::string(record.begin(), record.end()),
            "baton-generation-start-v1\njob \ngeneration 6\nresumed_step 20\n");

  // Any later restore (generation 6 crashed before its first checkpoint) skips the fork,
  // and so does the listing a restore from memory compares its snapshots with.
  absl::StatusOr<std::optional<CheckpointFile>> newest = ManagerOf(dir, 7).NewestRestorable();
  ASSERT_OK(newest);
  ASSERT_TRUE(newest->has_value());
  EXPECT_EQ((*newest)->path, dir + "/ckpt-00000020-g5.pt");
  EXPECT_EQ((*newest)->step, 20);
  EXPECT_EQ((*newest)->generation, 5);
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 7), *rig, &restored), 520);
  EXPECT_EQ(restored.path, dir + "/ckpt-00000020-g5.pt");
  ASSERT_THAT(restored.stale, SizeIs(1));
  EXPECT_THAT(restored.stale[0],
              HasSubstr("ckpt-00000030-g5.pt: stale: generation 6 started from step 20"));
  EXPECT_THAT(restored.skipped, SizeIs(0));

  // The newer writer's first commit (of a later step than the fork's) prunes the fork.
  ASSERT_OK(SaveMarked(new_writer, *rig, 40, 640));
  EXPECT_THAT(Names(dir),
              ElementsAre("ckpt-00000010-g5.pt", "ckpt-00000020-g5.pt", "ckpt-00000040-g6.pt",
                          "gen-00000005.start", "gen-00000006.start"));
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 7), *rig), 640);
}

TEST(GenerationTest, OnlyStaleFilesLeaveNothingToRestore) {
  const std::string dir = NewDir("only_stale");
  std::unique_ptr<Rig> rig = MarkedRig();
  ASSERT_OK(SaveMarked(ManagerOf(dir, 5), *rig, 30, 530));
  ASSERT_OK(ManagerOf(dir, 6).RecordStart(0));
  TrainingState state = StateOf(*rig);
  EXPECT_THAT(ManagerOf(dir, 7).RestoreLatest(state),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("(0 corrupt, 1 stale)")));
  absl::StatusOr<std::optional<CheckpointFile>> newest = ManagerOf(dir, 7).NewestRestorable();
  ASSERT_OK(newest);
  EXPECT_FALSE(newest->has_value());

  // A start record someone edited: staleness cannot be judged, so nothing is restored.
  WriteRaw(dir + "/gen-00000006.start", std::vector<char>{'?', '\n'});
  EXPECT_THAT(ManagerOf(dir, 7).RestoreLatest(state),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("malformed start record " + dir + "/gen-00000006.start")));
  EXPECT_THAT(ManagerOf(dir, 7).NewestRestorable(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed start record")));
}

TEST(GenerationTest, TheSameStepOfTwoGenerationsIsTwoFilesAndRestorePicksTheNewer) {
  const std::string dir = NewDir("same_step");
  const CheckpointManager old_writer = ManagerOf(dir, 5);
  const CheckpointManager new_writer = ManagerOf(dir, 6);
  std::unique_ptr<Rig> rig = MarkedRig();
  ASSERT_OK(SaveMarked(old_writer, *rig, 10, 510));
  ASSERT_OK(new_writer.RecordStart(10));
  // Generation 6 saves the step it resumed from at once (a SIGUSR1 before its first step).
  absl::StatusOr<std::string> path = SaveMarked(new_writer, *rig, 10, 610);
  ASSERT_OK(path);
  EXPECT_EQ(*path, dir + "/ckpt-00000010-g6.pt");
  EXPECT_THAT(Names(dir),
              ElementsAre("ckpt-00000010-g5.pt", "ckpt-00000010-g6.pt", "gen-00000006.start"));
  const std::vector<CheckpointFile> files = new_writer.ListCheckpoints();
  ASSERT_THAT(files, SizeIs(2));
  EXPECT_EQ(files[0].generation, 5);
  EXPECT_EQ(files[1].generation, 6);
  EXPECT_THAT(new_writer.ListSteps(), ElementsAre(10));

  RestoredCheckpoint restored;
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 7), *rig, &restored), 610);
  EXPECT_EQ(restored.generation, 6);
  EXPECT_THAT(restored.stale, SizeIs(0)) << "step 10 of generation 5 is not stale";

  // The stale writer cannot replace either file.
  EXPECT_THAT(SaveMarked(old_writer, *rig, 10, 999),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("generation 6")));
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 7), *rig), 610);

  // Generation 6's file corrupt: the fallback is generation 5's of the same step.
  WriteRaw(dir + "/ckpt-00000010-g6.pt", std::vector<char>(100, 'x'));
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 7), *rig, &restored), 510);
  EXPECT_THAT(restored.skipped, SizeIs(1));
}

TEST(GenerationTest, LegacyNamesRestoreAsGenerationZero) {
  const std::string dir = NewDir("legacy");
  std::unique_ptr<Rig> rig = MarkedRig();
  const CheckpointManager legacy = Manager(dir);
  ASSERT_OK(SaveMarked(legacy, *rig, 10, 10));
  ASSERT_OK(SaveMarked(legacy, *rig, 20, 20));
  ASSERT_OK(legacy.RecordStart(20));  // No start record for generation 0.
  EXPECT_THAT(Names(dir), ElementsAre("ckpt-00000010.pt", "ckpt-00000020.pt"));

  const CheckpointManager writer = ManagerOf(dir, 1);
  RestoredCheckpoint restored;
  EXPECT_EQ(RestoreMarker(writer, *rig, &restored), 20);
  EXPECT_EQ(restored.path, dir + "/ckpt-00000020.pt");
  EXPECT_EQ(restored.generation, 0);
  ASSERT_OK(writer.RecordStart(restored.step));
  ASSERT_OK(SaveMarked(writer, *rig, 30, 130));
  EXPECT_THAT(Names(dir), ElementsAre("ckpt-00000010.pt", "ckpt-00000020.pt", "ckpt-00000030-g1.pt",
                                      "gen-00000001.start"));
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 2), *rig), 130);
  // A generation-0 writer in a directory with start records is an older generation.
  EXPECT_THAT(SaveMarked(legacy, *rig, 40, 40),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("generation 0 is superseded by generation 1")));
}

TEST(GenerationTest, StartRecordsAreBoundedButKeptWhileOnlyTheyMakeAFileStale) {
  const std::string dir = NewDir("bounded_records");
  std::unique_ptr<Rig> rig = MarkedRig();
  // A file that cannot be deleted (a non-empty directory under a checkpoint name). Only
  // generation 2's record (resumed from step 10) makes it stale; later ones resumed from
  // step 20 and beyond.
  fs::create_directories(dir + "/ckpt-00000015-g1.pt");
  WriteRaw(dir + "/ckpt-00000015-g1.pt/x", std::vector<char>(1, 'x'));
  auto run_generation = [&](int64_t generation) {
    const CheckpointManager manager = ManagerOf(dir, generation);
    TrainingState state = StateOf(*rig);
    absl::StatusOr<RestoredCheckpoint> restored = manager.RestoreLatest(state);
    ASSERT_OK(manager.RecordStart(restored.ok() ? restored->step : 0));
    ASSERT_OK(SaveMarked(manager, *rig, generation * 10, static_cast<float>(generation)));
  };
  auto records = [&] {
    std::vector<std::string> names;
    for (const std::string& name : Names(dir)) {
      if (absl::EndsWith(name, ".start")) names.push_back(name);
    }
    return names;
  };
  for (int64_t generation = 1; generation <= 10; ++generation) run_generation(generation);
  EXPECT_THAT(records(),
              ElementsAre("gen-00000002.start", "gen-00000007.start", "gen-00000008.start",
                          "gen-00000009.start", "gen-00000010.start"));
  EXPECT_THAT(ManagerOf(dir, 10).ListSteps(), ElementsAre(15, 80, 90, 100));

  fs::remove_all(dir + "/ckpt-00000015-g1.pt");
  run_generation(11);
  EXPECT_THAT(records(), ElementsAre("gen-00000008.start", "gen-00000009.start",
                                     "gen-00000010.start", "gen-00000011.start"));
  EXPECT_THAT(ManagerOf(dir, 11).ListSteps(), ElementsAre(90, 100, 110));
  EXPECT_EQ(RestoreMarker(ManagerOf(dir, 12), *rig), 11);
}

TEST(GenerationTest, AFencedFinalSaveIsRefused) {
  const std::string dir = NewDir("fenced_final");
  const std::string final_path = dir + "/final.pt";
  std::unique_ptr<Rig> rig = MarkedRig();
  rig->pad.fill_(5);
  const CheckpointManager old_writer = ManagerOf(dir, 5);
  ASSERT_OK(old_writer.SaveWeights(LiveTensors(*rig), final_path));
  const std::vector<char> written = ReadAll(final_path);

  ASSERT_OK(ManagerOf(dir, 6).RecordStart(0));
  rig->pad.fill_(55);
  EXPECT_THAT(
      old_writer.SaveWeights(LiveTensors(*rig), final_path),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("superseded by generation 6")));
  EXPECT_EQ(ReadAll(final_path), written);
  EXPECT_THAT(Names(dir), ElementsAre("final.pt", "gen-00000006.start"));

  rig->pad.fill_(6);
  ASSERT_OK(ManagerOf(dir, 6).SaveWeights(LiveTensors(*rig), final_path));
  const c10::IValue loaded = torch::jit::pickle_load(ReadAll(final_path));
  EXPECT_EQ(loaded.toGenericDict().at("pad").toTensor().item<float>(), 6);
}

// ---- crash safety: a writer killed with SIGKILL at points of the write protocol ---------

// Events under a directory, read with a deadline (no sleeping).
class DirWatch {
 public:
  explicit DirWatch(const std::string& dir) : fd_(::inotify_init1(IN_CLOEXEC)) {
    EXPECT_GE(fd_, 0);
    EXPECT_GE(
        ::inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO),
        0);
  }
  ~DirWatch() { ::close(fd_); }

  // Waits for an event with `mask` whose name contains `infix`; false after 60 s.
  bool WaitFor(uint32_t mask, const std::string& infix) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (true) {
      while (!pending_.empty()) {
        auto [m, name] = pending_.front();
        pending_.erase(pending_.begin());
        if ((m & mask) != 0 && absl::StrContains(name, infix)) return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      alignas(inotify_event) char buf[64 * 1024];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        pending_.emplace_back(ev->mask, ev->len > 0 ? std::string(ev->name) : "");
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
    }
  }

 private:
  int fd_;
  std::vector<std::pair<uint32_t, std::string>> pending_;
};

struct KillPoint {
  std::string name;
  uint32_t event;  // Kill as soon as the writer's temporary file reports this.
};

class KillWriterTest : public ::testing::TestWithParam<KillPoint> {};

TEST_P(KillWriterTest, NeverLeavesALoadableTornFile) {
  const std::string dir = NewDir("kill_" + GetParam().name);
  DirWatch watch(dir);
  const pid_t child = SpawnSelf(kRoleWriter, dir, "sgd");
  ASSERT_GT(child, 0);
  // Two complete checkpoints, then the next write reaches the kill point.
  const bool reached = watch.WaitFor(IN_MOVED_TO, "ckpt-00000001.pt") &&
                       watch.WaitFor(IN_MOVED_TO, "ckpt-00000002.pt") &&
                       watch.WaitFor(GetParam().event, ".tmp.");
  ::kill(child, SIGKILL);
  EXPECT_EQ(WaitExitCode(child), 128 + SIGKILL);
  ASSERT_TRUE(reached) << "the writer did not get to the kill point in time";

  // Every file under a checkpoint name is whole; the newest restores.
  const CheckpointManager manager = Manager(dir);
  const std::vector<int64_t> steps = manager.ListSteps();
  ASSERT_FALSE(steps.empty());
  for (int64_t step : steps) {
    const std::vector<char> bytes = ReadAll(manager.PathForStep(step));
    EXPECT_OK(VerifySealedArchive(absl::string_view(bytes.data(), bytes.size())));
  }
  std::vector<std::string> temporaries;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (absl::StrContains(name, ".tmp.")) temporaries.push_back(name);
  }
  std::cerr << "killed at " << GetParam().name << ": steps " << steps.front() << ".."
            << steps.back() << ", " << temporaries.size() << " temporary file(s) left\n";

  std::unique_ptr<Rig> rig = MakeRig(2, "sgd");
  rig->pad = torch::zeros({kPadElements});
  TrainingState state = StateOf(*rig);
  absl::StatusOr<RestoredCheckpoint> restored = manager.RestoreLatest(state);
  ASSERT_OK(restored);
  EXPECT_EQ(restored->step, steps.back());
  EXPECT_THAT(restored->skipped, SizeIs(0));
  EXPECT_EQ(rig->pad[7].item<float>(), static_cast<float>(steps.back()));

  // The next writer clears the dead one's temporary files.
  state.progress.step = steps.back() + 1;
  ASSERT_OK(manager.Save(state));
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_FALSE(absl::StrContains(entry.path().filename().string(), ".tmp."));
  }
}

INSTANTIATE_TEST_SUITE_P(Points, KillWriterTest,
                         ::testing::Values(KillPoint{"after_create", IN_CREATE},
                                           KillPoint{"after_write", IN_MODIFY},
                                           KillPoint{"after_close", IN_CLOSE_WRITE}),
                         [](const auto& info) { return info.param.name; });

int RunWriter(const std::string& dir) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const CheckpointManager manager = Manager(dir);
  std::unique_ptr<Rig> rig = MakeRig(1, "sgd");
  rig->pad = torch::zeros({kPadElements});
  for (int64_t step = 1; step < 100000; ++step) {
    rig->pad.fill_(static_cast<float>(step));
    rig->progress.step = step;
    absl::StatusOr<std::string> path = manager.Save(StateOf(*rig));
    if (!path.ok()) {
      std::cerr << "writer: " << path.status() << "\n";
      return 1;
    }
  }
  return 0;
}

// ---- bit-identical resume in a fresh process ------------------------------------------

class ResumeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ResumeTest, SaveRestoreInAFreshProcessIsBitIdentical) {
  const std::string dir = NewDir("resume_" + GetParam());
  std::unique_ptr<Rig> straight = MakeRig(1, GetParam());
  TrainSteps(*straight, kTotalSteps);

  std::unique_ptr<Rig> first = MakeRig(1, GetParam());
  TrainSteps(*first, kTotalSteps / 2);
  ASSERT_OK(Manager(dir).Save(StateOf(*first)));
  TrainSteps(*first, kTotalSteps / 2);  // Saving changes nothing.
  const std::map<std::string, at::Tensor> straight_tensors = Snapshot(*straight);
  for (const auto& [name, t] : LiveTensors(*first)) {
    EXPECT_TRUE(BitIdentical(t, straight_tensors.at(name))) << name;
  }

  const pid_t child = SpawnSelf(kRoleResume, dir, GetParam());
  ASSERT_GT(child, 0);
  ASSERT_EQ(WaitExitCode(child), 0);
  std::vector<char> bytes = ReadAll(dir + "/final.pt");
  const c10::IValue loaded = torch::jit::pickle_load(bytes);
  ASSERT_TRUE(loaded.isGenericDict());
  const c10::impl::GenericDict resumed = loaded.toGenericDict();
  const NamedTensors expected = LiveTensors(*straight);
  ASSERT_EQ(resumed.size(), expected.size());
  for (const auto& [name, t] : expected) {
    auto it = resumed.find(c10::IValue(name));
    ASSERT_NE(it, resumed.end()) << name;
    EXPECT_TRUE(BitIdentical(it->value().toTensor(), t)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ResumeTest, ::testing::Values("sgd", "adamw"));

int RunResume(const std::string& dir, const std::string& optimizer_name) {
  std::unique_ptr<Rig> rig = MakeRig(999, optimizer_name);  // Other initial weights.
  torch::manual_seed(31337);                                // Other generator state.
  TrainingState state = StateOf(*rig);
  absl::StatusOr<RestoredCheckpoint> restored = Manager(dir).RestoreLatest(state);
  if (!restored.ok() || restored->step != kTotalSteps / 2) {
    std::cerr << "resume: " << restored.status() << "\n";
    return 1;
  }
  AdoptProgress(*rig, state.progress);
  TrainSteps(*rig, kTotalSteps - static_cast<int>(state.progress.step));
  const absl::Status saved = SaveWeights(LiveTensors(*rig), dir + "/final.pt");
  if (!saved.ok()) {
    std::cerr << "resume: " << saved << "\n";
    return 1;
  }
  return 0;
}

// ---- Python reads both file kinds ------------------------------------------------------

TEST(CheckpointPythonTest, TorchLoadReadsStepCheckpointsAndFinalWeights) {
  const std::string dir = NewDir("python");
  std::unique_ptr<Rig> a = MakeRig(1, "adamw");
  TrainSteps(*a, 3);
  a->progress.scaler_scale = 1024.0;
  absl::StatusOr<std::string> path = ManagerOf(dir, 3).Save(StateOf(*a));
  ASSERT_OK(path);
  EXPECT_EQ(*path, dir + "/ckpt-00000003-g3.pt");
  ASSERT_OK(SaveWeights(LiveTensors(*a), dir + "/final.pt"));

  const std::string script = absl::StrCat(R"py(
import struct, zlib, torch
path, final = ")py",
                                          *path, R"py(", ")py", dir, R"py(/final.pt"
data = open(path, 'rb').read()
assert data[-20:-12] == b'BTNCKPT1', 'magic'
n, crc = struct.unpack('<QI', data[-12:])
assert n == len(data) - 20 and zlib.crc32(data[:n]) == crc, 'trailer'
d = torch.load(path)
assert d['format'] == 'baton-checkpoint-v2'
assert (d['step'], d['epoch'], d['batch_in_epoch'], d['samples_seen']) == (3, 0, 3, 24), d
assert d['scaler_scale'] == 1024.0 and d['optimizer_type'] == 'adamw'
assert d['rng_cpu'].dtype == torch.uint8
params = list(d['model'].values())
assert len(d['optimizer_state']) == d['optimizer_params'] > 0
for s in d['optimizer_state']:
    assert int(s['step']) == 3 and s['exp_avg'].shape == s['exp_avg_sq'].shape, s.keys()
f = torch.load(final)
assert isinstance(f, dict) and set(f) == set(d['model']), (sorted(f), sorted(d['model']))
for k, v in f.items():
    assert torch.equal(v, d['model'][k]), k
    print(k, repr(v.double().sum().item()))
)py");
  absl::StatusOr<std::string> out = testing::RunPython3(script, dir);
  ASSERT_OK(out);
  std::map<std::string, double> sums;
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_EQ(parts.size(), 2u) << *out;
    ASSERT_TRUE(absl::SimpleAtod(parts[1], &sums[parts[0]])) << *out;
  }
  const NamedTensors live = LiveTensors(*a);
  ASSERT_EQ(sums.size(), live.size()) << *out;
  for (const auto& [name, t] : live) {
    EXPECT_NEAR(sums.at(name), t.to(torch::kFloat64).sum().item<double>(), 1e-9) << name;
  }
}

// The child roles (see SpawnSelf).
int RunChild(const std::string& role) {
  const char* dir = std::getenv(kDirEnv);
  const char* optimizer_name = std::getenv(kOptimizerEnv);
  if (dir == nullptr || optimizer_name == nullptr) return 2;
  if (role == kRoleWriter) return RunWriter(dir);
  if (role == kRoleResume) return RunResume(dir, optimizer_name);
  return 2;
}

}  // namespace
}  // namespace baton::trainer

int main(int argc, char** argv) {
  torch::set_num_threads(1);  // The same intra-op split in every process.
  if (const char* role = std::getenv(baton::trainer::kRoleEnv)) {
    return baton::trainer::RunChild(role);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
