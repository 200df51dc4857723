#include "client/cli.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "common/net/testing/fake_replica.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_THAT(ParseCommandLine({"jobs", "-o", "xml"}),
              StatusIs(kInvalid, "-o/--output must be table, wide, json, yaml or name, not 'xml'"));
  EXPECT_THAT(ParseCommandLine({"logs", "j", "-o", "yaml"}),
              StatusIs(kInvalid, "-o yaml is not supported by 'baton logs' (use table, json)"));
  EXPECT_THAT(ParseCommandLine({"jobs", "--state", "running,Bogus"}),
              StatusIs(kInvalid,
                       "--state: unknown state 'Bogus'; allowed: queued, rendezvous, "
                       "running, restarting, succeeded, failed, cancelled"));
  EXPECT_THAT(ParseCommandLine({"jobs", "--limit", "0"}),
              StatusIs(kInvalid, HasSubstr("--limit must be a number >= 1")));
  EXPECT_THAT(ParseCommandLine({"logs", "j", "--tail", "-3"}),
              StatusIs(kInvalid, HasSubstr("--tail must be in [1, 100000]")));
  EXPECT_THAT(ParseCommandLine({"logs", "j", "--since", "yesterday"}),
              StatusIs(kInvalid, HasSubstr("--since must be a duration such as 10m")));
  EXPECT_THAT(ParseCommandLine({"wait", "j", "--for", "done"}),
              StatusIs(kInvalid,
                       "--for: unknown condition 'done'; allowed: succeeded, failed, "
                       "cancelled, ended, running"));
  EXPECT_THAT(ParseCommandLine({"wait", "j", "--timeout", "0s"}),
              StatusIs(kInvalid, HasSubstr("--timeout must be a duration > 0")));
  EXPECT_THAT(ParseCommandLine({"completion", "fish"}),
              StatusIs(kInvalid, "'baton completion' needs bash or zsh, not 'fish'"));
  EXPECT_THAT(ParseCommandLine({"--color", "sometimes", "jobs"}),
              StatusIs(kInvalid, HasSubstr("--color must be auto, always or never")));
  EXPECT_THAT(ParseCommandLine({"jobs", "-o"}), StatusIs(kInvalid, HasSubstr("needs a value")));
  EXPECT_THAT(ParseCommandLine({"logs", "j", "--rank", "x"}),
              StatusIs(kInvalid, HasSubstr("--rank must be")));
  EXPECT_THAT(ParseCommandLine({"submit", "f", "--set", "novalue"}),
              StatusIs(kInvalid, HasSubstr("--set needs PATH=VALUE")));
  EXPECT_THAT(ParseCommandLine({"submit", "f", "--wait=yes"}),
              StatusIs(kInvalid, "--wait takes no value"));
  EXPECT_THAT(ParseCommandLine({"help", "nope"}), StatusIs(kInvalid, "unknown command 'nope'"));
}

TEST(ParseCommandLineTest, NewFlags) {
  absl::StatusOr<Invocation> inv = ParseCommandLine(
      {"jobs", "--state", "RUNNING,queued", "--state=Queued", "--limit", "5", "-o", "wide"});
  ASSERT_OK(inv);
  EXPECT_THAT(inv->jobs.states,
              ElementsAre(baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_QUEUED));
  EXPECT_EQ(inv->jobs.limit, 5);
  EXPECT_EQ(inv->format, OutputFormat::kWide);

  inv = ParseCommandLine({"logs", "j-1", "--tail", "20", "-f", "--since", "10m", "--timestamps"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->logs.tail, 20);
  EXPECT_TRUE(inv->logs.follow);
  EXPECT_TRUE(inv->logs.timestamps);
  EXPECT_EQ(inv->logs.since_ago, absl::Minutes(10));
  inv = ParseCommandLine({"logs", "j-1", "--since", "2024-05-01T12:00:00Z"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->logs.since_time, absl::FromUnixSeconds(1714564800));

  inv = ParseCommandLine({"wait", "j-1", "--for", "Running", "--timeout", "2h", "-o", "name"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->wait.job_id, "j-1");
  EXPECT_EQ(inv->wait.condition, WaitCondition::kRunning);
  EXPECT_EQ(inv->wait.timeout, absl::Hours(2));  // wait's --timeout has no 1h cap
  inv = ParseCommandLine({"wait", "j-1"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->wait.condition, WaitCondition::kSucceeded);
  EXPECT_EQ(inv->wait.timeout, absl::ZeroDuration());

  inv = ParseCommandLine({"--color=never", "version", "-o", "yaml"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->command, "version");
  EXPECT_EQ(inv->color, ColorMode::kNever);
  inv = ParseCommandLine({"completion", "zsh"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->shell, "zsh");
}

TEST(ParseCommandLineTest, Queues) {
  absl::StatusOr<Invocation> inv = ParseCommandLine({"queues", "-o", "wide"});
  ASSERT_OK(inv);
  EXPECT_EQ(inv->command, "queues");
  EXPECT_EQ(inv->format, OutputFormat::kWide);
  for (const char* format : {"table", "json", "yaml", "name"}) {
    EXPECT_OK(ParseCommandLine({"queues", "-o", format}));
  }
  EXPECT_THAT(ParseCommandLine({"queues", "team-a"}),
              StatusIs(kInvalid, "'baton queues' takes no arguments, got 'team-a'"));
  EXPECT_THAT(ParseCommandLine({"queues", "--state", "queued"}),
              StatusIs(kInvalid, "unknown flag --state for 'baton queues'"));
  EXPECT_THAT(HelpText("queues"),
              ::testing::AllOf(HasSubstr("Usage: baton queues\n"), HasSubstr("--queue_file"),
                               HasSubstr("BORROWED"), HasSubstr("priority classes"),
                               HasSubstr("first come, first")));
  EXPECT_THAT(HelpText(), HasSubstr("  queues      List the cluster's queues"));
}

// The `baton ...` invocations in one shell line of a help text's examples, as argument
// vectors: quotes removed, `$(...)` and `<(...)` opened up, split at && || | ; and with
// leading VAR=value assignments dropped.
std::vector<std::vector<std::string>> BatonInvocations(const std::string& line) {
  std::vector<std::vector<std::string>> segments(1);
  std::string word;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) segments.back().push_back(word);
    word.clear();
    in_word = false;
  };
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word.push_back(c);
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if ((c == '$' || c == '<') && i + 1 < line.size() && line[i + 1] == '(') {
      end_word();  // "JOB=$(baton ...)": the assignment ends, the command starts
      segments.emplace_back();
      ++i;
    } else if (c == ')' || c == ';' || c == '|' || c == '&') {
      end_word();
      segments.emplace_back();
    } else if (c == ' ') {
      end_word();
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  end_word();
  std::vector<std::vector<std::string>> invocations;
  for (const auto& segment : segments) {
    auto baton = std::find(segment.begin(), segment.end(), "baton");
    if (baton == segment.end()) continue;
    invocations.emplace_back(baton + 1, segment.end());
  }
  return invocations;
}

// The lines of `help`'s section `title` ("Examples:"), without their indentation.
std::vector<std::string> Section(const std::string& help, const std::string& title) {
  std::vector<std::string> lines;
  bool in_section = false;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (line == title) {
      in_section = true;
    } else if (in_section && (line.empty() || line[0] != ' ')) {
      break;
    } else if (in_section) {
      lines.emplace_back(absl::StripLeadingAsciiWhitespace(line));
    }
  }
  return lines;
}

TEST(HelpExamplesTest, EveryExampleIsAValidInvocation) {
  std::vector<std::string> commands = {""};
  for (const std::string& line : Section(HelpText(), "Commands:")) {
    commands.push_back(std::string(line.substr(0, line.find(' '))));
  }
  ASSERT_THAT(commands, ::testing::Contains("wait"));
  for (const std::string& command : commands) {
    const std::vector<std::string> examples = Section(HelpText(command), "Examples:");
    EXPECT_EQ(examples, HelpExamples(command)) << command;
    EXPECT_FALSE(examples.empty()) << "'" << command << "' has no examples";
    for (const std::string& example : examples) {
      const std::vector<std::vector<std::string>> invocations = BatonInvocations(example);
      EXPECT_FALSE(invocations.empty()) << example;
      // `baton help help` shows the overview, whose examples run any command.
      bool runs_command = command.empty() || command == "help";
      for (const std::vector<std::string>& args : invocations) {
        absl::StatusOr<Invocation> inv = ParseCommandLine(args);
        EXPECT_OK(inv) << "example of '" << command << "': " << example;
        if (inv.ok() && inv->command == command) runs_command = true;
      }
      EXPECT_TRUE(runs_command) << "example of '" << command << "' does not run it: " << example;
    }
  }
}

TEST(HelpExamplesTest, InvocationsOfAShellLine) {
  EXPECT_THAT(BatonInvocations("JOB=$(baton submit job.yaml) && baton logs \"$JOB\" -f"),
              ElementsAre(ElementsAre("submit", "job.yaml"), ElementsAre("logs", "$JOB", "-f")));
  EXPECT_THAT(BatonInvocations("BATON_COORDINATOR=h:1 baton workers -o json"),
              ElementsAre(ElementsAre("workers", "-o", "json")));
  EXPECT_THAT(BatonInvocations("source <(baton completion bash)"),
              ElementsAre(ElementsAre("completion", "bash")));
}

TEST(UseColorTest, TerminalAndNoColor) {
  CliEnvironment env;
  env.stdout_is_tty = true;
  EXPECT_TRUE(UseColor(ColorMode::kAuto, env));
  EXPECT_FALSE(UseColor(ColorMode::kNever, env));
  env.no_color = "1";
  EXPECT_FALSE(UseColor(ColorMode::kAuto, env));
  // An explicit --color=always overrides $NO_COLOR (https://no-color.org).
  EXPECT_TRUE(UseColor(ColorMode::kAlways, env));
  env.no_color = "";
  env.stdout_is_tty = false;
  EXPECT_FALSE(UseColor(ColorMode::kAuto, env));
  EXPECT_TRUE(UseColor(ColorMode::kAlways, env));
}

TEST(RunCliTest, CompletionNeedsNoCoordinator) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"completion", "bash"}, out, err, {}), kExitOk);
  EXPECT_THAT(out.str(), HasSubstr("complete -F _baton baton\n"));
  EXPECT_EQ(err.str(), "");
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
  for (const char* name : {"submit", "jobs", "describe", "logs", "cancel", "workers", "queues",
                           "--coordinator", "--output", "BATON_COORDINATOR"}) {
    EXPECT_THAT(out.str(), HasSubstr(name));
  }
  for (const char* command :
       {"submit", "jobs", "describe", "logs", "cancel", "workers", "queues"}) {
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

// With several coordinator addresses and none leading, the CLI cannot reach the
// coordinator: exit 4, naming each address's answer.
TEST(RunCliTest, NoLeaderAmongTheCoordinatorsExitsFourListingEachAnswer) {
  FakeReplica a, b;
  a.role().BecomeStandby(std::nullopt);
  b.role().BecomeStandby(std::nullopt);
  CliEnvironment env;
  env.insecure_env = "1";
  env.home = ::testing::TempDir() + "/nohome";  // no config file
  std::ostringstream out, err;
  EXPECT_EQ(
      RunCli({"--coordinator", absl::StrCat(a.address(), ",", b.address()), "jobs"}, out, err, env),
      kExitUnreachable);
  EXPECT_EQ(out.str(), "");
  EXPECT_THAT(err.str(), HasSubstr("baton: no coordinator leads"));
  EXPECT_THAT(err.str(),
              HasSubstr(a.address() + ": NOT_SERVING; " + b.address() + ": NOT_SERVING"));
}

// One address, a standby's: the refusal names the leader and says how to reach it.
TEST(RunCliTest, AStandbysRefusalNamesTheLeaderAndTheFix) {
  FakeReplica a;
  a.role().BecomeStandby("10.0.0.1:7070");
  CliEnvironment env;
  env.insecure_env = "1";
  env.home = ::testing::TempDir() + "/nohome";  // no config file
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"--coordinator", a.address(), "jobs"}, out, err, env), kExitUnreachable);
  EXPECT_THAT(err.str(), HasSubstr("is a standby; the leader is 10.0.0.1:7070. Dial the leader, "
                                   "or give every replica in --coordinator"));
  EXPECT_THAT(err.str(), Not(HasSubstr("is baton-coordinator running")));
}

}  // namespace
}  // namespace baton::cli
