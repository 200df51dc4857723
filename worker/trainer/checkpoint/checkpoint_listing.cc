#include "worker/trainer/checkpoint/checkpoint_listing.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint/checkpoint_file.h"

namespace baton::trainer {
namespace {

namespace fs = std::filesystem;

// File names (see the header).
constexpr char kPrefix[] = "ckpt-";
constexpr char kGenerationInfix[] = "-g";
constexpr char kSuffix[] = ".pt";
constexpr char kStartPrefix[] = "gen-";
constexpr char kStartSuffix[] = ".start";
constexpr char kStartFormat[] = "baton-generation-start-v1";

// A non-empty run of decimal digits.
std::optional<int64_t> ParseNumber(absl::string_view digits) {
  int64_t n;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &n)) {
    return std::nullopt;
  }
  return n;
}

// Parses "ckpt-<step>.pt" (generation 0) and "ckpt-<step>-g<generation >= 1>.pt".
std::optional<CheckpointFile> ParseCheckpointName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) {
    return std::nullopt;
  }
  CheckpointFile file;
  if (const size_t g = name.find(kGenerationInfix); g != absl::string_view::npos) {
    const std::optional<int64_t> generation =
        ParseNumber(name.substr(g + std::strlen(kGenerationInfix)));
    if (!generation.has_value() || *generation < 1) return std::nullopt;
    file.generation = *generation;
    name = name.substr(0, g);
  }
  const std::optional<int64_t> step = ParseNumber(name);
  if (!step.has_value()) return std::nullopt;
  file.step = *step;
  return file;
}

// Parses "gen-<generation >= 1>.start".
std::optional<int64_t> ParseStartRecordName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kStartPrefix) || !absl::ConsumeSuffix(&name, kStartSuffix)) {
    return std::nullopt;
  }
  const std::optional<int64_t> generation = ParseNumber(name);
  if (!generation.has_value() || *generation < 1) return std::nullopt;
  return generation;
}

// Parses "<checkpoint or start record name><kTemporaryInfix><pid>".
std::optional<Temporary> ParseTemporaryName(absl::string_view name) {
  const size_t infix = name.rfind(kTemporaryInfix);
  if (infix == absl::string_view::npos) return std::nullopt;
  const std::optional<int64_t> pid = ParseNumber(name.substr(infix + std::strlen(kTemporaryInfix)));
  if (!pid.has_value()) return std::nullopt;
  const absl::string_view target = name.substr(0, infix);
  if (const std::optional<CheckpointFile> file = ParseCheckpointName(target)) {
    return Temporary{file->generation, *pid, ""};
  }
  if (const std::optional<int64_t> generation = ParseStartRecordName(target)) {
    return Temporary{*generation, *pid, ""};
  }
  return std::nullopt;
}

}  // namespace

std::string CheckpointName(int64_t step, int64_t generation) {
  if (generation == 0) return absl::StrFormat("%s%08d%s", kPrefix, step, kSuffix);
  return absl::StrFormat("%s%08d%s%d%s", kPrefix, step, kGenerationInfix, generation, kSuffix);
}

std::string StartRecordName(int64_t generation) {
  return absl::StrFormat("%s%08d%s", kStartPrefix, generation, kStartSuffix);
}

std::string StartRecordText(const std::string& job, int64_t generation, int64_t resumed_step) {
  return absl::StrCat(kStartFormat, "\njob ", job, "\ngeneration ", generation,
                      "\nresumed_step ", resumed_step, "\n");
}

absl::StatusOr<Listing> ListDirectory(const std::string& dir) {
  Listing listing;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return listing;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string path = (fs::path(dir) / name).string();
    if (std::optional<CheckpointFile> file = ParseCheckpointName(name)) {
      file->path = path;
      listing.checkpoints.push_back(std::move(*file));
    } else if (const std::optional<int64_t> generation = ParseStartRecordName(name)) {
      listing.starts.push_back(StartRecord{*generation, 0, "", path});
    } else if (std::optional<Temporary> temporary = ParseTemporaryName(name)) {
      temporary->path = path;
      listing.temporaries.push_back(std::move(*temporary));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  std::sort(listing.checkpoints.begin(), listing.checkpoints.end(),
            [](const CheckpointFile& a, const CheckpointFile& b) {
              return std::tie(a.step, a.generation) < std::tie(b.step, b.generation);
            });
  std::sort(listing.starts.begin(), listing.starts.end(),
            [](const StartRecord& a, const StartRecord& b) { return a.generation < b.generation; });
  return listing;
}

absl::Status ReadStartRecords(std::vector<StartRecord>& starts) {
  std::vector<StartRecord> read;
  for (StartRecord& start : starts) {
    absl::StatusOr<std::vector<char>> bytes = ReadFileBytes(start.path);
    if (absl::IsNotFound(bytes.status())) continue;
    if (!bytes.ok()) return bytes.status();
    const std::vector<absl::string_view> lines =
        absl::StrSplit(absl::string_view(bytes->data(), bytes->size()), '\n');
    absl::string_view job = lines.size() == 5 ? lines[1] : "";
    absl::string_view step = lines.size() == 5 ? lines[3] : "";
    const std::optional<int64_t> resumed_step =
        absl::ConsumePrefix(&step, "resumed_step ") ? ParseNumber(step) : std::nullopt;
    if (lines.size() != 5 || lines[0] != kStartFormat || !absl::ConsumePrefix(&job, "job ") ||
        lines[2] != absl::StrCat("generation ", start.generation) || !resumed_step.has_value() ||
        !lines[4].empty()) {
      return absl::DataLossError(absl::StrCat(
          "malformed start record ", start.path, ": want the four lines \"", kStartFormat,
          "\", \"job <job id>\", \"generation ", start.generation, "\", \"resumed_step <step>\""));
    }
    start.job = std::string(job);
    start.resumed_step = *resumed_step;
    read.push_back(std::move(start));
  }
  starts = std::move(read);
  return absl::OkStatus();
}

absl::StatusOr<Listing> ListWithRecords(const std::string& dir) {
  ASSIGN_OR_RETURN(Listing listing, ListDirectory(dir));
  RETURN_IF_ERROR(ReadStartRecords(listing.starts));
  return listing;
}

const StartRecord* StaleBy(const CheckpointFile& file, const std::vector<StartRecord>& starts) {
  for (const StartRecord& start : starts) {
    if (start.generation > file.generation && start.resumed_step < file.step) return &start;
  }
  return nullptr;
}

std::string StaleReason(const StartRecord& by) {
  return absl::StrCat("stale: generation ", by.generation, " started from step ", by.resumed_step);
}

const StartRecord* SupersededBy(const std::vector<StartRecord>& starts, const std::string& job,
                                int64_t generation, bool same_job_only) {
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    if (it->job == job ? it->generation > generation : !same_job_only) return &*it;
  }
  return nullptr;
}

absl::Status Superseded(int64_t generation, const StartRecord& newer, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "generation ", generation, " is superseded by generation ", newer.generation,
      newer.job.empty() ? std::string() : absl::StrCat(" of job ", newer.job), " (", newer.path,
      " exists): ", what));
}

}  // namespace baton::trainer
