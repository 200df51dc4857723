#pragma once

// The queue file of a shared cluster (issue 31): the queues, their quotas and cohorts,
// who may submit to each, and the named priority classes. The coordinator reads it at
// start and again on SIGHUP; a file that does not parse or validate leaves the previous
// set in force (as the token file does). Example (docs/ARCHITECTURE.md, "Sharing a
// cluster"):
//
//   default_queue: team-a
//   priority_classes:
//     - {name: low, value: 0}
//     - {name: high, value: 1000}
//   queues:
//     - name: team-a
//       cohort: research
//       quota: {slots: 64, gpus: 16}
//       users: [alice, bob]
//     - name: team-b
//       cohort: research
//       quota: {slots: 64}
//       users: ["*"]          # everyone
//       max_priority: low     # its jobs' priority at most (a class or an integer)
//
// Rules: queue, cohort and class names are 1-63 characters of [a-z0-9-] starting with a
// letter; queue names are unique; quotas are whole numbers 0..1e9 (gpus default 0);
// users lists 1..1000 user names (the token file's) or "*"; priority values are integers
// in [-1e9, 1e9], names and values unique; max_priority (optional; none: no limit) is a
// class of the file or such an integer; default_queue, if set, names a queue; at most
// 1000 queues and 100 classes. Unknown keys are errors. Errors name the file, the line and
// column, the field path, what is wrong and what is allowed.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/policy/admission.h"

namespace baton::coordinator {

struct QueueSet {
  std::vector<QueueConfig> queues;  // in file order
  // Per queue, who may submit to it; "*" is everyone.
  std::map<std::string, std::vector<std::string>> users;
  std::string default_queue;  // "" if none
  std::map<std::string, int> priority_classes;
  // Per queue that sets one, the highest priority its jobs may have. A job's priority
  // orders it before others of its queue (and preempts their jobs) and before other
  // queues' jobs for idle room: without a limit any user of the queue may take the top.
  std::map<std::string, int> max_priority;
};

// Parses a queue file's text; `name` (the path) prefixes error messages. INVALID_ARGUMENT
// naming "<name>:<line>:<col>: <field>: <what is wrong>; <what is allowed>".
absl::StatusOr<QueueSet> ParseQueueFile(const std::string& text, const std::string& name);
// Reads and parses `path` (at most 1 MiB): NOT_FOUND / PERMISSION_DENIED / FAILED_PRECONDITION
// for a file that cannot be read, else as ParseQueueFile.
absl::StatusOr<QueueSet> ReadQueueFile(const std::string& path);

// The queue a job submitted with `requested` ("" for the default) by `user` waits in:
// NOT_FOUND naming the queues when it is not one, INVALID_ARGUMENT when empty and there is
// no default, PERMISSION_DENIED when the user may not submit to it; messages begin with
// "queue: ", as the submit's answer names the field.
absl::StatusOr<std::string> QueueFor(const QueueSet& set, const std::string& requested,
                                     const std::string& user);

// A priority as a job gives it: a class name of the file, or an integer in [-1e9, 1e9];
// "" is 0. INVALID_ARGUMENT naming the classes otherwise ("priority: ...").
absl::StatusOr<int> ResolvePriority(const QueueSet& set, const std::string& priority);
// As ResolvePriority, for a job of `queue`: PERMISSION_DENIED ("priority: ...") above the
// queue's max_priority.
absl::StatusOr<int> PriorityIn(const QueueSet& set, const std::string& queue,
                               const std::string& priority);

}  // namespace baton::coordinator
