#include "client/command_support.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CommandSupportTest : public ::testing::Test {
 protected:
  CommandSupportTest() {
    ctx_.out = &out_;
    ctx_.err = &err_;
    ctx_.coordinator = "head:7070";
    ctx_.sleep = [this](absl::Duration d) { sleeps_.push_back(d); };
  }

  // Runs RunResumable over `statuses`, one per attempt (each attempt progresses if the
  // matching `progress` entry says so); the status it returns and how many attempts ran.
  grpc::Status Resume(const std::vector<grpc::Status>& statuses, const std::vector<bool>& progress,
                      int* attempts) {
    *attempts = 0;
    return RunResumable(ctx_, [&](bool* progressed) {
      const size_t i = static_cast<size_t>((*attempts)++);
      *progressed = i < progress.size() && progress[i];
      return i < statuses.size() ? statuses[i] : grpc::Status::OK;
    });
  }

  std::ostringstream out_, err_;
  CommandContext ctx_;
  std::vector<absl::Duration> sleeps_;
};

const grpc::Status kUnavailable(grpc::StatusCode::UNAVAILABLE, "Socket closed");

TEST_F(CommandSupportTest, ResumableGivesUpAfterMaxAttemptsWithBackoff) {
  ctx_.retry.max_attempts = 3;
  int attempts = 0;
  const grpc::Status status = Resume(std::vector<grpc::Status>(10, kUnavailable), {}, &attempts);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(attempts, 4);
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2)));
}

TEST_F(CommandSupportTest, ResumableBackoffIsCapped) {
  ctx_.retry.max_backoff = absl::Seconds(1);
  int attempts = 0;
  EXPECT_TRUE(Resume({kUnavailable, kUnavailable, kUnavailable}, {}, &attempts).ok());
  EXPECT_EQ(attempts, 4);
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(1)));
}

TEST_F(CommandSupportTest, ResumableProgressResetsTheCountAndBackoff) {
  ctx_.retry.max_attempts = 1;
  int attempts = 0;
  EXPECT_TRUE(
      Resume({kUnavailable, kUnavailable, kUnavailable}, {true, true, true}, &attempts).ok());
  EXPECT_EQ(attempts, 4);
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(500), absl::Milliseconds(500),
                                   absl::Milliseconds(500)));
}

TEST_F(CommandSupportTest, ResumableStopsAtOtherErrors) {
  int attempts = 0;
  const grpc::Status status =
      Resume({grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job")}, {}, &attempts);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(attempts, 1);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(CommandSupportTest, ReportUnreachable) {
  EXPECT_EQ(ReportError(ctx_, kUnavailable, {"cannot list jobs", "", ""}), kExitUnreachable);
  EXPECT_THAT(err_.str(),
              HasSubstr("baton: cannot reach the coordinator at head:7070 (Socket closed)"));
}

TEST_F(CommandSupportTest, ReportDeadlineNamesWhatAndTheTimeout) {
  ctx_.rpc_timeout = absl::Seconds(10);
  EXPECT_EQ(ReportError(ctx_, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""),
                        {"cannot list jobs", "", ""}),
            kExitUnreachable);
  EXPECT_EQ(err_.str(),
            "baton: the coordinator at head:7070 did not answer within 10s (cannot list jobs)\n");
}

TEST_F(CommandSupportTest, ReportNotFoundNamesTheJobWhenThereIsOne) {
  const grpc::Status not_found(grpc::StatusCode::NOT_FOUND, "job j-1 does not exist");
  EXPECT_EQ(ReportError(ctx_, not_found, {"cannot cancel job j-1", "j-1", ""}), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: job j-1 not found\n");
  err_.str("");
  EXPECT_EQ(ReportError(ctx_, not_found, {"cannot list jobs", "", ""}), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: cannot list jobs: job j-1 does not exist\n");
}

TEST_F(CommandSupportTest, ReportInvalidArgumentNamesTheJobFile) {
  const grpc::Status invalid(grpc::StatusCode::INVALID_ARGUMENT, "workers.min: must be >= 1");
  EXPECT_EQ(ReportError(ctx_, invalid, {"cannot submit a.yaml", "", "a.yaml"}), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: invalid job file a.yaml: workers.min: must be >= 1\n");
}

TEST_F(CommandSupportTest, ReportAuthAndPermission) {
  EXPECT_EQ(ReportError(ctx_, grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad token"),
                        {"cannot list jobs", "", ""}),
            kExitFailure);
  EXPECT_EQ(ReportError(ctx_, grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "not yours"),
                        {"cannot cancel job j-1", "j-1", ""}),
            kExitFailure);
  EXPECT_EQ(err_.str(),
            "baton: the coordinator did not accept your credentials (bad token)\n"
            "baton: not allowed: not yours\n");
}

TEST_F(CommandSupportTest, ReportOnlyTheFirstLineWithoutControls) {
  ReportError(ctx_, grpc::Status(grpc::StatusCode::INTERNAL, "boom\x1b[2J\nsecond line"),
              {"cannot describe job j-1", "j-1", ""});
  EXPECT_EQ(err_.str(), "baton: cannot describe job j-1: " + FirstLine("boom\x1b[2J") + "\n");
  EXPECT_THAT(err_.str(), ::testing::Not(HasSubstr("\x1b")));
  err_.str("");
  ReportError(ctx_, grpc::Status(grpc::StatusCode::INTERNAL, ""), {"cannot list jobs", "", ""});
  EXPECT_EQ(err_.str(), "baton: cannot list jobs: error code 13\n");
}

TEST_F(CommandSupportTest, DocumentFormats) {
  EXPECT_TRUE(IsDocumentFormat(OutputFormat::kJson));
  EXPECT_TRUE(IsDocumentFormat(OutputFormat::kYaml));
  EXPECT_FALSE(IsDocumentFormat(OutputFormat::kTable));
  EXPECT_FALSE(IsDocumentFormat(OutputFormat::kWide));
  EXPECT_FALSE(IsDocumentFormat(OutputFormat::kName));
  baton::v1::Job job;
  job.set_id("j-1");
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(PrintDocument(ctx_, job), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"id\": \"j-1\""));
  out_.str("");
  ctx_.format = OutputFormat::kYaml;
  EXPECT_EQ(PrintDocument(ctx_, job), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("id: j-1"));
}

}  // namespace
}  // namespace baton::cli
