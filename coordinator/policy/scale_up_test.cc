#include "coordinator/policy/scale_up.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A trainer job on w1 (workers 1..3, 2 slots each), training, with w2, w3 and w4 free.
ScaleUpFacts Growable() {
  ScaleUpFacts f;
  f.checkpoints_on_request = true;
  f.current = {"w1"};
  f.max_workers = 3;
  f.slots_per_worker = 2;
  f.training = true;
  f.current_ready = true;
  f.free = {{"w2", 2}, {"w3", 4}, {"w4", 2}};
  return f;
}

TEST(DecideScaleUpTest, GrowsUpToMaxWithWorkersThatHaveRoom) {
  EXPECT_THAT(DecideScaleUp(Growable()), ElementsAre("w2", "w3"));
  ScaleUpFacts f = Growable();
  f.free = {{"w1", 2}, {"w2", 1}, {"w4", 2}};  // w1 is the job's own, w2 lacks a slot.
  EXPECT_THAT(DecideScaleUp(f), ElementsAre("w4"));
}

TEST(DecideScaleUpTest, KeepsItsSize) {
  const struct {
    const char* what;
    void (*change)(ScaleUpFacts&);
  } cases[] = {
      {"a program that does not checkpoint on request",
       [](ScaleUpFacts& f) { f.checkpoints_on_request = false; }},
      {"at workers.max", [](ScaleUpFacts& f) { f.current = {"w1", "w5", "w6"}; }},
      {"not training yet", [](ScaleUpFacts& f) { f.training = false; }},
      {"a worker of the job is not READY", [](ScaleUpFacts& f) { f.current_ready = false; }},
      {"no free worker", [](ScaleUpFacts& f) { f.free.clear(); }},
      {"no free worker with enough slots",
       [](ScaleUpFacts& f) { f.free = {{"w2", 1}, {"w3", 0}}; }},
  };
  for (const auto& c : cases) {
    ScaleUpFacts f = Growable();
    c.change(f);
    EXPECT_THAT(DecideScaleUp(f), IsEmpty()) << c.what;
  }
}

}  // namespace
}  // namespace baton::coordinator
