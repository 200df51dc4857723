#include "worker/trainer/pipeline/stage_model.h"

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(SplitLayersTest, ContiguousAndBalanced) {
  auto ranges = [](int64_t layers, int stages) {
    std::string out;
    const std::vector<LayerRange> split = SplitLayers(layers, stages).value();
    for (const LayerRange& r : split) {
      absl::StrAppend(&out, "[", r.begin, ",", r.end, ")");
    }
    return out;
  };
  EXPECT_EQ(ranges(4, 2), "[0,2)[2,4)");
  EXPECT_EQ(ranges(5, 2), "[0,3)[3,5)");
  EXPECT_EQ(ranges(7, 3), "[0,3)[3,5)[5,7)");
  EXPECT_EQ(ranges(3, 3), "[0,1)[1,2)[2,3)");
  EXPECT_EQ(ranges(3, 1), "[0,3)");
  EXPECT_THAT(SplitLayers(2, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 layers into 3")));
  EXPECT_THAT(SplitLayers(2, 0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0")));
}

// Names of `params` in `module` (by identity).
std::vector<std::string> NamesOf(const torch::nn::Module& module,
                                 const std::vector<at::Tensor>& params) {
  std::vector<std::string> names;
  for (const auto& item : module.named_parameters()) {
    for (const at::Tensor& p : params) {
      if (p.is_same(item.value())) names.push_back(item.key());
    }
  }
  return names;
}

GptOptions SmallGpt() {
  GptOptions o;
  o.vocab_size = 17;
  o.context_length = 6;
  o.layers = 3;
  o.heads = 2;
  o.width = 8;
  return o;
}

// Stage outputs chained are the whole model's logits, bit for bit; the stages' parameters
// cover the model's exactly once, except the tied wte on the first and the last stage.
TEST(StageModelTest, GptStagesChainToTheModel) {
  const at::Tensor tokens = at::randint(17, {3, 6}, at::detail::createCPUGenerator(1), at::kLong);
  Gpt whole(SmallGpt(), /*seed=*/5);
  const at::Tensor want = whole->forward(tokens);
  for (int stages = 1; stages <= 3; ++stages) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    std::map<std::string, int> owners;
    at::Tensor x = tokens;
    for (int s = 0; s < stages; ++s) {
      Gpt model(SmallGpt(), /*seed=*/5);
      absl::StatusOr<std::unique_ptr<StageModel>> stage = MakeGptStage(model, s, stages);
      ASSERT_OK(stage.status());
      x = (*stage)->Forward(x);
      for (const std::string& name : NamesOf(*model, (*stage)->Parameters())) ++owners[name];
      const std::vector<std::string> tied = NamesOf(*model, (*stage)->TiedParameters());
      if (stages > 1 && (s == 0 || s == stages - 1)) {
        EXPECT_EQ(tied, std::vector<std::string>{"transformer.wte.weight"});
        EXPECT_EQ((*stage)->TiedPeer(), s == 0 ? stages - 1 : 0);
      } else {
        EXPECT_TRUE(tied.empty());
        EXPECT_EQ((*stage)->TiedPeer(), -1);
      }
    }
    EXPECT_TRUE(x.equal(want));
    for (const auto& item : whole->named_parameters()) {
      const int want_owners = item.key() == "transformer.wte.weight" && stages > 1 ? 2 : 1;
      EXPECT_EQ(owners[item.key()], want_owners) << item.key();
    }
  }
}

TEST(StageModelTest, MlpStagesChainToTheModel) {
  const MlpOptions options{/*input_dim=*/10, /*hidden=*/{8, 6, 4}, /*num_classes=*/3};
  const at::Tensor inputs = at::randn({5, 10}, at::detail::createCPUGenerator(2));
  const at::Tensor want = Mlp(options, 9)->forward(inputs);
  for (int stages = 1; stages <= 4; ++stages) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    at::Tensor x = inputs;
    size_t params = 0;
    for (int s = 0; s < stages; ++s) {
      absl::StatusOr<std::unique_ptr<StageModel>> stage = MakeMlpStage(Mlp(options, 9), s, stages);
      ASSERT_OK(stage.status());
      x = (*stage)->Forward(x);
      params += (*stage)->Parameters().size();
      EXPECT_EQ((*stage)->TiedPeer(), -1);
    }
    EXPECT_TRUE(x.equal(want));
    EXPECT_EQ(params, 8u);
  }
  EXPECT_THAT(MakeMlpStage(Mlp(options, 9), 0, 5),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("4 layers into 5")));
  EXPECT_THAT(
      MakeGptStage(Gpt(SmallGpt(), 1), 2, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stage 2 is not a stage of 2")));
}

}  // namespace
}  // namespace baton::trainer::pipeline
