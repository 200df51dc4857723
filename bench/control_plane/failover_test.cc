#include "bench/control_plane/failover.h"

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/time/proto_time.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

const absl::Time kKill = absl::FromUnixSeconds(1000);

baton::v1::Job Job(const std::string& id, baton::v1::JobState state, int64_t generation) {
  baton::v1::Job job;
  job.set_id(id);
  job.set_state(state);
  job.set_generation(generation);
  return job;
}

void AddEvent(baton::v1::Job* job, const std::string& reason, absl::Time at) {
  baton::v1::JobEvent* e = job->add_events();
  e->set_reason(reason);
  e->set_generation(job->generation());
  *e->mutable_time() = ToProto(at);
}

TEST(CheckJobsTest, ReattachedInTheSameGenerationSinceTheKill) {
  baton::v1::Job a = Job("j-1", baton::v1::JOB_STATE_RUNNING, 1);
  AddEvent(&a, "Reattached", kKill - absl::Seconds(60));  // an earlier restart's
  AddEvent(&a, "Reattached", kKill + absl::Seconds(2));
  baton::v1::Job b = Job("j-2", baton::v1::JOB_STATE_RUNNING, 3);
  AddEvent(&b, "Reattached", kKill + absl::Seconds(1));
  const FailoverCheck check = CheckJobs({{"j-1", 1}, {"j-2", 3}}, {a, b}, kKill);
  EXPECT_EQ(check.reattached, 2);
  EXPECT_EQ(check.restarted, 0);
  EXPECT_EQ(check.last_reattached, kKill + absl::Seconds(2));
}

TEST(CheckJobsTest, AnotherGenerationOrStateIsARestart) {
  baton::v1::Job next = Job("j-1", baton::v1::JOB_STATE_RUNNING, 2);
  AddEvent(&next, "Reattached", kKill + absl::Seconds(1));
  const baton::v1::Job restarting = Job("j-2", baton::v1::JOB_STATE_RESTARTING, 1);
  const FailoverCheck check = CheckJobs({{"j-1", 1}, {"j-2", 1}}, {next, restarting}, kKill);
  EXPECT_EQ(check.restarted, 2);
  EXPECT_EQ(check.reattached, 0);
}

TEST(CheckJobsTest, NotYetReattachedOrNotOursCountsInNeither) {
  baton::v1::Job waiting = Job("j-1", baton::v1::JOB_STATE_RUNNING, 1);
  AddEvent(&waiting, "Reattached", kKill - absl::Seconds(1));
  const baton::v1::Job other = Job("j-9", baton::v1::JOB_STATE_FAILED, 1);
  const FailoverCheck check = CheckJobs({{"j-1", 1}}, {waiting, other}, kKill);
  EXPECT_EQ(check.restarted, 0);
  EXPECT_EQ(check.reattached, 0);
  EXPECT_EQ(check.last_reattached, absl::InfinitePast());
}

}  // namespace
}  // namespace baton::bench
