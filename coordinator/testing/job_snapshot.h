#pragma once

#include <map>
#include <string>

#include "baton/v1/job.pb.h"
#include "coordinator/jobs/job_manager.h"

namespace baton::coordinator {

// Every job `jobs` holds as written (without staged changes: JobManager::Stage), by id:
// what tests compare between memory and a JobManager reloaded from the same store.
inline std::map<std::string, baton::v1::Job> SnapshotJobs(const JobManager& jobs) {
  std::map<std::string, baton::v1::Job> out;
  for (const baton::v1::Job& listed : jobs.List({}, 0))
    out[listed.id()] = *jobs.PeekWritten(listed.id());
  return out;
}

}  // namespace baton::coordinator
