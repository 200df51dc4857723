#include "coordinator/queues/queue_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kExample[] = R"(default_queue: team-a
priority_classes:
  - {name: low, value: 0}
  - {name: high, value: 1000}
queues:
  - name: team-a
    cohort: research
    quota: {slots: 64, gpus: 16}
    users: [alice, bob]
  - name: team-b
    cohort: research
    quota: {slots: 32}
    users: ["*"]
)";

TEST(QueueFileTest, ParsesTheExample) {
  absl::StatusOr<QueueSet> set = ParseQueueFile(kExample, "queues.yaml");
  ASSERT_OK(set);
  ASSERT_EQ(set->queues.size(), 2u);
  EXPECT_EQ(set->queues[0].name, "team-a");
  EXPECT_EQ(set->queues[0].cohort, "research");
  EXPECT_EQ(set->queues[0].nominal, (Quantity{64, 16}));
  EXPECT_EQ(set->queues[1].nominal, (Quantity{32, 0}));
  EXPECT_THAT(set->users.at("team-a"), ElementsAre("alice", "bob"));
  EXPECT_EQ(set->default_queue, "team-a");
  EXPECT_EQ(set->priority_classes.at("high"), 1000);
}

TEST(QueueFileTest, ErrorsNameThePlaceTheFieldAndWhatIsAllowed) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"", "q.yaml: queues: required: the file is empty"},
      {"queues: []\n", "q.yaml:1:9: queues: required: a list of 1..1000 queues"},
      {"queue: []\n",
       "q.yaml:1:1: queue: unknown key; allowed: default_queue, priority_classes, "
       "queues"},
      {"queues:\n  - {name: Team, quota: {slots: 1}, users: [a]}\n",
       "q.yaml:2:12: queues[0].name: 'Team' is invalid; 1-63 characters of [a-z0-9-], starting "
       "with a letter"},
      {"queues:\n  - {name: a, quota: {slots: -4}, users: [a]}\n",
       "q.yaml:2:30: queues[0].quota.slots: '-4' is invalid; a whole number in 0..1000000000"},
      {"queues:\n  - {name: a, quota: {cpus: 4}, users: [a]}\n",
       "queues[0].quota.cpus: unknown key; allowed: gpus, slots"},
      {"queues:\n  - {name: a, quota: {slots: 4}}\n",
       "queues[0].users: required: a list of 1..1000 user names (the token file's), or [\"*\"] "
       "for everyone"},
      {"queues:\n  - {name: a, quota: {slots: 4}, users: [x]}\n  - {name: a, quota: {slots: 1}, "
       "users: [x]}\n",
       "q.yaml:3:12: queues[1].name: 'a' is defined twice"},
      {"default_queue: b\nqueues:\n  - {name: a, quota: {slots: 4}, users: [x]}\n",
       "q.yaml:1:16: default_queue: 'b' is not one of the queues"},
      {"priority_classes:\n  - {name: x, value: 1}\n  - {name: y, value: 1}\nqueues:\n  - "
       "{name: a, quota: {slots: 4}, users: [x]}\n",
       "q.yaml:3:22: priority_classes[1].value: 1 is another class's value; values must be "
       "unique"},
      {"queues: [", "q.yaml:1:"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(ParseQueueFile(c.text, "q.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)))
        << c.text;
  }
}

TEST(QueueFileTest, QueueForChecksTheQueueAndTheUser) {
  const QueueSet set = *ParseQueueFile(kExample, "queues.yaml");
  EXPECT_EQ(*QueueFor(set, "", "alice"), "team-a");
  EXPECT_EQ(*QueueFor(set, "team-b", "mallory"), "team-b");
  EXPECT_THAT(QueueFor(set, "team-a", "mallory"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "queue: user 'mallory' may not submit to queue team-a"));
  EXPECT_THAT(QueueFor(set, "team-z", "alice"),
              StatusIs(absl::StatusCode::kNotFound,
                       "queue: 'team-z' is not a queue; the queues are team-a, team-b"));
  QueueSet no_default = set;
  no_default.default_queue.clear();
  EXPECT_THAT(QueueFor(no_default, "", "alice"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no default queue")));
}

TEST(QueueFileTest, PrioritiesAreClassesOrIntegers) {
  const QueueSet set = *ParseQueueFile(kExample, "queues.yaml");
  EXPECT_EQ(*ResolvePriority(set, ""), 0);
  EXPECT_EQ(*ResolvePriority(set, "high"), 1000);
  EXPECT_EQ(*ResolvePriority(set, "-5"), -5);
  EXPECT_THAT(ResolvePriority(set, "urgent"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "priority: 'urgent' is neither a class (high, low) nor an integer in "
                       "-1000000000..1000000000"));
}

TEST(QueueFileTest, AQueueMayCapItsJobsPriority) {
  const std::string text = absl::StrCat(kExample, "    max_priority: low\n");
  absl::StatusOr<QueueSet> set = ParseQueueFile(text, "queues.yaml");
  ASSERT_OK(set);
  EXPECT_EQ(set->max_priority.at("team-b"), 0);
  EXPECT_EQ(set->max_priority.count("team-a"), 0u);  // no limit
  EXPECT_EQ(*PriorityIn(*set, "team-b", "low"), 0);
  EXPECT_EQ(*PriorityIn(*set, "team-b", "-3"), -3);
  EXPECT_EQ(*PriorityIn(*set, "team-a", "1000000000"), 1000000000);
  // What a user of team-b who read the source would try, to jump its queue and preempt
  // its teammates' jobs.
  for (const char* p : {"high", "1", "1000000000"}) {
    EXPECT_THAT(PriorityIn(*set, "team-b", p),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("is above queue team-b's max_priority (0)")))
        << p;
  }
  EXPECT_THAT(PriorityIn(*set, "team-b", "2000000000"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-1000000000..")));
  EXPECT_THAT(ParseQueueFile(absl::StrCat(kExample, "    max_priority: urgent\n"), "q.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("q.yaml:14:19: queues[1].max_priority: 'urgent' is invalid; a "
                                 "priority class (high, low) or an integer in")));
}

TEST(QueueFileTest, ReadsAFileAndRefusesOneTooLarge) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  std::ofstream(dir + "/queues.yaml") << kExample;
  EXPECT_OK(ReadQueueFile(dir + "/queues.yaml"));
  EXPECT_THAT(ReadQueueFile(dir + "/missing.yaml"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cannot read")));
  std::ofstream(dir + "/big.yaml") << std::string((1 << 20) + 1, '#');
  EXPECT_THAT(ReadQueueFile(dir + "/big.yaml"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("larger than 1 MiB")));
}

}  // namespace
}  // namespace baton::coordinator
