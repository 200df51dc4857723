#pragma once

// Pure reads of a job record's ranks, shared by the coordinator's managers.

#include <string>
#include <vector>

#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// A rank exited non-zero or was killed.
bool ExitFailed(const baton::v1::ProcessExit& exit);

// "exited with code 3" / "was killed by signal 9".
std::string DescribeExit(const baton::v1::ProcessExit& exit);

// Distinct workers holding ranks of the job, in rank order. O(ranks).
std::vector<std::string> WorkersOf(const baton::v1::Job& job);

// True if a rank of the job on that worker has not exited (as far as the record knows).
bool HasLiveRanksOn(const baton::v1::Job& job, const std::string& worker_id);

// True if a rank of the job's current generation was assigned to that worker.
bool HasRanksOn(const baton::v1::Job& job, const std::string& worker_id);

}  // namespace baton::coordinator
