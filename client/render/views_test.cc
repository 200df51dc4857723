#include "client/render/views.h"

#include <string>

#include "absl/time/time.h"
#include "client/render/output.h"
#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1714564800);  // 2024-05-01 12:00:00 UTC

TEST(TableTest, AlignsColumnsAndPadsShortRows) {
  Table t({"ID", "NAME", "STATE"});
  t.AddRow({"j-000001", "a", "RUNNING"});
  t.AddRow({"j-2", "longer-name"});
  EXPECT_EQ(t.Render(),
            "ID         NAME          STATE\n"
            "j-000001   a             RUNNING\n"
            "j-2        longer-name\n");
  EXPECT_EQ(Table({"A"}).Render("  "), "  A\n");
}

TEST(FormatTest, Durations) {
  EXPECT_EQ(HumanDuration(absl::Milliseconds(800)), "0.8s");
  EXPECT_EQ(HumanDuration(absl::Seconds(45)), "45s");
  EXPECT_EQ(HumanDuration(absl::Seconds(185)), "3m05s");
  EXPECT_EQ(HumanDuration(absl::Minutes(62)), "1h02m");
  EXPECT_EQ(HumanDuration(absl::Hours(51)), "2d03h");
  EXPECT_EQ(HumanDuration(-absl::Seconds(3)), "0.0s");
}

TEST(FormatTest, AgesAndTimes) {
  EXPECT_EQ(FormatAge(ToProto(kNow - absl::Seconds(45)), kNow), "45s");
  EXPECT_EQ(FormatAge(ToProto(kNow - absl::Minutes(12)), kNow), "12m");
  EXPECT_EQ(FormatAge(ToProto(kNow - absl::Hours(5)), kNow), "5h");
  EXPECT_EQ(FormatAge(ToProto(kNow - absl::Hours(24 * 3)), kNow), "3d");
  EXPECT_EQ(FormatAge(google::protobuf::Timestamp(), kNow), "-");
  EXPECT_EQ(FormatTimestamp(ToProto(kNow), absl::UTCTimeZone()), "2024-05-01 12:00:00");
  EXPECT_EQ(FormatMetric(0.34121), "0.3412");
  EXPECT_EQ(FormatMetric(1234.6), "1235");
  EXPECT_EQ(FormatPercent(0.9781), "97.8%");
  EXPECT_EQ(JobStateName(baton::v1::JOB_STATE_RESTARTING), "RESTARTING");
}

baton::v1::Job RunningJob() {
  baton::v1::Job job;
  job.set_id("j-000007");
  job.mutable_spec()->set_name("mnist-mlp");
  job.mutable_spec()->mutable_workers()->set_min(2);
  job.mutable_spec()->mutable_workers()->set_max(4);
  job.mutable_spec()->mutable_budget()->set_max_steps(5000);
  job.mutable_spec()->mutable_trainer()->set_model("mlp");
  job.set_state(baton::v1::JOB_STATE_RUNNING);
  job.set_generation(2);
  *job.mutable_create_time() = ToProto(kNow - absl::Minutes(5));
  for (int r = 0; r < 3; ++r) {
    auto* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(r < 2 ? "w-a" : "w-b");
    rank->set_local_rank(r % 2);
    rank->set_local_world_size(2);
    rank->set_pid(100 + r);
  }
  job.mutable_ranks(2)->mutable_exit()->set_exit_code(-1);
  job.mutable_ranks(2)->mutable_exit()->set_signal(9);
  job.mutable_result()->set_steps(1200);
  (*job.mutable_result()->mutable_final_metrics())["loss"] = 0.25;
  (*job.mutable_result()->mutable_final_metrics())["accuracy"] = 0.9;
  return job;
}

TEST(ViewsTest, JobsTable) {
  baton::v1::ListJobsResponse jobs;
  *jobs.add_jobs() = RunningJob();
  auto* queued = jobs.add_jobs();
  queued->set_id("j-000008");
  queued->mutable_spec()->set_name("cmd");
  queued->mutable_spec()->mutable_workers()->set_min(1);
  queued->set_state(baton::v1::JOB_STATE_QUEUED);
  *queued->mutable_create_time() = ToProto(kNow - absl::Seconds(3));
  EXPECT_EQ(RenderJobsTable(jobs, kNow),
            "ID         NAME        STATE     WORKERS   GEN   STEP        AGE\n"
            "j-000007   mnist-mlp   RUNNING   2/2-4     2     1200/5000   5m\n"
            "j-000008   cmd         QUEUED    0/1       0     -           3s\n");
}

TEST(ViewsTest, JobsTableShowsQueuesOnlyWhenAJobHasOne) {
  baton::v1::ListJobsResponse jobs;
  *jobs.add_jobs() = RunningJob();
  const std::string without = RenderJobsTable(jobs, kNow);
  EXPECT_THAT(without, ::testing::Not(HasSubstr("QUEUE")));
  auto* queued = jobs.add_jobs();
  queued->set_id("j-000008");
  queued->mutable_spec()->mutable_workers()->set_min(1);
  queued->set_state(baton::v1::JOB_STATE_QUEUED);
  queued->mutable_queueing()->set_queue("team-a");
  queued->mutable_queueing()->set_priority(-3);
  queued->mutable_queueing()->set_position(12);
  *queued->mutable_create_time() = ToProto(kNow - absl::Seconds(3));
  EXPECT_EQ(
      RenderJobsTable(jobs, kNow),
      "ID         NAME        STATE     QUEUE    PRIO   POS   WORKERS   GEN   STEP        AGE\n"
      "j-000007   mnist-mlp   RUNNING   -        -      -     2/2-4     2     1200/5000   5m\n"
      "j-000008   -           QUEUED    team-a   -3     12    0/1       0     -           3s\n");
  // The state column is still the coloured one.
  EXPECT_THAT(RenderJobsTable(jobs, kNow, {false, true}),
              HasSubstr("\x1b[34mQUEUED\x1b[0m    team-a"));
}

TEST(ViewsTest, DescribeShowsTheQueueOfAnAdmittedJob) {
  baton::v1::Job job = RunningJob();
  const std::string without = RenderJobDescription(job, kNow, absl::UTCTimeZone());
  EXPECT_THAT(without, ::testing::Not(HasSubstr("Queue:")));
  job.mutable_spec()->set_priority("7");
  job.mutable_spec()->set_preemptible(false);
  job.mutable_queueing()->set_queue("team-a");
  job.mutable_queueing()->set_priority(7);
  job.mutable_queueing()->set_preemptions(2);
  job.mutable_queueing()->set_borrowing(true);
  // Left over from when it waited: not shown once admitted.
  job.mutable_queueing()->set_pending_reason("stale");
  job.mutable_queueing()->add_making_room("stale");
  const std::string text = RenderJobDescription(job, kNow, absl::UTCTimeZone());
  EXPECT_THAT(text, HasSubstr("Ended:       -\n"
                              "\n"
                              "Queue:        team-a\n"
                              "Priority:     7\n"
                              "Preemptible:  no\n"
                              "Preemptions:  2\n"
                              "Borrowing:    yes (reclaimable)\n"
                              "\n"
                              "Spec:\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("stale")));
  // The rest is as without a queue.
  EXPECT_EQ(text.substr(text.find("\nSpec:\n")), without.substr(without.find("\nSpec:\n")));
}

TEST(ViewsTest, DescribeShowsWhyAQueuedJobWaits) {
  baton::v1::Job job = RunningJob();
  job.set_state(baton::v1::JOB_STATE_QUEUED);
  job.mutable_spec()->set_priority("high");
  job.mutable_queueing()->set_queue("team-b");
  job.mutable_queueing()->set_priority(1000);
  job.mutable_queueing()->set_position(1);
  job.mutable_queueing()->set_borrowing(true);  // not while it waits
  job.mutable_queueing()->set_pending_reason("needs 4 slots (2 workers x 2)");
  job.mutable_queueing()->add_making_room("j-000004 (shrinks from 4 to 2 workers)");
  job.mutable_queueing()->add_making_room("j-000007 (preempted: reclaim)");
  EXPECT_THAT(RenderJobDescription(job, kNow, absl::UTCTimeZone()),
              HasSubstr("\nQueue:        team-b\n"
                        "Priority:     1000 (high)\n"
                        "Position:     1 in queue (next)\n"
                        "Waiting:      needs 4 slots (2 workers x 2)\n"
                        "Making room:  j-000004 (shrinks from 4 to 2 workers)\n"
                        "              j-000007 (preempted: reclaim)\n"
                        "\nSpec:\n"));
}

TEST(ViewsTest, QueuesTable) {
  baton::v1::ListQueuesResponse queues;
  EXPECT_EQ(RenderQueues(queues),
            "this coordinator has no queues: it starts jobs first come, first served (start it "
            "with --queue_file)\n");
  queues.set_configured(true);
  auto* a = queues.add_queues();
  a->set_name("a");
  a->mutable_nominal()->set_slots(1);
  a->mutable_used()->set_slots(1);
  a->add_users("*");
  auto* gpu = queues.add_queues();
  gpu->set_name("gpu");
  gpu->set_cohort("c");
  gpu->mutable_nominal()->set_slots(4);
  gpu->mutable_nominal()->set_gpus(1);
  gpu->mutable_used()->set_slots(6);
  gpu->mutable_used()->set_gpus(2);
  gpu->mutable_borrowed()->set_slots(2);
  gpu->mutable_borrowed()->set_gpus(1);
  gpu->set_preemptions(3);
  gpu->set_shrinks(4);
  gpu->add_users("alice");
  gpu->add_users("bob");
  EXPECT_EQ(RenderQueues(queues),
            "NAME   COHORT   QUOTA            USED              BORROWED         PENDING   "
            "ADMITTED   PREEMPTED\n"
            "a      -        1 slot           1 slot            -                0         "
            "0          0\n"
            "gpu    c        4 slots, 1 GPU   6 slots, 2 GPUs   2 slots, 1 GPU   0         "
            "0          3\n"
            "\n"
            "Default queue:     none (a job must name its queue)\n"
            "Priority classes:  none (a job's priority is an integer)\n");
  EXPECT_THAT(RenderQueues(queues, {/*wide=*/true, /*color=*/false}),
              HasSubstr("PREEMPTED   SHRUNK   USERS\n"));
  EXPECT_THAT(RenderQueues(queues, {/*wide=*/true, /*color=*/false}),
              HasSubstr("0           0        everyone\n"));
  EXPECT_THAT(RenderQueues(queues, {/*wide=*/true, /*color=*/false}),
              HasSubstr("3           4        alice,bob\n"));
}

// Job data comes from other users and their ranks: what a hostile one puts in a name, a
// command line, a message, an event or a metric name must not reach the terminal as
// control characters, in any human view.
TEST(ViewsTest, EveryViewNeutralisesControlCharactersInJobData) {
  const std::string evil = "x\x1b]0;pwned\x07\x1b[2J\rok\xc2\x9b";
  baton::v1::Job job = RunningJob();
  job.mutable_spec()->set_name(evil);
  job.set_message(evil);
  job.set_owner(evil);
  job.mutable_spec()->clear_trainer();
  job.mutable_spec()->mutable_command()->add_argv(evil);
  (*job.mutable_spec()->mutable_env())[evil] = evil;
  (*job.mutable_result()->mutable_final_metrics())[evil] = 1.0;
  job.mutable_ranks(0)->set_worker_id(evil);
  auto* e = job.add_events();
  *e->mutable_time() = ToProto(kNow);
  e->set_reason(evil);
  e->set_message(evil);
  baton::v1::ListJobsResponse jobs;
  *jobs.add_jobs() = job;
  baton::v1::ListWorkersResponse workers;
  workers.add_workers()->set_id(evil);
  workers.mutable_workers(0)->add_job_ids(evil);
  job.set_state(baton::v1::JOB_STATE_QUEUED);
  job.mutable_spec()->set_priority(evil);
  job.mutable_queueing()->set_queue(evil);
  job.mutable_queueing()->set_pending_reason(evil);
  job.mutable_queueing()->add_making_room(evil);
  *jobs.add_jobs() = job;
  baton::v1::ListQueuesResponse queues;
  queues.set_configured(true);
  queues.set_default_queue(evil);
  queues.add_queues()->set_name(evil);
  queues.mutable_queues(0)->set_cohort(evil);
  queues.mutable_queues(0)->add_users(evil);
  queues.add_priority_classes()->set_name(evil);
  for (const std::string& out :
       {RenderJobsTable(jobs, kNow, {/*wide=*/true, /*color=*/false}),
        RenderQueues(queues, {/*wide=*/true, /*color=*/false}),
        RenderJobDescription(job, kNow, absl::UTCTimeZone()), RenderResult(job),
        RenderEventLine(*e, absl::UTCTimeZone()),
        RenderWorkersTable(workers, kNow, {/*wide=*/true, /*color=*/false})}) {
    for (char c : out) {
      const unsigned char u = static_cast<unsigned char>(c);
      EXPECT_TRUE(u == '\n' || u == '\t' || (u >= 0x20 && u != 0x7f)) << "byte " << int{u} << " in:\n" << out;
    }
    EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr("\xc2\x9b")));
  }
  EXPECT_THAT(RenderResult(job), ::testing::HasSubstr("x^[]0;pwned^G^[[2J^Mok<U+009B>"));
}

TEST(ViewsTest, WorkersTable) {
  baton::v1::ListWorkersResponse workers;
  auto* w = workers.add_workers();
  w->set_id("w-a");
  w->set_host("10.0.0.5");
  w->mutable_resources()->set_slots(8);
  w->set_used_slots(2);
  w->set_state(baton::v1::WORKER_STATE_READY);
  *w->mutable_last_heartbeat_time() = ToProto(kNow - absl::Seconds(2));
  w->add_job_ids("j-1");
  w->add_job_ids("j-2");
  auto* lost = workers.add_workers();
  lost->set_id("w-b");
  lost->set_state(baton::v1::WORKER_STATE_LOST);
  auto* slow = workers.add_workers();
  slow->set_id("w-c");
  slow->set_state(baton::v1::WORKER_STATE_READY);
  slow->set_unhealthy_reason("pre-flight of job j-3: slow");
  *slow->mutable_unhealthy_until() = ToProto(kNow + absl::Minutes(9));
  EXPECT_EQ(RenderWorkersTable(workers, kNow),
            "ID    HOST       SLOTS   USED   STATE   LAST-HEARTBEAT   JOBS      HEALTH\n"
            "w-a   10.0.0.5   8       2      READY   2s ago           j-1,j-2   ok\n"
            "w-b   -          0       0      LOST    -                -         ok\n"
            "w-c   -          0       0      READY   -                -         unhealthy, "
            "re-checked in 9m00s: pre-flight of job j-3: slow\n");
}

TEST(ViewsTest, Describe) {
  baton::v1::Job job = RunningJob();
  job.set_master_addr("10.0.0.5");
  job.set_master_port(29500);
  job.set_message("training");
  job.set_owner("alice");
  auto* e = job.add_events();
  *e->mutable_time() = ToProto(kNow - absl::Minutes(5));
  e->set_to_state(baton::v1::JOB_STATE_QUEUED);
  e->set_reason("Submitted");
  e->set_message("queued");
  const std::string text = RenderJobDescription(job, kNow, absl::UTCTimeZone());
  EXPECT_THAT(text, HasSubstr("Job:         j-000007\n"));
  EXPECT_THAT(text, HasSubstr("Owner:       alice\n"));
  EXPECT_THAT(text, HasSubstr("Master:      10.0.0.5:29500\n"));
  EXPECT_THAT(text, HasSubstr("Created:     2024-05-01 11:55:00 (5m ago)\n"));
  EXPECT_THAT(text, HasSubstr("  workers:  2-4 x 1 slot\n"));
  EXPECT_THAT(text, HasSubstr("  RANK   WORKER   LOCAL   PID   EXIT\n"
                              "  0      w-a      0/2     100   -\n"));
  EXPECT_THAT(text, HasSubstr("  2      w-b      0/2     102   signal 9\n"));
  EXPECT_THAT(text, HasSubstr("  steps:     1200/5000\n"));
  EXPECT_THAT(text, HasSubstr("  accuracy:  90.0%\n"));
  EXPECT_THAT(text, HasSubstr("  2024-05-01 11:55:00   0     -> QUEUED   Submitted   queued\n"));
  // Not started: no goodput yet.
  EXPECT_THAT(text, HasSubstr("\nGoodput:   -\nRestarts:  0\n  infra:    0/10\n  user:     0/3\n"
                              "  stall:    0/3\n  planned:  0\n"));
}

TEST(ViewsTest, DescribeShowsACommandAndWhetherItIsElastic) {
  baton::v1::Job job = RunningJob();
  baton::v1::CommandSpec* command = job.mutable_spec()->mutable_command();
  command->add_argv("/usr/bin/python3");
  command->add_argv("train.py");
  command->set_working_dir("/srv/code");
  EXPECT_THAT(RenderJobDescription(job, kNow, absl::UTCTimeZone()),
              HasSubstr("command /usr/bin/python3 train.py (in /srv/code)\n"));
  command->set_elastic(true);
  EXPECT_THAT(RenderJobDescription(job, kNow, absl::UTCTimeZone()),
              HasSubstr("command /usr/bin/python3 train.py (in /srv/code), elastic\n"));
}

TEST(ViewsTest, DescribeShowsGoodputAndTotalRestartsOfAllClasses) {
  baton::v1::Job job = RunningJob();
  *job.mutable_start_time() = ToProto(kNow - absl::Minutes(4));
  job.mutable_result()->set_goodput(0.41666);
  job.mutable_restarts()->set_infra(2);
  job.mutable_restarts()->set_recent_infra(2);
  job.mutable_restarts()->set_user(7);  // healthy progress since 6 of them: 1 counts now
  job.mutable_restarts()->set_recent_user(1);
  job.mutable_restarts()->set_stall(1);
  job.mutable_restarts()->set_recent_stall(1);
  job.mutable_restarts()->set_planned(2);
  const std::string text = RenderJobDescription(job, kNow, absl::UTCTimeZone());
  EXPECT_THAT(text, HasSubstr("\nGoodput:   41.7%\nRestarts:  10\n  infra:    2/10\n"
                              "  user:     1/3, 7 in all\n  stall:    1/3\n  planned:  2\n"));
}

TEST(ViewsTest, DescribeShowsFailuresWithPhaseTimes) {
  baton::v1::Job job = RunningJob();
  job.mutable_spec()->mutable_restart_policy()->set_max_user_restarts(5);
  job.mutable_restarts()->set_user(1);
  job.mutable_restarts()->set_recent_user(1);
  baton::v1::Failure* f = job.mutable_restarts()->add_failures();
  f->set_generation(1);
  f->set_next_generation(2);
  f->set_failure_class(baton::v1::FAILURE_CLASS_USER);
  f->set_rank(1);
  f->set_worker_id("w-b");
  f->set_step(120);
  f->set_resumed_step(101);
  f->set_reason("RankFailed");
  f->set_cause("rank 1 on worker w-b was killed by signal 9");
  const absl::Time t = kNow - absl::Minutes(1);
  *f->mutable_occurred_time() = ToProto(t - absl::Milliseconds(30));
  *f->mutable_fail_time() = ToProto(t);
  *f->mutable_stopped_time() = ToProto(t + absl::Milliseconds(40));
  *f->mutable_rendezvous_time() = ToProto(t + absl::Milliseconds(500));
  *f->mutable_running_time() = ToProto(t + absl::Milliseconds(520));
  *f->mutable_first_step_time() = ToProto(t + absl::Milliseconds(900));
  baton::v1::Failure* fatal = job.mutable_restarts()->add_failures();
  fatal->set_generation(2);
  fatal->set_failure_class(baton::v1::FAILURE_CLASS_INFRA);
  fatal->set_reason("LeaseExpired");
  fatal->set_cause("worker w-a lost");
  const std::string text = RenderJobDescription(job, kNow, absl::UTCTimeZone());
  EXPECT_THAT(text, HasSubstr("  user:     1/5\n"));
  EXPECT_THAT(text, HasSubstr(
      "  GEN    CLASS   REASON         RANK   WORKER   STEP   RESUMED   DETECT   STOP     "
      "WAIT     RENDEZVOUS   FIRST-STEP   TOTAL    CAUSE\n"
      "  1->2   user    RankFailed     1      w-b      120    101       0.030s   0.040s   "
      "0.460s   0.020s       0.380s       0.930s   rank 1 on worker w-b was killed by signal 9\n"
      "  2->x   infra   LeaseExpired   -      -        -      -         -        -        "
      "-        -            -            -        worker w-a lost\n"));
}

TEST(ViewsTest, ResultAndEventLine) {
  baton::v1::Job job = RunningJob();
  job.set_state(baton::v1::JOB_STATE_SUCCEEDED);
  job.mutable_result()->set_steps(5000);
  job.mutable_result()->set_initial_loss(2.3026);
  (*job.mutable_result()->mutable_final_metrics())["eval_accuracy"] = 0.971;
  (*job.mutable_result()->mutable_final_metrics())["epoch"] = 3;
  *job.mutable_result()->mutable_wall_time() = ToProto(absl::Seconds(133));
  EXPECT_EQ(RenderResult(job),
            "Job j-000007 SUCCEEDED\n"
            "  steps:          5000/5000\n"
            "  loss:           0.25 (initial 2.303)\n"
            "  accuracy:       90.0%\n"
            "  eval_accuracy:  97.1%\n"
            "  epoch:          3\n"
            "  wall time:      2m13s\n");

  baton::v1::JobEvent event;
  *event.mutable_time() = ToProto(kNow);
  event.set_from_state(baton::v1::JOB_STATE_RUNNING);
  event.set_to_state(baton::v1::JOB_STATE_RESTARTING);
  event.set_reason("WorkerLost");
  event.set_message("w-b stopped heartbeating");
  EXPECT_EQ(RenderEventLine(event, absl::UTCTimeZone()),
            "[12:00:00] RUNNING -> RESTARTING  WorkerLost: w-b stopped heartbeating");
  event.clear_from_state();
  event.clear_to_state();
  event.set_reason("CheckpointSaved");
  event.clear_message();
  EXPECT_EQ(RenderEventLine(event, absl::UTCTimeZone()), "[12:00:00] CheckpointSaved");
}

TEST(JsonTest, ProtobufJson) {
  baton::v1::ListJobsResponse jobs;
  jobs.add_jobs()->set_id("j-1");
  absl::StatusOr<std::string> json = ToJson(jobs, /*multiline=*/false);
  ASSERT_TRUE(json.ok());
  // snake_case names, zero values kept.
  EXPECT_EQ(*json,
            R"({"jobs":[{"id":"j-1","state":"JOB_STATE_UNSPECIFIED","generation":"0","ranks":[],)"
            R"("message":"","events":[],"master_addr":"","master_port":0,"request_id":"",)"
            R"("owner":""}],"next_page_token":""})");
}

TEST(YamlTest, SameDocumentAsJson) {
  baton::v1::Job job;
  job.set_id("j-000007");
  job.set_generation(2);
  job.set_message("true");
  (*job.mutable_spec()->mutable_env())["A"] = "x: y";
  auto* rank = job.add_ranks();
  rank->mutable_exit()->set_exit_code(0);
  absl::StatusOr<std::string> yaml = ToYaml(job);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_THAT(*yaml, HasSubstr("id: j-000007\n"));
  EXPECT_THAT(*yaml, HasSubstr("generation: \"2\"\n"));  // int64 is a JSON string
  EXPECT_THAT(*yaml, HasSubstr("message: \"true\"\n"));
  EXPECT_THAT(*yaml, HasSubstr("A: \"x: y\"\n"));
  EXPECT_THAT(*yaml, HasSubstr("exit_code: 0\n"));
  EXPECT_THAT(*yaml, HasSubstr("events: []\n"));
}

TEST(ColorTest, StatesColouredOnlyWhenAsked) {
  EXPECT_EQ(ColorState("SUCCEEDED", false), "SUCCEEDED");
  EXPECT_EQ(ColorState("SUCCEEDED", true), "\x1b[32mSUCCEEDED\x1b[0m");
  EXPECT_EQ(ColorState("FAILED", true), "\x1b[31mFAILED\x1b[0m");
  EXPECT_EQ(ColorState("-", true), "-");
  // Column widths ignore the escapes.
  baton::v1::ListJobsResponse jobs;
  auto* job = jobs.add_jobs();
  job->set_id("j-1");
  job->set_state(baton::v1::JOB_STATE_FAILED);
  const std::string plain = RenderJobsTable(jobs, absl::UnixEpoch());
  const std::string coloured = RenderJobsTable(jobs, absl::UnixEpoch(), {false, true});
  EXPECT_EQ(coloured.size(), plain.size() + 9);
  EXPECT_THAT(coloured, HasSubstr("\x1b[31mFAILED\x1b[0m   0/"));
}

}  // namespace
}  // namespace baton::cli
