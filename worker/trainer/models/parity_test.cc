// The built-in models against PyTorch references (testing/torch_reference.py, run with
// /usr/bin/python3 and Debian's python3-torch): torchvision's ResNet-18/50 and nanoGPT load
// the C++ weights and buffers by name and reproduce the C++ logits. This pins both the
// architectures and the checkpoint names Python tools see.

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "worker/trainer/models/gpt.h"
#include "worker/trainer/models/resnet.h"

namespace baton::trainer {
namespace {

std::string CasePath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, ".pt");
}

// Saves input, logits and the module's state, then runs the Python reference on them.
void ExpectPythonAgrees(torch::nn::Module& module, const at::Tensor& input,
                        const at::Tensor& logits, const std::string& name,
                        const std::vector<int64_t>& args) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("input", input);
  dict.insert("logits", logits.detach());
  for (const auto& item : module.named_parameters()) {
    dict.insert("state." + item.key(), item.value().detach());
  }
  for (const auto& item : module.named_buffers()) dict.insert("state." + item.key(), item.value());
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  const std::string path = CasePath(name);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string command =
      absl::StrCat("/usr/bin/python3 worker/trainer/models/testing/torch_reference.py '", path,
                   "' ", name, " ", absl::StrJoin(args, " "));
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

struct ResNetCase {
  int depth;
  int64_t channels;
  int64_t side;
  bool cifar_stem;
};

TEST(ParityTest, ResNetMatchesTorchvision) {
  for (const ResNetCase& c :
       {ResNetCase{18, 3, 16, true}, ResNetCase{50, 1, 12, true}, ResNetCase{18, 3, 72, false}}) {
    SCOPED_TRACE(testing::Message() << "resnet" << c.depth << " " << c.side);
    ResNet net(ResNetOptions{c.depth, c.channels, 7, c.cifar_stem}, /*seed=*/c.depth);
    net->train(true);
    at::Generator gen = at::detail::createCPUGenerator(1);
    const at::Tensor input = at::randn({3, c.channels, c.side, c.side}, gen);
    at::NoGradGuard no_grad;
    const at::Tensor logits = net->forward(input);
    // Training mode: the logits use batch statistics, so the running statistics (already
    // updated by forward()) do not affect them; they are saved to check their names.
    ExpectPythonAgrees(*net, input, logits, "resnet" + std::to_string(c.depth),
                       {c.channels, 7, c.cifar_stem ? 1 : 0});
  }
}

TEST(ParityTest, GptMatchesNanoGpt) {
  const GptOptions o{.vocab_size = 97, .context_length = 16, .layers = 2, .heads = 4, .width = 32};
  Gpt gpt(o, /*seed=*/5);
  at::Generator gen = at::detail::createCPUGenerator(2);
  const at::Tensor input = at::randint(97, {2, 11}, gen);
  at::NoGradGuard no_grad;
  const at::Tensor logits = gpt->forward(input);
  ExpectPythonAgrees(*gpt, input, logits, "gpt", {97, 16, 2, 4, 32});
}

}  // namespace
}  // namespace baton::trainer
