#include "coordinator/jobs/job_state.h"

#include <tuple>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

const std::vector<JobState> kAll = {JobState::kQueued,    JobState::kRendezvous,
                                    JobState::kRunning,   JobState::kSucceeded,
                                    JobState::kFailed,    JobState::kCancelled,
                                    JobState::kRestarting};

// The whole transition table, written out: (from, to) pairs that are legal.
const std::vector<std::pair<JobState, JobState>> kLegal = {
    {JobState::kQueued, JobState::kRendezvous},     {JobState::kQueued, JobState::kCancelled},
    {JobState::kRendezvous, JobState::kRunning},    {JobState::kRendezvous, JobState::kQueued},
    {JobState::kRendezvous, JobState::kFailed},     {JobState::kRendezvous, JobState::kCancelled},
    {JobState::kRendezvous, JobState::kRestarting}, {JobState::kRunning, JobState::kSucceeded},
    {JobState::kRunning, JobState::kFailed},        {JobState::kRunning, JobState::kCancelled},
    {JobState::kRunning, JobState::kRestarting},    {JobState::kRestarting, JobState::kRendezvous},
    {JobState::kRestarting, JobState::kFailed},     {JobState::kRestarting, JobState::kQueued},
    {JobState::kRestarting, JobState::kCancelled},
};

TEST(JobState, TransitionTableIsExactlyTheDocumentedOne) {
  int legal_count = 0;
  for (JobState from : kAll) {
    for (JobState to : kAll) {
      const bool expected =
          std::find(kLegal.begin(), kLegal.end(), std::make_pair(from, to)) != kLegal.end();
      const absl::Status s = CheckTransition(from, to);
      EXPECT_EQ(s.ok(), expected) << JobStateName(from) << " -> " << JobStateName(to);
      if (!expected) {
        EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr(std::string(JobStateName(from)))));
      }
      legal_count += s.ok();
    }
  }
  EXPECT_EQ(legal_count, static_cast<int>(kLegal.size()));
}

TEST(JobState, TerminalStatesHaveNoWayOut) {
  for (JobState s : kAll) {
    bool any_out = false;
    for (JobState to : kAll) any_out |= CheckTransition(s, to).ok();
    EXPECT_EQ(IsTerminal(s), !any_out) << JobStateName(s);
  }
}

TEST(JobState, ProtoRoundTrip) {
  for (JobState s : kAll) {
    JobState back;
    ASSERT_OK(JobStateFromProto(JobStateToProto(s), &back));
    EXPECT_EQ(back, s);
  }
  JobState ignored;
  EXPECT_THAT(JobStateFromProto(baton::v1::JOB_STATE_UNSPECIFIED, &ignored),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown job state")));
}

}  // namespace
}  // namespace baton::coordinator
