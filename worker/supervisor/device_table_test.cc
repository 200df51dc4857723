#include "worker/supervisor/device_table.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DeviceTableTest, JobsSharingAWorkerGetDisjointDevicesInOrder) {
  DeviceTable table({"0", "1", "2", "3"});
  EXPECT_THAT(table.Acquire("a", 1, 2).value(), ElementsAre("0", "1"));
  EXPECT_THAT(table.Acquire("b", 1, 2).value(), ElementsAre("2", "3"));
  EXPECT_THAT(table.Acquire("c", 1, 1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("needs 1 of this worker's 4 GPUs; 0 are free, the others are "
                                 "held by job(s) a, b")));
  table.Release("a", 1);
  EXPECT_THAT(table.Acquire("c", 1, 1).value(), ElementsAre("0"));
  // The lowest free ones, wherever they are.
  EXPECT_THAT(table.Acquire("d", 1, 1).value(), ElementsAre("1"));
}

TEST(DeviceTableTest, ANewGenerationMayTakeItsOldGenerationsDevices) {
  DeviceTable table({"GPU-a", "GPU-b", "GPU-c"});
  EXPECT_THAT(table.Acquire("job", 1, 2).value(), ElementsAre("GPU-a", "GPU-b"));
  EXPECT_THAT(table.Acquire("other", 1, 1).value(), ElementsAre("GPU-c"));
  // Generation 1 is still exiting: generation 2 gets the same devices.
  EXPECT_THAT(table.Acquire("job", 2, 2).value(), ElementsAre("GPU-a", "GPU-b"));
  table.Release("job", 1);
  // Still held by generation 2.
  EXPECT_THAT(table.Acquire("third", 1, 1),
              StatusIs(absl::StatusCode::kResourceExhausted, ::testing::_));
  table.Release("job", 2);
  EXPECT_THAT(table.Acquire("third", 1, 2).value(), ElementsAre("GPU-a", "GPU-b"));
}

TEST(DeviceTableTest, ATableWithoutDevicesHandsOutNone) {
  DeviceTable table({});
  EXPECT_THAT(table.Acquire("a", 1, 8).value(), ::testing::IsEmpty());
  table.Release("a", 1);
  EXPECT_THAT(table.Acquire("a", 1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("below 1")));
}

TEST(DeviceTableTest, AcquiringAgainReturnsWhatIsHeld) {
  DeviceTable table({"0", "1"});
  EXPECT_THAT(table.Acquire("a", 3, 1).value(), ElementsAre("0"));
  EXPECT_THAT(table.Acquire("a", 3, 1).value(), ElementsAre("0"));
  table.Release("a", 3);
  table.Release("a", 3);  // Nothing held: no-op.
  table.Release("never", 1);
  EXPECT_THAT(table.Acquire("b", 1, 2).value(), ElementsAre("0", "1"));
  EXPECT_THAT(table.Acquire("c", 1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("below 1")));
  EXPECT_THAT(table.Acquire("c", 1, 3),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("job c gen 1 has 3 ranks here but this worker has 2 GPUs")));
}

}  // namespace
}  // namespace baton::worker
