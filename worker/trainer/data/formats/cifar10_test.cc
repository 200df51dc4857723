#include "worker/trainer/data/formats/cifar10.h"

#include <cstdlib>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

Cifar10Records Records(std::initializer_list<uint8_t> labels) {
  Cifar10Records records;
  for (uint8_t label : labels) {
    records.labels.push_back(label);
    records.images.insert(records.images.end(), kCifar10ImageBytes, label);
  }
  return records;
}

TEST(Cifar10Test, AppendsTheRecordsOfAFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/batch.bin";
  ASSERT_OK(WriteCifar10File(path, Records({4, 9})));
  Cifar10Records out = Records({1});
  ASSERT_OK(AppendCifar10File(path, &out));
  EXPECT_EQ(out.labels, Records({1, 4, 9}).labels);
  EXPECT_EQ(out.images, Records({1, 4, 9}).images);
}

// Found by //worker/trainer/data/formats:cifar10_fuzz: the records before a bad label were
// appended before the error was returned.
TEST(Cifar10Test, ABadLabelLeavesTheRecordsUnchanged) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/bad.bin";
  Cifar10Records bad = Records({2, 3});
  bad.labels[1] = 10;
  ASSERT_OK(WriteCifar10File(path, bad));
  Cifar10Records out = Records({1});
  EXPECT_THAT(AppendCifar10File(path, &out), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("record 1 has label 10")));
  EXPECT_EQ(out.labels, Records({1}).labels);
  EXPECT_EQ(out.images, Records({1}).images);
}

}  // namespace
}  // namespace baton::trainer
