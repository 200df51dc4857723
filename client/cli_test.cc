#include "client/cli.h"

#include <sstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(ParseCommandLineTest, FlagsBeforeAndAfterPositionals) {
  absl::StatusOr<Invocation> inv = ParseCommandLine(
      {"--coordinator", "head:7070", "submit", "--set", "workers.min=1", "job.yaml",
       "--set=trainer.hidden=[64,32]", "-w", "-o", "json"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->command, "submit");
  EXPECT_EQ(inv->coordinator, "head:7070");
  EXPECT_EQ(inv->format, OutputFormat::kJson);
  EXPECT_EQ(inv->submit.file, "job.yaml");
  EXPECT_TRUE(inv->submit.wait);
  EXPECT_THAT(inv->submit.overrides, ElementsAre("workers.min=1", "trainer.hidden=[64,32]"));

  inv = ParseCommandLine({"logs", "-f", "j-1", "--rank=2", "--output=table"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->logs.job_id, "j-1");
  EXPECT_EQ(inv->logs.rank, 2);
  EXPECT_TRUE(inv->logs.follow);
  EXPECT_EQ(inv->format, OutputFormat::kTable);

  inv = ParseCommandLine({"logs", "j-1"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->logs.rank, -1);
  EXPECT_FALSE(inv->logs.follow);

  inv = ParseCommandLine({"describe", "--", "-odd-id"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->job_id, "-odd-id");
}

TEST(ParseCommandLineTest, Profile) {
  absl::StatusOr<Invocation> inv = ParseCommandLine(
      {"profile", "j-1", "--steps", "20", "--rank=1", "--out", "t.json", "--timeout", "30s"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->command, "profile");
  EXPECT_EQ(inv->profile.job_id, "j-1");
  EXPECT_EQ(inv->profile.steps, 20);
  EXPECT_EQ(inv->profile.rank, 1);
  EXPECT_EQ(inv->profile.out, "t.json");
  EXPECT_EQ(inv->profile.timeout, absl::Seconds(30));

  inv = ParseCommandLine({"profile", "j-1"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->profile.steps, 5);
  EXPECT_EQ(inv->profile.rank, -1);
  EXPECT_EQ(inv->profile.out, "");
  EXPECT_EQ(inv->profile.timeout, absl::ZeroDuration());  // The coordinator's default.

  EXPECT_THAT(ParseCommandLine({"profile", "j-1", "--steps", "0"}).status(),
              StatusIs(kInvalid, HasSubstr("--steps must be in [1, 1000], not '0'")));
  EXPECT_THAT(ParseCommandLine({"profile", "j-1", "--steps=1001"}).status(),
              StatusIs(kInvalid, HasSubstr("--steps must be in [1, 1000]")));
  EXPECT_THAT(ParseCommandLine({"profile", "j-1", "--rank", "-1"}).status(),
              StatusIs(kInvalid, HasSubstr("--rank")));
  EXPECT_THAT(ParseCommandLine({"profile", "j-1", "--timeout", "2h"}).status(),
              StatusIs(kInvalid, HasSubstr("--timeout must be a duration in (0, 1h]")));
  EXPECT_THAT(ParseCommandLine({"profile"}).status(), StatusIs(kInvalid, HasSubstr("needs JOB")));
  EXPECT_THAT(
      HelpText("profile"),
      ::testing::AllOf(HasSubstr("Usage: baton profile JOB [FLAGS]"), HasSubstr("--steps N"),
                       HasSubstr("chrome://tracing"), HasSubstr("built-in trainer")));
}

TEST(ParseCommandLineTest, Help) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"help", "submit"}, {"submit", "--help"}, {"-h", "submit"}}) {
    absl::StatusOr<Invocation> inv = ParseCommandLine(args);
    ASSERT_OK(inv);
    EXPECT_EQ(inv->command, "help");
    EXPECT_EQ(inv->help_topic, "submit");
  }
  absl::StatusOr<Invocation> inv = ParseCommandLine({"--help"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->help_topic, "");
}

TEST(ParseCommandLineTest, UsageErrors) {
  EXPECT_THAT(ParseCommandLine({}), StatusIs(kInvalid, "missing command"));
  EXPECT_THAT(ParseCommandLine({"frobnicate"}),
              StatusIs(kInvalid, "unknown command 'frobnicate'"));
  EXPECT_THAT(ParseCommandLine({"jobs", "--wiat"}),
              StatusIs(kInvalid, "unknown flag --wiat for 'baton jobs'"));
  EXPECT_THAT(ParseCommandLine({"jobs", "--wait"}),
              StatusIs(kInvalid, HasSubstr("unknown flag --wait")));  // submit's flag
  EXPECT_THAT(ParseCommandLine({"--wait", "submit", "x.yaml"}),
              StatusIs(kInvalid, "unknown flag --wait for 'baton'"));
  EXPECT_THAT(ParseCommandLine({"submit"}), StatusIs(kInvalid, "'baton submit' needs FILE"));
  EXPECT_THAT(ParseCommandLine({"describe", "a", "b"}),
              StatusIs(kInvalid, HasSubstr("needs JOB (exactly one)")));
  EXPECT_THAT(ParseCommandLine({"jobs", "extra"}),
              StatusIs(kInvalid, HasSubstr("takes no arguments")));
  EXPECT_THAT(ParseCommandLine({"jobs", "-o", "yaml"}),
              StatusIs(kInvalid, HasSubstr("must be 'table' or 'json'")));
  EXPECT_THAT(ParseCommandLine({"jobs", "-o"}), StatusIs(kInvalid, HasSubstr("needs a value")));
  EXPECT_THAT(ParseCommandLine({"logs", "j", "--rank", "x"}),
              StatusIs(kInvalid, HasSubstr("--rank must be")));
  EXPECT_THAT(ParseCommandLine({"submit", "f", "--set", "novalue"}),
              StatusIs(kInvalid, HasSubstr("--set needs PATH=VALUE")));
  EXPECT_THAT(ParseCommandLine({"submit", "f", "--wait=yes"}),
              StatusIs(kInvalid, "--wait takes no value"));
  EXPECT_THAT(ParseCommandLine({"help", "nope"}), StatusIs(kInvalid, "unknown command 'nope'"));
}

TEST(RunCliTest, UsageErrorExitsTwoWithHint) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"jobs", "--bogus"}, out, err, {}), kExitUsage);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(), "baton: unknown flag --bogus for 'baton jobs'\nRun 'baton help' for usage.\n");
}

TEST(RunCliTest, HelpExplainsEveryCommandAndFlag) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"--help"}, out, err, {}), kExitOk);
  for (const char* name : {"submit", "jobs", "describe", "logs", "cancel", "workers",
                           "--coordinator", "--output", "BATON_COORDINATOR"}) {
    EXPECT_THAT(out.str(), HasSubstr(name));
  }
  for (const char* command : {"submit", "jobs", "describe", "logs", "cancel", "workers"}) {
    std::ostringstream cmd_out;
    EXPECT_EQ(RunCli({"help", command}, cmd_out, err, {}), kExitOk);
    EXPECT_THAT(cmd_out.str(), HasSubstr(std::string("Usage: baton ") + command));
    EXPECT_THAT(cmd_out.str(), HasSubstr("Examples:"));
  }
  std::ostringstream submit_help;
  RunCli({"submit", "--help"}, submit_help, err, {});
  EXPECT_THAT(submit_help.str(), HasSubstr("--set PATH=VALUE"));
  EXPECT_THAT(submit_help.str(), HasSubstr("-w, --wait"));
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace baton::cli
