#include "tools/fuzz/mutator.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace baton::fuzz {
namespace {

std::vector<std::string> Sequence(uint64_t seed, size_t max_size) {
  trainer::Prng rng(seed);
  const std::vector<std::string> seeds = {"hello, fuzzer", std::string(100, 'x')};
  std::vector<std::string> out;
  for (int i = 0; i < 200; ++i) {
    std::string input = seeds[i % seeds.size()];
    Mutate(input, seeds, max_size, rng);
    out.push_back(input);
  }
  return out;
}

TEST(MutatorTest, SameSeedSameInputs) { EXPECT_EQ(Sequence(7, 1024), Sequence(7, 1024)); }

TEST(MutatorTest, DifferentSeedsDiffer) { EXPECT_NE(Sequence(7, 1024), Sequence(8, 1024)); }

TEST(MutatorTest, MutatesAndStaysWithinMaxSize) {
  const std::vector<std::string> inputs = Sequence(1, 64);
  for (const std::string& input : inputs) EXPECT_LE(input.size(), 64u);
  EXPECT_GT(std::set<std::string>(inputs.begin(), inputs.end()).size(), 150u);
}

TEST(MutatorTest, GrowsAnEmptyInput) {
  trainer::Prng rng(3);
  std::string input;
  Mutate(input, {}, 16, rng);
  EXPECT_FALSE(input.empty());
}

}  // namespace
}  // namespace baton::fuzz
