#include "client/render/views.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/render/output.h"
#include "common/spec/job_spec.h"
#include "common/spec/restart_stats.h"
#include "common/time/proto_time.h"

namespace baton::cli {
namespace {

using baton::v1::Job;
using baton::v1::JobEvent;
using baton::v1::JobSpec;

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string WorkerRange(const JobSpec& spec) {
  const int min = spec.workers().min();
  const int max = MaxWorkers(spec);
  return max == min ? absl::StrCat(min) : absl::StrCat(min, "-", max);
}

std::string StepCell(const Job& job) {
  const int64_t max_steps = job.spec().budget().max_steps();
  const bool started = job.result().steps() > 0 || !job.result().final_metrics().empty();
  const std::string step = started ? absl::StrCat(job.result().steps()) : "-";
  return max_steps > 0 ? absl::StrCat(step, "/", max_steps) : step;
}

std::string ExitCell(const baton::v1::RankInfo& rank) {
  if (!rank.has_exit()) return "-";
  if (rank.exit().signal() != 0) return absl::StrCat("signal ", rank.exit().signal());
  return absl::StrCat(rank.exit().exit_code());
}

bool IsFractionMetric(const std::string& key) { return absl::EndsWith(key, "accuracy"); }

std::string MetricValue(const std::string& key, double v) {
  return IsFractionMetric(key) ? FormatPercent(v) : FormatMetric(v);
}

std::string StateChange(const JobEvent& e) {
  if (e.to_state() == baton::v1::JOB_STATE_UNSPECIFIED) return "";
  if (e.from_state() == baton::v1::JOB_STATE_UNSPECIFIED) {
    return absl::StrCat("-> ", JobStateName(e.to_state()));
  }
  return absl::StrCat(JobStateName(e.from_state()), " -> ", JobStateName(e.to_state()));
}

std::string ProgramSummary(const JobSpec& spec) {
  if (spec.has_trainer()) {
    const auto& t = spec.trainer();
    return absl::StrCat("trainer ", OrDash(t.model()), " on ", OrDash(t.dataset()), " (",
                        OrDash(t.data_dir()), "), batch ", t.batch_size(), ", lr ",
                        FormatMetric(t.lr()), ", momentum ", FormatMetric(t.momentum()),
                        ", hidden [", absl::StrJoin(t.hidden(), ", "), "], seed ", t.seed());
  }
  if (spec.has_command()) {
    std::string s = absl::StrCat("command ", absl::StrJoin(spec.command().argv(), " "));
    if (!spec.command().working_dir().empty()) {
      absl::StrAppend(&s, " (in ", spec.command().working_dir(), ")");
    }
    if (spec.command().elastic()) absl::StrAppend(&s, ", elastic");
    return s;
  }
  return "-";
}

std::string BudgetSummary(const baton::v1::Budget& b) {
  std::vector<std::string> parts;
  if (b.max_steps() > 0) parts.push_back(absl::StrCat("max_steps ", b.max_steps()));
  if (b.max_epochs() > 0) parts.push_back(absl::StrCat("max_epochs ", b.max_epochs()));
  return parts.empty() ? "no limit" : absl::StrJoin(parts, ", ");
}

// Result lines, each "  key:<pad>value\n".
std::vector<std::pair<std::string, std::string>> ResultFields(const Job& job) {
  std::vector<std::pair<std::string, std::string>> fields;
  const auto& r = job.result();
  const int64_t max_steps = job.spec().budget().max_steps();
  fields.emplace_back("steps", max_steps > 0 ? absl::StrCat(r.steps(), "/", max_steps)
                                             : absl::StrCat(r.steps()));
  // Well-known metrics first, in a fixed order; then the rest alphabetically.
  const std::vector<std::string> known = {"loss", "accuracy", "eval_accuracy", "eval_loss",
                                          "samples_per_sec"};
  const std::map<std::string, double> metrics(r.final_metrics().begin(),
                                              r.final_metrics().end());
  for (const std::string& key : known) {
    auto it = metrics.find(key);
    if (it == metrics.end()) continue;
    std::string value = MetricValue(key, it->second);
    if (key == "loss" && r.initial_loss() != 0) {
      absl::StrAppend(&value, " (initial ", FormatMetric(r.initial_loss()), ")");
    }
    fields.emplace_back(key, value);
  }
  for (const auto& [key, value] : metrics) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    fields.emplace_back(key, MetricValue(key, value));
  }
  if (r.has_wall_time()) fields.emplace_back("wall time", HumanDuration(FromProto(r.wall_time())));
  return fields;
}

// A copy of `message` fit for a terminal (NeutraliseStrings): every view starts from one.
template <typename M>
M Neutralised(M message) {
  NeutraliseStrings(&message);
  return message;
}

// "key:<pad>value" lines aligned on the widest key. A value with '\n' (only ones composed
// here: job data is neutralised first) continues on the next lines under its first line.
std::string RenderFields(const std::vector<std::pair<std::string, std::string>>& fields,
                         const std::string& indent) {
  size_t width = 0;
  for (const auto& f : fields) width = std::max(width, f.first.size() + 1);
  const std::string continuation = indent + std::string(width + 2, ' ');
  std::string out;
  for (const auto& [key, value] : fields) {
    absl::StrAppend(&out, indent, absl::StrFormat("%-*s  ", width, key + ":"),
                    absl::StrReplaceAll(value, {{"\n", "\n" + continuation}}), "\n");
  }
  return out;
}

std::string FailureClassName(baton::v1::FailureClass c) {
  const FailureClassInfo* info = FindFailureClass(c);
  return info == nullptr ? "-" : info->name;
}

bool IsSet(const google::protobuf::Timestamp& t) { return t.seconds() != 0 || t.nanos() != 0; }

// "0.412s" between two recorded times, "-" if either is missing.
std::string Phase(const google::protobuf::Timestamp& from, const google::protobuf::Timestamp& to) {
  if (!IsSet(from) || !IsSet(to)) return "-";
  return absl::StrFormat("%.3fs", absl::ToDoubleSeconds(FromProto(to) - FromProto(from)));
}

// Restart counts against their budgets (the restarts since the job last made healthy
// progress, and the job's total when more), then one row per failed generation with the
// recovery phases the coordinator measured.
std::string RenderRestarts(const Job& job) {
  const baton::v1::RestartPolicy policy = RestartPolicyWithDefaults(job.spec().restart_policy());
  const baton::v1::RestartStats& r = job.restarts();
  std::vector<std::pair<std::string, std::string>> counts;
  for (const FailureClassInfo& c : kFailureClasses) {
    // Drains and scale-ups use no budget.
    if (c.budget == nullptr) {
      counts.push_back({c.name, absl::StrCat((r.*c.used)())});
      continue;
    }
    std::string count = absl::StrCat((r.*c.recent)(), "/", (policy.*c.budget)());
    if ((r.*c.used)() != (r.*c.recent)()) absl::StrAppend(&count, ", ", (r.*c.used)(), " in all");
    counts.push_back({c.name, std::move(count)});
  }
  std::string out = RenderFields(counts, "  ");
  if (r.failures().empty()) return out;
  // DETECT: the failure happened (Failure.occurred_time) -> the coordinator knew; STOP: ->
  // every process exited; WAIT: -> next rendezvous (backoff); RENDEZVOUS: -> every process
  // of the next generation running; FIRST-STEP: -> its first metric point (checkpoint
  // restore and the first steps); TOTAL: failure (happened, else known) -> first step.
  // REASON: the kind of failure (LeaseExpired: the worker was silent for its lease, a
  // partition or a dead host; WorkerLost: its stream closed; RankFailed; ...).
  Table table({"GEN", "CLASS", "REASON", "RANK", "WORKER", "STEP", "RESUMED", "DETECT", "STOP",
               "WAIT", "RENDEZVOUS", "FIRST-STEP", "TOTAL", "CAUSE"});
  for (const baton::v1::Failure& f : r.failures()) {
    table.AddRow({f.next_generation() > 0 ? absl::StrCat(f.generation(), "->", f.next_generation())
                                          : absl::StrCat(f.generation(), "->x"),
                  FailureClassName(f.failure_class()), OrDash(f.reason()),
                  f.has_rank() ? absl::StrCat(f.rank()) : "-", OrDash(f.worker_id()),
                  f.has_step() ? absl::StrCat(f.step()) : "-",
                  f.has_resumed_step() ? absl::StrCat(f.resumed_step()) : "-",
                  Phase(f.occurred_time(), f.fail_time()),
                  Phase(f.fail_time(), f.stopped_time()),
                  Phase(f.stopped_time(), f.rendezvous_time()),
                  Phase(f.rendezvous_time(), f.running_time()),
                  Phase(f.running_time(), f.first_step_time()),
                  Phase(f.has_occurred_time() ? f.occurred_time() : f.fail_time(),
                        f.first_step_time()),
                  f.cause()});
  }
  absl::StrAppend(&out, table.Render("  "));
  return out;
}

// Whether the job waits in a queue of a shared cluster (a coordinator with a queue file).
bool HasQueue(const Job& job) { return !job.queueing().queue().empty(); }

// The job's resolved priority, with the class it was submitted with: "1000 (high)", "5".
std::string PriorityOf(const Job& job) {
  const std::string value = absl::StrCat(job.queueing().priority());
  const std::string& requested = job.spec().priority();
  int as_number;
  if (requested.empty() || absl::SimpleAtoi(requested, &as_number)) return value;
  return absl::StrCat(value, " (", requested, ")");
}

// `baton describe`'s lines on the job's place in a shared cluster (Job.queueing): its
// queue and priority; while QUEUED its position, why it waits and the jobs that give up
// workers for it; once admitted whether it runs on borrowed quota. "" without a queue.
std::string RenderQueueing(const Job& job) {
  if (!HasQueue(job)) return "";
  const baton::v1::JobQueueing& q = job.queueing();
  std::vector<std::pair<std::string, std::string>> fields = {{"Queue", q.queue()},
                                                             {"Priority", PriorityOf(job)}};
  if (!IsPreemptible(job.spec())) {
    fields.emplace_back("Preemptible", "no");
  }
  if (q.preemptions() > 0) fields.emplace_back("Preemptions", absl::StrCat(q.preemptions()));
  if (job.state() == baton::v1::JOB_STATE_QUEUED) {
    if (q.position() > 0) {
      fields.emplace_back(
          "Position", absl::StrCat(q.position(), " in queue", q.position() == 1 ? " (next)" : ""));
    }
    if (!q.pending_reason().empty()) fields.emplace_back("Waiting", q.pending_reason());
    if (!q.making_room().empty()) {
      fields.emplace_back("Making room", absl::StrJoin(q.making_room(), "\n"));
    }
  } else if (q.borrowing()) {
    fields.emplace_back("Borrowing", "yes (reclaimable)");
  }
  return RenderFields(fields, "");
}

// "1 slot", "8 slots, 2 GPUs" (GPUs only when there are some).
std::string QuantityCell(const baton::v1::QueueQuantity& q) {
  std::string s = absl::StrCat(q.slots(), q.slots() == 1 ? " slot" : " slots");
  if (q.gpus() > 0) absl::StrAppend(&s, ", ", q.gpus(), q.gpus() == 1 ? " GPU" : " GPUs");
  return s;
}

}  // namespace

std::string RenderJobsTable(const baton::v1::ListJobsResponse& raw, absl::Time now,
                            TableStyle style) {
  const baton::v1::ListJobsResponse jobs = Neutralised(raw);
  // QUEUE, PRIO and POS only on a shared cluster: the table is unchanged elsewhere.
  const bool queues =
      std::any_of(jobs.jobs().begin(), jobs.jobs().end(), [](const Job& j) { return HasQueue(j); });
  std::vector<std::string> headers = {"ID", "NAME", "STATE"};
  if (queues) {
    for (const char* h : {"QUEUE", "PRIO", "POS"}) headers.push_back(h);
  }
  for (const char* h : {"WORKERS", "GEN", "STEP", "AGE"}) headers.push_back(h);
  if (style.wide) {
    for (const char* h : {"OWNER", "WORLD", "MASTER", "LOSS", "SAMPLES/S"}) headers.push_back(h);
  }
  Table table(std::move(headers));
  table.PaintColumn(2, [&](const std::string& s) { return ColorState(s, style.color); });
  for (const Job& job : jobs.jobs()) {
    std::set<std::string> workers;
    for (const auto& rank : job.ranks()) workers.insert(rank.worker_id());
    std::vector<std::string> row = {job.id(), OrDash(job.spec().name()), JobStateName(job.state())};
    if (queues) {
      const baton::v1::JobQueueing& q = job.queueing();
      row.push_back(OrDash(q.queue()));
      row.push_back(HasQueue(job) ? absl::StrCat(q.priority()) : "-");
      row.push_back(q.position() > 0 ? absl::StrCat(q.position()) : "-");
    }
    row.push_back(absl::StrCat(workers.size(), "/", WorkerRange(job.spec())));
    row.push_back(absl::StrCat(job.generation()));
    row.push_back(StepCell(job));
    row.push_back(FormatAge(job.create_time(), now));
    if (style.wide) {
      const auto& metrics = job.result().final_metrics();
      auto metric = [&](const std::string& key) {
        auto it = metrics.find(key);
        return it == metrics.end() ? std::string("-") : FormatMetric(it->second);
      };
      row.push_back(OrDash(job.owner()));
      row.push_back(absl::StrCat(job.ranks_size()));
      row.push_back(job.master_addr().empty()
                        ? "-"
                        : absl::StrCat(job.master_addr(), ":", job.master_port()));
      row.push_back(metric("loss"));
      row.push_back(metric("samples_per_sec"));
    }
    table.AddRow(std::move(row));
  }
  return table.Render();
}

// "ok", or why the worker is left out of new gangs and when it is checked again.
std::string WorkerHealth(const baton::v1::Worker& w, absl::Time now) {
  if (w.has_cordon()) {
    const baton::v1::WorkerCordon& c = w.cordon();
    return absl::StrCat("cordoned by ", c.by().empty() ? "-" : c.by(), " ",
                        FormatAge(c.time(), now), " ago",
                        c.reason().empty() ? "" : absl::StrCat(": ", c.reason()));
  }
  if (w.unhealthy_reason().empty()) return "ok";
  return absl::StrCat("unhealthy, re-checked in ",
                      HumanDuration(FromProto(w.unhealthy_until()) - now), ": ",
                      w.unhealthy_reason());
}

std::string RenderWorkersTable(const baton::v1::ListWorkersResponse& raw, absl::Time now,
                               TableStyle style) {
  const baton::v1::ListWorkersResponse workers = Neutralised(raw);
  std::vector<std::string> headers = {"ID",    "HOST",           "SLOTS", "USED",
                                      "STATE", "LAST-HEARTBEAT", "JOBS",  "HEALTH"};
  if (style.wide) {
    headers.push_back("HOSTNAME");
    headers.push_back("LEASE");
  }
  Table table(std::move(headers));
  table.PaintColumn(4, [&](const std::string& s) { return ColorState(s, style.color); });
  for (const auto& w : workers.workers()) {
    const std::string heartbeat = FormatAge(w.last_heartbeat_time(), now);
    std::vector<std::string> row = {w.id(),
                                    OrDash(w.host()),
                                    absl::StrCat(w.resources().slots()),
                                    absl::StrCat(w.used_slots()),
                                    WorkerStateName(w.state()),
                                    heartbeat == "-" ? heartbeat : heartbeat + " ago",
                                    w.job_ids().empty() ? "-" : absl::StrJoin(w.job_ids(), ","),
                                    WorkerHealth(w, now)};
    if (style.wide) {
      row.push_back(OrDash(w.hostname()));
      row.push_back(w.has_lease() ? HumanDuration(FromProto(w.lease())) : "-");
    }
    table.AddRow(std::move(row));
  }
  return table.Render();
}

std::string RenderJobDescription(const Job& raw, absl::Time now, absl::TimeZone tz, bool color) {
  const Job job = Neutralised(raw);
  const JobSpec& spec = job.spec();
  auto when = [&](const google::protobuf::Timestamp& t) {
    const std::string ts = FormatTimestamp(t, tz);
    return ts == "-" ? ts : absl::StrCat(ts, " (", FormatAge(t, now), " ago)");
  };
  std::vector<std::pair<std::string, std::string>> head = {
      {"Job", job.id()},
      {"Name", OrDash(spec.name())},
      {"Owner", OrDash(job.owner())},
      {"State", ColorState(JobStateName(job.state()), color)},
      {"Message", OrDash(job.message())},
      {"Generation", absl::StrCat(job.generation())},
      {"Master",
       job.master_addr().empty() ? "-" : absl::StrCat(job.master_addr(), ":", job.master_port())},
      {"Created", when(job.create_time())},
      {"Started", when(job.start_time())},
      {"Ended", when(job.end_time())},
  };
  std::string out = RenderFields(head, "");
  if (HasQueue(job)) absl::StrAppend(&out, "\n", RenderQueueing(job));

  const int slots = spec.has_slots_per_worker() ? spec.slots_per_worker() : 1;
  std::vector<std::pair<std::string, std::string>> spec_fields = {
      {"program", ProgramSummary(spec)},
      {"workers", absl::StrCat(WorkerRange(spec), " x ", slots, slots == 1 ? " slot" : " slots")},
      {"budget", BudgetSummary(spec.budget())},
  };
  if (!spec.env().empty()) {
    const std::map<std::string, std::string> env(spec.env().begin(), spec.env().end());
    spec_fields.emplace_back("env", absl::StrJoin(env, " ", absl::PairFormatter("=")));
  }
  if (!spec.checkpoint_dir().empty()) spec_fields.emplace_back("checkpoint_dir", spec.checkpoint_dir());
  absl::StrAppend(&out, "\nSpec:\n", RenderFields(spec_fields, "  "));

  absl::StrAppend(&out, "\nRanks:\n");
  if (job.ranks().empty()) {
    absl::StrAppend(&out, "  (none)\n");
  } else {
    Table ranks({"RANK", "WORKER", "LOCAL", "PID", "EXIT"});
    for (const auto& r : job.ranks()) {
      ranks.AddRow({absl::StrCat(r.rank()), r.worker_id(),
                    absl::StrCat(r.local_rank(), "/", r.local_world_size()),
                    r.pid() == 0 ? "-" : absl::StrCat(r.pid()), ExitCell(r)});
    }
    absl::StrAppend(&out, ranks.Render("  "));
  }

  absl::StrAppend(&out, "\nResult:\n");
  if (job.has_result()) {
    absl::StrAppend(&out, RenderFields(ResultFields(job), "  "));
  } else {
    absl::StrAppend(&out, "  (none yet)\n");
  }

  // The same figures as the coordinator's metrics (goodput ratio, job restarts).
  const std::string goodput =
      job.has_start_time() ? absl::StrFormat("%.1f%%", 100 * job.result().goodput()) : "-";
  absl::StrAppend(&out, "\n",
                  RenderFields({{"Goodput", goodput},
                                {"Restarts", absl::StrCat(TotalRestarts(job.restarts()))}},
                               ""),
                  RenderRestarts(job));

  absl::StrAppend(&out, "\nEvents:\n");
  if (job.events().empty()) {
    absl::StrAppend(&out, "  (none)\n");
  } else {
    Table events({"TIME", "GEN", "STATE", "REASON", "MESSAGE"});
    for (const auto& e : job.events()) {
      events.AddRow({FormatTimestamp(e.time(), tz), absl::StrCat(e.generation()),
                     StateChange(e), e.reason(), e.message()});
    }
    absl::StrAppend(&out, events.Render("  "));
  }
  return out;
}

std::string RenderQueues(const baton::v1::ListQueuesResponse& raw, TableStyle style) {
  if (!raw.configured()) {
    return "this coordinator has no queues: it starts jobs first come, first served (start it "
           "with --queue_file)\n";
  }
  const baton::v1::ListQueuesResponse queues = Neutralised(raw);
  std::vector<std::string> headers = {"NAME",     "COHORT",  "QUOTA",    "USED",
                                      "BORROWED", "PENDING", "ADMITTED", "PREEMPTED"};
  if (style.wide) {
    headers.push_back("SHRUNK");
    headers.push_back("USERS");
  }
  Table table(std::move(headers));
  for (const baton::v1::QueueStatus& q : queues.queues()) {
    const bool borrows = q.borrowed().slots() > 0 || q.borrowed().gpus() > 0;
    std::vector<std::string> row = {q.name(),
                                    OrDash(q.cohort()),
                                    QuantityCell(q.nominal()),
                                    QuantityCell(q.used()),
                                    borrows ? QuantityCell(q.borrowed()) : "-",
                                    absl::StrCat(q.pending_jobs()),
                                    absl::StrCat(q.admitted_jobs()),
                                    absl::StrCat(q.preemptions())};
    if (style.wide) {
      row.push_back(absl::StrCat(q.shrinks()));
      std::vector<std::string> users(q.users().begin(), q.users().end());
      for (std::string& u : users) {
        if (u == "*") u = "everyone";
      }
      row.push_back(users.empty() ? "-" : absl::StrJoin(users, ","));
    }
    table.AddRow(std::move(row));
  }
  std::vector<std::string> classes;
  for (const baton::v1::PriorityClass& c : queues.priority_classes()) {
    classes.push_back(absl::StrCat(c.name(), " (", c.value(), ")"));
  }
  return absl::StrCat(
      table.Render(), "\n",
      RenderFields(
          {{"Default queue", queues.default_queue().empty() ? "none (a job must name its queue)"
                                                            : queues.default_queue()},
           {"Priority classes", classes.empty() ? "none (a job's priority is an integer)"
                                                : absl::StrJoin(classes, ", ")}},
          ""));
}

std::string RenderResult(const Job& raw) {
  const Job job = Neutralised(raw);
  std::string out = absl::StrCat("Job ", job.id(), " ", JobStateName(job.state()), "\n");
  absl::StrAppend(&out, RenderFields(ResultFields(job), "  "));
  return out;
}

std::string RenderEventLine(const JobEvent& raw, absl::TimeZone tz) {
  const JobEvent event = Neutralised(raw);
  std::string line = absl::StrCat(
      "[", absl::FormatTime("%H:%M:%S", FromProto(event.time()), tz), "] ");
  const std::string change = StateChange(event);
  if (!change.empty()) absl::StrAppend(&line, change, "  ");
  absl::StrAppend(&line, event.reason());
  if (!event.message().empty()) absl::StrAppend(&line, ": ", event.message());
  return line;
}

}  // namespace baton::cli
