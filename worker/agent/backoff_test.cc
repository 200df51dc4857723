#include "worker/agent/backoff.h"

#include "gtest/gtest.h"

namespace baton::worker {
namespace {

TEST(BackoffTest, DoublesUpToMaxAndResets) {
  Backoff::Options o;
  o.initial = absl::Milliseconds(100);
  o.max = absl::Seconds(1);
  o.jitter = 0;
  Backoff b(o);
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(400));
  EXPECT_EQ(b.Next(), absl::Milliseconds(800));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterStaysWithinBounds) {
  Backoff::Options o;
  o.initial = absl::Seconds(1);
  o.max = absl::Seconds(1);
  o.jitter = 0.2;
  Backoff b(o);
  bool varied = false;
  absl::Duration first = b.Next();
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = b.Next();
    EXPECT_GE(d, absl::Milliseconds(800));
    EXPECT_LE(d, absl::Seconds(1));
    varied |= d != first;
  }
  EXPECT_TRUE(varied);
}

}  // namespace
}  // namespace baton::worker
