#include "worker/agent/profile_collector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "worker/process/unique_fd.h"
#include "worker/trainer/contract/profile_protocol.h"

namespace baton::worker {
namespace {

// The profile directory, its components below the job's directory opened without
// following a symlink (the rank could have put one there).
absl::StatusOr<UniqueFd> OpenProfileDir(const Supervisor::ProfileDirPath& path) {
  UniqueFd dir(::open(path.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path.root, ": ", std::strerror(errno)));
  }
  for (absl::string_view part : absl::StrSplit(path.below, '/', absl::SkipEmpty())) {
    UniqueFd next(::openat(dir.get(), std::string(part).c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot open ", path.full(), ": ", std::strerror(errno), " (symlinks are not followed)"));
    }
    dir = std::move(next);
  }
  return dir;
}

// The regular file `name` in `dir` (at most `limit` bytes, else FAILED_PRECONDITION);
// NOT_FOUND if it does not exist. Never follows a symlink, never blocks on a FIFO.
absl::StatusOr<std::string> ReadFileAt(int dir, const std::string& name, int64_t limit) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(name);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", name, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(name, " is not a regular file"));
  }
  if (st.st_size > limit) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " has ", st.st_size, " bytes, more than the ", limit, " a trace may have"));
  }
  std::string out;
  char buf[64 << 10];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > limit) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, " has more than the ", limit, " bytes a trace may have"));
    }
  }
  return out;
}

// Replaces `name` in `dir` with a new 0600 file holding `content`: whatever was there (a
// file, a planted symlink) is unlinked, never followed, and the file created exclusively.
absl::Status WriteFileAt(int dir, const std::string& name, const std::string& content) {
  if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove ", name, ": ", std::strerror(errno)));
  }
  UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       kPrivateFileMode));
  if (!fd.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", name, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot write ", name, ": ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

ProfileCollector::ProfileCollector(ProfileCollectorOptions options, Supervisor* supervisor,
                                   Clock* clock, Send send)
    : options_(options), supervisor_(supervisor), clock_(clock), send_(std::move(send)) {}

ProfileCollector::~ProfileCollector() {
  Clock::Timer timer;  // Cancelled without mu_: its callback takes it.
  absl::MutexLock lock(&mu_);
  timer = std::move(timer_);
  armed_ = false;
}

size_t ProfileCollector::watching() const {
  absl::MutexLock lock(&mu_);
  return watches_.size();
}

baton::v1::WorkerMessage ProfileCollector::Answer(const Watch& watch, const std::string& trace,
                                                  const std::string& error) {
  baton::v1::WorkerMessage msg;
  baton::v1::ProfileTrace* t = msg.mutable_profile_trace();
  t->set_job_id(watch.job_id);
  t->set_generation(watch.generation);
  t->set_request_id(watch.request_id);
  t->set_rank(watch.rank);
  if (error.empty()) {
    t->set_trace_json(trace);
  } else {
    t->set_error(error);
  }
  return msg;
}

absl::Status ProfileCollector::Ask(const Watch& watch, int64_t steps, int64_t start_step) {
  ASSIGN_OR_RETURN(const UniqueFd dir, OpenProfileDir(watch.dir));
  for (const std::string& stale : {trainer::ProfileTraceFile(watch.request_id, watch.rank),
                                    trainer::ProfileErrorFile(watch.request_id, watch.rank),
                                    trainer::ProfileUnknownRequestErrorFile(watch.rank)}) {
    if (::unlinkat(dir.get(), stale.c_str(), 0) != 0 && errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot remove ", watch.dir.full(), "/", stale, ": ", std::strerror(errno)));
    }
  }
  trainer::ProfileRequest request;
  request.id = watch.request_id;
  request.steps = steps;
  request.start_step = start_step;
  RETURN_IF_ERROR(
      WriteFileAt(dir.get(), trainer::kProfileRequestFile, trainer::EncodeProfileRequest(request)));
  return supervisor_->SignalProfile(watch.job_id, watch.generation, watch.rank);
}

void ProfileCollector::Start(const baton::v1::ProfileRanks& request) {
  std::vector<baton::v1::WorkerMessage> refused;
  std::vector<Watch> asked;
  absl::Duration timeout = request.has_timeout() ? FromProto(request.timeout()) : absl::Minutes(2);
  const absl::Time deadline = clock_->Now() + timeout;
  for (int32_t rank : request.ranks()) {
    Watch w;
    w.job_id = request.job_id();
    w.generation = request.generation();
    w.request_id = request.request_id();
    w.rank = rank;
    w.deadline = deadline;
    absl::Status s;
    if (!trainer::ValidProfileRequestId(request.request_id())) {
      s = absl::InvalidArgumentError(
          absl::StrCat("request_id '", request.request_id(), "' is not 1-64 of [A-Za-z0-9._-]"));
    } else if (request.steps() < 1 || request.steps() > trainer::kMaxProfileSteps) {
      s = absl::InvalidArgumentError(absl::StrCat("steps: ", request.steps(), " is outside [1, ",
                                                  trainer::kMaxProfileSteps, "]"));
    } else {
      absl::MutexLock lock(&mu_);
      for (const Watch& other : watches_) {
        if (other.request_id == w.request_id && other.rank == rank) {
          s = absl::AlreadyExistsError("duplicate");
        }
      }
      if (s.ok() && watches_.size() + asked.size() >= options_.max_watches) {
        s = absl::ResourceExhaustedError(absl::StrCat("the worker already waits for ",
                                                      watches_.size() + asked.size(),
                                                      " traces, at most ", options_.max_watches));
      }
    }
    if (absl::IsAlreadyExists(s)) continue;  // Being carried out: answered once.
    if (s.ok()) {
      absl::StatusOr<Supervisor::ProfileDirPath> dir =
          supervisor_->ProfileDir(request.job_id(), request.generation(), rank);
      if (dir.ok()) {
        w.dir = *dir;
        s = Ask(w, request.steps(), request.start_step());
      } else {
        s = dir.status();
      }
    }
    if (s.ok()) {
      asked.push_back(std::move(w));
    } else {
      BATON_LOG(WARNING) << "profile " << request.request_id() << " of job " << request.job_id()
                         << " rank " << rank << ": " << s;
      refused.push_back(Answer(w, "", std::string(s.message())));
    }
  }
  {
    Clock::Timer replaced;  // An inert one (armed_ was false), so no wait for a callback.
    absl::MutexLock lock(&mu_);
    for (Watch& w : asked) watches_.push_back(std::move(w));
    if (!armed_ && !watches_.empty()) {
      armed_ = true;
      replaced = std::move(timer_);
      timer_ = clock_->Every(options_.poll_interval, [this] { Poll(); });
    }
  }
  for (baton::v1::WorkerMessage& msg : refused) send_(std::move(msg));
}

bool ProfileCollector::Check(const Watch& watch, baton::v1::ProfileTrace* answer) {
  // The rank's state first: a trace written before it exited is then found below.
  const bool running = supervisor_->ProfileDir(watch.job_id, watch.generation, watch.rank).ok();

  std::string error;
  absl::StatusOr<UniqueFd> dir = OpenProfileDir(watch.dir);
  if (!dir.ok()) {
    error = std::string(dir.status().message());
  } else {
    absl::StatusOr<std::string> trace =
        ReadFileAt(dir->get(), trainer::ProfileTraceFile(watch.request_id, watch.rank),
                   options_.max_trace_bytes);
    if (trace.ok()) {
      *answer = Answer(watch, *trace, "").profile_trace();
      return true;
    }
    if (!absl::IsNotFound(trace.status())) {
      error = std::string(trace.status().message());
    } else {
      for (const std::string& name : {trainer::ProfileErrorFile(watch.request_id, watch.rank),
                                      trainer::ProfileUnknownRequestErrorFile(watch.rank)}) {
        absl::StatusOr<std::string> refused = ReadFileAt(dir->get(), name, 64 << 10);
        if (refused.ok()) {
          error = absl::StrCat("the trainer refused the request: ", *refused);
          while (!error.empty() && error.back() == '\n') error.pop_back();
          break;
        }
      }
    }
  }
  if (error.empty() && !running) {
    error = absl::StrCat("rank ", watch.rank, " stopped running before it wrote its trace");
  }
  if (error.empty() && clock_->Now() >= watch.deadline) {
    error = absl::StrCat("no trace from rank ", watch.rank,
                         " before the timeout (is it still making steps?)");
  }
  if (error.empty()) return false;
  *answer = Answer(watch, "", error).profile_trace();
  return true;
}

void ProfileCollector::Poll() {
  std::vector<Watch> snapshot;
  {
    absl::MutexLock lock(&mu_);
    snapshot = watches_;
  }
  std::vector<baton::v1::WorkerMessage> answers;
  std::vector<std::pair<std::string, int32_t>> done;
  for (const Watch& w : snapshot) {
    baton::v1::WorkerMessage msg;
    if (Check(w, msg.mutable_profile_trace())) {
      answers.push_back(std::move(msg));
      done.emplace_back(w.request_id, w.rank);
    }
  }
  {
    Clock::Timer self;  // This callback's own timer: cancelling it from here returns at once.
    absl::MutexLock lock(&mu_);
    for (const auto& [id, rank] : done) {
      for (auto it = watches_.begin(); it != watches_.end(); ++it) {
        if (it->request_id == id && it->rank == rank) {
          watches_.erase(it);
          break;
        }
      }
    }
    if (watches_.empty() && armed_) {
      armed_ = false;
      self = std::move(timer_);
    }
  }
  for (baton::v1::WorkerMessage& msg : answers) send_(std::move(msg));
}

}  // namespace baton::worker
