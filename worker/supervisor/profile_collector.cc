#include "worker/supervisor/profile_collector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"

namespace baton::worker {
namespace {

// As the trainer's profiler accepts them (worker/trainer/profile/profiler.h).
constexpr int64_t kMaxTrainerSteps = 10000;
constexpr char kRequestFile[] = "profile-request";

bool ValidRequestId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// The file's content (at most `limit` bytes, else FAILED_PRECONDITION); NOT_FOUND if it
// does not exist. Never follows a symlink.
absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t limit) {
  const int fd = OpenPrivate(path, O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size > limit) {
    const int64_t size = st.st_size;
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has ", size, " bytes, more than the ", limit, " a trace may have"));
  }
  std::string out;
  char buf[64 << 10];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > limit) break;
  }
  ::close(fd);
  if (static_cast<int64_t>(out.size()) > limit) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has more than the ", limit, " bytes a trace may have"));
  }
  return out;
}

absl::Status WriteRequest(const std::string& path, const std::string& content) {
  absl::StatusOr<int> fd = CreateExclusive(path);
  if (!fd.ok()) return fd.status();
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(*fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(*fd);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(*fd);
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
  const std::string prefix = absl::StrCat(watch.dir, "/trace-");
  for (const std::string& stale :
       {absl::StrCat(prefix, watch.request_id, "-rank", watch.rank, ".json"),
        absl::StrCat(prefix, watch.request_id, "-rank", watch.rank, ".error"),
        absl::StrCat(prefix, "unknown-rank", watch.rank, ".error")}) {
    if (::unlink(stale.c_str()) != 0 && errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot remove ", stale, ": ", std::strerror(errno)));
    }
  }
  RETURN_IF_ERROR(WriteRequest(
      absl::StrCat(watch.dir, "/", kRequestFile),
      absl::StrCat("id=", watch.request_id, " steps=", steps,
                   start_step > 0 ? absl::StrCat(" start_step=", start_step) : std::string(),
                   "\n")));
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
    if (!ValidRequestId(request.request_id())) {
      s = absl::InvalidArgumentError(
          absl::StrCat("request_id '", request.request_id(), "' is not 1-64 of [A-Za-z0-9._-]"));
    } else if (request.steps() < 1 || request.steps() > kMaxTrainerSteps) {
      s = absl::InvalidArgumentError(
          absl::StrCat("steps: ", request.steps(), " is outside [1, ", kMaxTrainerSteps, "]"));
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
      absl::StatusOr<std::string> dir =
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
  const std::string base =
      absl::StrCat(watch.dir, "/trace-", watch.request_id, "-rank", watch.rank);
  std::string error;
  absl::StatusOr<std::string> trace = ReadFile(base + ".json", options_.max_trace_bytes);
  if (trace.ok()) {
    *answer = Answer(watch, *trace, "").profile_trace();
    return true;
  }
  if (!absl::IsNotFound(trace.status())) {
    error = std::string(trace.status().message());
  } else {
    for (const std::string& path :
         {base + ".error", absl::StrCat(watch.dir, "/trace-unknown-rank", watch.rank, ".error")}) {
      absl::StatusOr<std::string> refused = ReadFile(path, 64 << 10);
      if (refused.ok()) {
        error = absl::StrCat("the trainer refused the request: ", *refused);
        while (!error.empty() && error.back() == '\n') error.pop_back();
        break;
      }
    }
  }
  if (error.empty() && !running) {
    error = absl::StrCat("rank ", watch.rank, " stopped running before it wrote its trace");
  }
  if (error.empty() && clock_->Now() >= watch.deadline) {
    error = absl::StrCat("no trace from rank ", watch.rank,
                         " before the timeout (is it still "
                         "making steps?)");
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
