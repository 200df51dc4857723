#include "coordinator/server/services.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc_status.h"
#include "common/protocol_version.h"
#include "common/security/tls.h"
#include "common/spec/message_limits.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "common/version.h"
#include "coordinator/auth/peer_identity.h"
#include "coordinator/server/write_queue.h"

namespace baton::coordinator {
namespace {

constexpr int kDefaultPageSize = 500;
constexpr int kMaxPageSize = 1000;
constexpr char kPageTokenPrefix[] = "p1.";

// One ListJobs page: its size, where it starts, and how many of `limit` are left after the
// previous pages (0: no limit).
struct ListPage {
  int size = kDefaultPageSize;
  std::string before_id;
  int left = 0;
};

std::string MakeListPageToken(const std::string& last_id, int left) {
  return absl::StrCat(kPageTokenPrefix,
                      absl::WebSafeBase64Escape(absl::StrCat(last_id, "\n", left)));
}

absl::StatusOr<ListPage> ParseListPage(const baton::v1::ListJobsRequest& req) {
  if (req.limit() < 0) return absl::InvalidArgumentError("limit: must be >= 0");
  if (req.page_size() < 0) return absl::InvalidArgumentError("page_size: must be >= 0");
  ListPage page;
  page.left = req.limit();
  if (!req.page_token().empty()) {
    std::string decoded;
    std::vector<std::string> parts;
    if (absl::StartsWith(req.page_token(), kPageTokenPrefix) &&
        absl::WebSafeBase64Unescape(req.page_token().substr(3), &decoded)) {
      parts = absl::StrSplit(decoded, '\n');
    }
    if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &page.left) ||
        page.left < 0) {
      return absl::InvalidArgumentError(
          "page_token: not a token from ListJobs; pass next_page_token unchanged");
    }
    page.before_id = parts[0];
  }
  if (req.page_size() > 0) page.size = std::min(req.page_size(), kMaxPageSize);
  if (page.left > 0) page.size = std::min(page.size, page.left);
  return page;
}

// Runs `fn` (returning absl::Status) on the loop and finishes the unary call with it.
template <typename Fn>
grpc::ServerUnaryReactor* OnLoop(EventLoop* loop, grpc::CallbackServerContext* ctx, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  loop->Post([reactor, fn = std::move(fn)]() mutable { reactor->Finish(ToGrpcStatus(fn())); });
  return reactor;
}

// The authenticated caller of a JobService/ClusterService call.
absl::StatusOr<Principal> Caller(const CallerChecks& checks, grpc::CallbackServerContext* ctx) {
  return checks.auth->Authenticate(ctx->client_metadata());
}

// The most lines a GetLogs `tail` may ask for.
constexpr int32_t kMaxLogTail = 100000;

absl::StatusOr<LogQuery> ToLogQuery(const baton::v1::GetLogsRequest& req) {
  if (req.tail() < 0 || req.tail() > kMaxLogTail) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tail: ", req.tail(), " is out of range; allowed: 0 (all lines) to ", kMaxLogTail));
  }
  if (req.has_since() &&
      (req.since().seconds() < 0 || req.since().nanos() < 0 || req.since().nanos() > 999'999'999)) {
    return absl::InvalidArgumentError(
        absl::StrCat("since: ", req.since().ShortDebugString(),
                     " is not a valid time; allowed: a timestamp after 1970"));
  }
  LogQuery query;
  query.rank = req.rank();
  query.after_seq = req.after_seq();
  query.follow = req.follow();
  query.tail = req.tail();
  query.since_us = absl::ToUnixMicros(FromProto(req.since()));
  return query;
}

// Finishes a unary call at once with `status` (a caller refused before any work).
grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A watch stream as one caller may see it: snapshots with env values hidden (AccessPolicy).
class RedactingSink final : public StreamSink<baton::v1::JobUpdate> {
 public:
  RedactingSink(std::shared_ptr<StreamSink<baton::v1::JobUpdate>> sink,
                const AccessPolicy* policy, Principal caller)
      : sink_(std::move(sink)), policy_(policy), caller_(std::move(caller)) {}

  bool Push(const baton::v1::JobUpdate& update) override {
    if (!update.has_snapshot() || policy_->CanSeeEnv(caller_, update.snapshot())) {
      return sink_->Push(update);
    }
    baton::v1::JobUpdate redacted = update;
    policy_->Redact(caller_, redacted.mutable_snapshot());
    return sink_->Push(redacted);
  }
  void Finish(const absl::Status& status) override { sink_->Finish(status); }
  bool Backlogged() const override { return sink_->Backlogged(); }

 private:
  const std::shared_ptr<StreamSink<baton::v1::JobUpdate>> sink_;
  const AccessPolicy* const policy_;
  const Principal caller_;
};

// A server stream whose messages come from the loop through a WriteQueue. `start` runs
// on the loop with the queue as sink; an error from it finishes the call.
// The stream counts towards its caller's open streams (UserStreams) from construction to
// OnDone, and ends when the caller's token is revoked; a caller refused (no valid token,
// too many streams) gets the error at once and `start` never runs.
template <typename Msg>
class StreamReactor final : public grpc::ServerWriteReactor<Msg> {
 public:
  using Queue = WriteQueue<Msg, grpc::ServerWriteReactor<Msg>>;

  template <typename Start>
  StreamReactor(EventLoop* loop, UserStreams* streams, const absl::StatusOr<Principal>& caller,
                Start start)
      : queue_(std::make_shared<Queue>(this)), streams_(streams) {
    absl::StatusOr<uint64_t> id =
        caller.ok() ? streams->Open(*caller,
                                    [weak = std::weak_ptr<Queue>(queue_)](const absl::Status& s) {
                                      if (std::shared_ptr<Queue> q = weak.lock()) q->Finish(s);
                                    })
                    : absl::StatusOr<uint64_t>(caller.status());
    if (!id.ok()) {
      queue_->Finish(id.status());
      return;
    }
    id_ = *id;
    loop->Post([queue = queue_, start = std::move(start), caller = *caller]() mutable {
      absl::Status s = start(queue, caller);
      if (!s.ok()) queue->Finish(s);
    });
  }

  void OnWriteDone(bool ok) override { queue_->OnWriteDone(ok); }
  void OnCancel() override {
    queue_->FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override {
    if (id_ != 0) streams_->Close(id_);
    queue_->OnDone();
    delete this;
  }

 private:
  std::shared_ptr<Queue> queue_;
  UserStreams* const streams_;
  uint64_t id_ = 0;  // Its UserStreams id; 0 if refused.
};

using WorkerReactor =
    grpc::ServerBidiReactor<baton::v1::WorkerMessage, baton::v1::CoordinatorMessage>;
using WorkerQueue = WriteQueue<baton::v1::CoordinatorMessage, WorkerReactor>;

// WorkerChannel over a stream's WriteQueue.
class QueueChannel final : public WorkerChannel {
 public:
  explicit QueueChannel(std::shared_ptr<WorkerQueue> queue) : queue_(std::move(queue)) {}
  bool Send(const baton::v1::CoordinatorMessage& msg) override { return queue_->Push(msg); }
  void Close(const absl::Status& status) override { queue_->Finish(status); }

 private:
  std::shared_ptr<WorkerQueue> queue_;
};

// One worker's Connect stream. Reads are handed to the loop in order; the session
// established by the first message (Register) lives in `session_` and is only touched
// on the loop.
//
// Backpressure: the next read is started at once only while the loop has few closures
// queued (kReadAheadTasks); otherwise it is started by a closure that runs when the loop
// reaches it, so a worker that sends faster than the loop serves waits in TCP, and the
// loop's queue stays bounded by the number of streams.
class WorkerStream final : public WorkerReactor {
 public:
  static constexpr size_t kReadAheadTasks = 1024;

  // `cert_names`: the names of the peer's verified certificate (CertificateNames); with
  // `require_certificate` the worker must register under one of them.
  WorkerStream(EventLoop* loop, Coordinator* coordinator, std::string peer_host,
               std::vector<std::string> cert_names, bool require_certificate)
      : loop_(loop),
        coordinator_(coordinator),
        peer_host_(std::move(peer_host)),
        cert_names_(std::move(cert_names)),
        require_certificate_(require_certificate),
        queue_(std::make_shared<WorkerQueue>(this)),
        session_(std::make_shared<Session>()),
        rearm_(std::make_shared<Rearm>()) {
    rearm_->stream = this;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndSession(absl::OkStatus());
      return;
    }
    baton::v1::WorkerMessage msg = std::move(in_);
    in_.Clear();
    // A peer that sends more than any worker does is cut off before its report costs more.
    if (absl::Status s = CheckMessageLimits(msg); !s.ok()) {
      EndSession(s);
      return;
    }
    if (!first_seen_) {
      first_seen_ = true;
      if (!msg.has_register_()) {
        queue_->Finish(absl::FailedPreconditionError("the first message must be Register"));
        return;
      }
      if (absl::Status s = CheckWorkerIdentity(cert_names_, msg.register_().worker_id(),
                                               require_certificate_);
          !s.ok()) {
        queue_->Finish(s);
        return;
      }
      loop_->Post([c = coordinator_, s = session_, q = queue_, host = peer_host_,
                   reg = std::move(*msg.mutable_register_())] {
        absl::StatusOr<uint64_t> id =
            c->OnWorkerConnected(reg, host, std::make_shared<QueueChannel>(q));
        if (!id.ok()) {
          q->Finish(id.status());
          return;
        }
        s->worker_id = reg.worker_id();
        s->id = *id;
      });
    } else {
      loop_->Post([c = coordinator_, s = session_, msg = std::move(msg)] {
        if (s->id != 0) c->OnWorkerMessage(s->worker_id, s->id, msg);
      });
    }
    if (loop_->queued() < kReadAheadTasks) {
      StartRead(&in_);
    } else {
      loop_->Post([rearm = rearm_] {
        absl::MutexLock lock(&rearm->mu);  // OnDone waits for this before deleting
        WorkerStream* stream = rearm->stream;
        if (stream != nullptr && !stream->queue_->finishing()) stream->StartRead(&stream->in_);
      });
    }
  }

  void OnWriteDone(bool ok) override { queue_->OnWriteDone(ok); }
  void OnDone() override {
    {
      absl::MutexLock lock(&rearm_->mu);
      rearm_->stream = nullptr;
    }
    queue_->OnDone();
    delete this;
  }

 private:
  // The worker's session ends (once registered: the coordinator counts it disconnected),
  // then the stream, with `status`.
  void EndSession(const absl::Status& status) {
    loop_->Post([c = coordinator_, s = session_] {
      if (s->id != 0) c->OnWorkerDisconnected(s->worker_id, s->id);
    });
    queue_->Finish(status);
  }

  // Lets a deferred read re-arm find out whether the stream still exists.
  struct Rearm {
    absl::Mutex mu;
    WorkerStream* stream ABSL_GUARDED_BY(mu) = nullptr;
  };

  struct Session {
    std::string worker_id;
    uint64_t id = 0;  // 0 until registered
  };

  EventLoop* const loop_;
  Coordinator* const coordinator_;
  const std::string peer_host_;
  const std::vector<std::string> cert_names_;
  const bool require_certificate_;
  std::shared_ptr<WorkerQueue> queue_;
  std::shared_ptr<Session> session_;
  std::shared_ptr<Rearm> rearm_;
  baton::v1::WorkerMessage in_;
  bool first_seen_ = false;  // only touched by reactions, which gRPC serialises
};

}  // namespace

std::string HostFromPeer(const std::string& peer) {
  absl::string_view address = peer;
  if (!absl::ConsumePrefix(&address, "ipv4:")) absl::ConsumePrefix(&address, "ipv6:");
  return HostOfAddress(std::string(address));
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                    const baton::v1::SubmitJobRequest* req,
                                                    baton::v1::SubmitJobResponse* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  if (absl::Status s = checks_.policy->CanSubmit(*caller, req->spec()); !s.ok()) {
    return Refuse(ctx, s);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  loop_->Post([this, ctx, req, resp, reactor, caller = *caller] {
    reactor->Finish(ToGrpcStatus(Submit(ctx, req, caller, resp)));
  });
  return reactor;
}

absl::Status JobServiceImpl::Submit(grpc::CallbackServerContext* ctx,
                                    const baton::v1::SubmitJobRequest* req,
                                    const Principal& caller,
                                    baton::v1::SubmitJobResponse* resp) {
  // A client that gave up before its turn must not find a job it was told failed.
  if (ctx->IsCancelled()) {
    return absl::CancelledError("the client cancelled the call before the job was created");
  }
  if (ctx->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError(
        "the call's deadline passed before the job was created; nothing was submitted");
  }
  absl::StatusOr<baton::v1::Job> job =
      coordinator_->SubmitJob(req->spec(), req->request_id(), caller.user);
  if (!job.ok()) return job.status();
  *resp->mutable_job() = std::move(*job);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* ctx,
                                                 const baton::v1::GetJobRequest* req,
                                                 baton::v1::Job* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  return OnLoop(loop_, ctx, [this, req, resp, caller = *caller]() -> absl::Status {
    absl::StatusOr<baton::v1::Job> job = jobs_->Get(req->job_id());
    if (!job.ok()) return job.status();
    *resp = std::move(*job);
    coordinator_->DescribeQueueing(resp);
    checks_.policy->Redact(caller, resp);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                   const baton::v1::ListJobsRequest* req,
                                                   baton::v1::ListJobsResponse* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  return OnLoop(loop_, ctx, [this, req, resp, caller = *caller]() -> absl::Status {
    ASSIGN_OR_RETURN(ListPage page, ParseListPage(*req));
    std::vector<baton::v1::JobState> states;
    for (int s : req->states()) states.push_back(static_cast<baton::v1::JobState>(s));
    // One more than the page, to know whether another follows.
    std::vector<baton::v1::Job> jobs = jobs_->List(states, page.size + 1, page.before_id);
    bool more = static_cast<int>(jobs.size()) > page.size &&
                (page.left == 0 || page.left > page.size);
    if (static_cast<int>(jobs.size()) > page.size) jobs.resize(page.size);
    // A page is bounded by bytes too (kMaxListPageBytes), always holding one job.
    int64_t bytes = 0;
    for (baton::v1::Job& job : jobs) {
      coordinator_->DescribeQueueing(&job);
      checks_.policy->Redact(caller, &job);
      const int64_t size = static_cast<int64_t>(job.ByteSizeLong());
      if (resp->jobs_size() > 0 && bytes + size > kMaxListPageBytes) {
        more = true;
        break;
      }
      bytes += size;
      *resp->add_jobs() = std::move(job);
    }
    const int taken = resp->jobs_size();
    if (more) {
      resp->set_next_page_token(MakeListPageToken(resp->jobs(taken - 1).id(),
                                                  page.left == 0 ? 0 : page.left - taken));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                    const baton::v1::CancelJobRequest* req,
                                                    baton::v1::Job* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  return OnLoop(loop_, ctx, [this, req, resp, caller = *caller]() -> absl::Status {
    ASSIGN_OR_RETURN(const baton::v1::Job before, jobs_->GetWithoutEvents(req->job_id()));
    RETURN_IF_ERROR(checks_.policy->CanCancel(caller, before));
    absl::StatusOr<baton::v1::Job> job = coordinator_->CancelJob(req->job_id(), req->reason());
    if (!job.ok()) return job.status();
    *resp = std::move(*job);
    checks_.policy->Redact(caller, resp);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<baton::v1::JobUpdate>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* ctx, const baton::v1::WatchJobRequest* req) {
  return new StreamReactor<baton::v1::JobUpdate>(
      loop_, checks_.streams, Caller(checks_, ctx),
      [jobs = jobs_, policy = checks_.policy, id = req->job_id(),
       after = req->after_seq()](auto queue, const Principal& caller) -> absl::Status {
        return jobs->Watch(id, after, std::make_shared<RedactingSink>(queue, policy, caller));
      });
}

grpc::ServerWriteReactor<baton::v1::LogLine>* JobServiceImpl::GetLogs(
    grpc::CallbackServerContext* ctx, const baton::v1::GetLogsRequest* req) {
  return new StreamReactor<baton::v1::LogLine>(
      loop_, checks_.streams, Caller(checks_, ctx),
      [jobs = jobs_, r = *req](auto queue, const Principal&) -> absl::Status {
        ASSIGN_OR_RETURN(const LogQuery query, ToLogQuery(r));
        return jobs->FollowLogs(r.job_id(), query, std::move(queue));
      });
}

grpc::ServerUnaryReactor* JobServiceImpl::ProfileJob(grpc::CallbackServerContext* ctx,
                                                     const baton::v1::ProfileJobRequest* req,
                                                     baton::v1::ProfileJobResponse* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  loop_->Post([this, req, resp, reactor, caller = *caller] {
    absl::Status s = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(const baton::v1::Job job, jobs_->GetWithoutEvents(req->job_id()));
      RETURN_IF_ERROR(checks_.policy->CanCancel(caller, job));
      // `done` runs on the loop, exactly once, and only if this returns OK.
      return coordinator_->ProfileJob(
          *req, [reactor, resp](absl::StatusOr<baton::v1::ProfileJobResponse> result) {
            if (result.ok()) *resp = *std::move(result);
            reactor->Finish(ToGrpcStatus(result.status()));
          });
    }();
    if (!s.ok()) reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ClusterServiceImpl::ListWorkers(
    grpc::CallbackServerContext* ctx, const baton::v1::ListWorkersRequest*,
    baton::v1::ListWorkersResponse* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  if (absl::Status s = checks_.policy->CanRead(*caller); !s.ok()) return Refuse(ctx, s);
  return OnLoop(loop_, ctx, [this, resp]() -> absl::Status {
    for (baton::v1::Worker& w : coordinator_->ListWorkers()) *resp->add_workers() = std::move(w);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterServiceImpl::CordonWorker(
    grpc::CallbackServerContext* ctx, const baton::v1::CordonWorkerRequest* req,
    baton::v1::Worker* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  if (absl::Status s = checks_.policy->CanManageWorkers(*caller); !s.ok()) return Refuse(ctx, s);
  return OnLoop(loop_, ctx, [this, req, resp, by = caller->user]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, coordinator_->CordonWorker(req->worker_id(), req->reason(), by));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterServiceImpl::UncordonWorker(
    grpc::CallbackServerContext* ctx, const baton::v1::UncordonWorkerRequest* req,
    baton::v1::Worker* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  if (absl::Status s = checks_.policy->CanManageWorkers(*caller); !s.ok()) return Refuse(ctx, s);
  return OnLoop(loop_, ctx, [this, req, resp]() -> absl::Status {
    ASSIGN_OR_RETURN(*resp, coordinator_->UncordonWorker(req->worker_id()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterServiceImpl::GetVersion(grpc::CallbackServerContext* ctx,
                                                         const baton::v1::GetVersionRequest*,
                                                         baton::v1::GetVersionResponse* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  resp->set_version(kVersion);
  resp->set_protocol_version(kProtocolVersion);
  resp->set_min_worker_protocol_version(kMinWorkerProtocolVersion);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<baton::v1::WorkerMessage, baton::v1::CoordinatorMessage>*
WorkerServiceImpl::Connect(grpc::CallbackServerContext* ctx) {
  return new WorkerStream(loop_, coordinator_, HostFromPeer(ctx->peer()),
                          CertificateNames(*ctx->auth_context()), require_certificate_);
}

grpc::ServerUnaryReactor* ClusterServiceImpl::ListQueues(grpc::CallbackServerContext* ctx,
                                                         const baton::v1::ListQueuesRequest*,
                                                         baton::v1::ListQueuesResponse* resp) {
  absl::StatusOr<Principal> caller = Caller(checks_, ctx);
  if (!caller.ok()) return Refuse(ctx, caller.status());
  if (absl::Status s = checks_.policy->CanRead(*caller); !s.ok()) return Refuse(ctx, s);
  return OnLoop(loop_, ctx, [this, resp]() -> absl::Status {
    *resp = coordinator_->ListQueues();
    return absl::OkStatus();
  });
}

}  // namespace baton::coordinator
