"""An in-process fake of the coordinator's JobService and ClusterService for baton.client
tests: a real gRPC server (plaintext, 127.0.0.1, a port the OS picks) over the generated
stubs, with scripted jobs, updates and failures; TLS when given a key and certificate. Thread-safe (one lock); the test thread
scripts it, the server's threads answer.
"""

import threading
from concurrent import futures
from typing import Dict, List, Optional, Tuple

import grpc

from baton.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc

TERMINAL = (job_pb2.JOB_STATE_SUCCEEDED, job_pb2.JOB_STATE_FAILED, job_pb2.JOB_STATE_CANCELLED)


class FakeCoordinator(job_service_pb2_grpc.JobServiceServicer,
                      job_service_pb2_grpc.ClusterServiceServicer):
    """Scripting:
      * token: when set, every call needs "authorization: Bearer <token>" (UNAUTHENTICATED
        otherwise, with the coordinator's messages).
      * fail(method, code, message, times): the next `times` calls of `method` ("SubmitJob",
        "GetJob", "WatchJob", ...) fail with `code` before doing anything.
      * add_updates(job_id, updates): JobUpdate messages (events, metrics, snapshots with
        seq 0) the watch sends after its first snapshot; seqs must increase.
      * break_watch_after(n, times): the next `times` watch streams fail with UNAVAILABLE
        after sending n messages.
      * finish(job_id, state): moves the job to a state (and the watch ends after it).
      * queues: the ListQueuesResponse ListQueues answers (default: no queue file).
      * become_standby(leader) / become_leader(): a coordinator replica's role. A standby
        refuses every call (after recording it) as the real one does: UNAVAILABLE "... is a
        standby; the leader is LEADER" with trailing metadata baton-leader: LEADER (none
        when `leader` is None). A leader (the default) serves.
    Recorded: `metadata` (every call's (method, dict of metadata)), `requests` (method,
    request).
    """

    def __init__(self, tls: Optional[Tuple[bytes, bytes]] = None) -> None:
        """tls: (PEM key, PEM certificate chain) to serve TLS; plaintext without."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.token: Optional[str] = None
        self.jobs: Dict[str, job_pb2.Job] = {}
        self.updates: Dict[str, List[job_service_pb2.JobUpdate]] = {}
        self.logs: Dict[str, List[job_pb2.LogLine]] = {}
        self.workers: List[job_pb2.Worker] = []
        self.queues = job_service_pb2.ListQueuesResponse()
        self.metadata: List[Tuple[str, Dict[str, str]]] = []
        self.requests: List[Tuple[str, object]] = []
        self._failures: Dict[str, List[Tuple[grpc.StatusCode, str]]] = {}
        self._standby = False
        self._leader: Optional[str] = None  # the leader a standby names
        self._breaks: List[int] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        job_service_pb2_grpc.add_JobServiceServicer_to_server(self, self._server)
        job_service_pb2_grpc.add_ClusterServiceServicer_to_server(self, self._server)
        if tls is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self._server.add_secure_port(
                "127.0.0.1:0", grpc.ssl_server_credentials([tls]))
        self.address = "127.0.0.1:%d" % self.port

    def start(self) -> "FakeCoordinator":
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None)

    # -- scripting -----------------------------------------------------------------------

    def fail(self, method: str, code: grpc.StatusCode, message: str, times: int = 1) -> None:
        with self._lock:
            self._failures.setdefault(method, []).extend([(code, message)] * times)

    def add_updates(self, job_id: str, updates: List[job_service_pb2.JobUpdate]) -> None:
        with self._lock:
            self.updates.setdefault(job_id, []).extend(updates)
            self._changed.notify_all()

    def break_watch_after(self, n: int, times: int = 1) -> None:
        with self._lock:
            self._breaks.extend([n] * times)

    def finish(self, job_id: str, state: int) -> None:
        with self._lock:
            self.jobs[job_id].state = state
            self._changed.notify_all()

    def become_standby(self, leader: Optional[str]) -> None:
        with self._lock:
            self._standby, self._leader = True, leader

    def become_leader(self) -> None:
        with self._lock:
            self._standby, self._leader = False, None

    def calls(self, method: str) -> List[object]:
        with self._lock:
            return [r for m, r in self.requests if m == method]

    # -- helpers -------------------------------------------------------------------------

    def _enter(self, method: str, request: object, context: grpc.ServicerContext) -> None:
        """Records the call, then aborts it if scripted to fail or unauthenticated."""
        md = {k: v for k, v in context.invocation_metadata()}
        with self._lock:
            self.metadata.append((method, md))
            self.requests.append((method, request))
            failure = self._failures.get(method, [])
            scripted = failure.pop(0) if failure else None
            standby, leader = self._standby, self._leader
        if standby:
            if leader is None:
                context.abort(grpc.StatusCode.UNAVAILABLE, "baton-coordinator %s is a standby; "
                              "no leader is elected yet" % self.address)
            context.set_trailing_metadata((("baton-leader", leader),))
            context.abort(grpc.StatusCode.UNAVAILABLE, "baton-coordinator %s is a standby; the "
                          "leader is %s" % (self.address, leader))
        if scripted is not None:
            context.abort(*scripted)
        if self.token is not None:
            value = md.get("authorization")
            if value is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "no bearer token: this coordinator requires one")
            if value != "Bearer " + self.token:
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "the bearer token is not valid (unknown, revoked or mistyped)")

    def _job(self, job_id: str, context: grpc.ServicerContext) -> job_pb2.Job:
        with self._lock:
            job = self.jobs.get(job_id)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "job %s not found" % job_id)
        return job

    # -- JobService ----------------------------------------------------------------------

    def SubmitJob(self, request, context):
        self._enter("SubmitJob", request, context)
        if request.spec.workers.min < 1:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "workers.min: must be >= 1")
        with self._lock:
            for job in self.jobs.values():
                if request.request_id and job.request_id == request.request_id:
                    if job.spec != request.spec:
                        context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                      "request_id %s was used for another spec"
                                      % request.request_id)
                    return job_service_pb2.SubmitJobResponse(job=job)
            job = job_pb2.Job(id="j-%06d" % (len(self.jobs) + 1), spec=request.spec,
                              state=job_pb2.JOB_STATE_QUEUED, request_id=request.request_id)
            self.jobs[job.id] = job
            return job_service_pb2.SubmitJobResponse(job=job)

    def GetJob(self, request, context):
        self._enter("GetJob", request, context)
        return self._job(request.job_id, context)

    def ListJobs(self, request, context):
        self._enter("ListJobs", request, context)
        with self._lock:
            jobs = sorted(self.jobs.values(), key=lambda j: j.id, reverse=True)
        if request.states:
            jobs = [j for j in jobs if j.state in request.states]
        if request.limit:
            jobs = jobs[:request.limit]
        start = int(request.page_token or "0")
        size = request.page_size or 500
        page = jobs[start:start + size]
        more = start + size < len(jobs)
        return job_service_pb2.ListJobsResponse(
            jobs=page, next_page_token=str(start + size) if more else "")

    def CancelJob(self, request, context):
        self._enter("CancelJob", request, context)
        job = self._job(request.job_id, context)
        with self._lock:
            if job.state in TERMINAL:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              "job %s is already %s" % (job.id, job_pb2.JobState.Name(job.state)))
            job.state = job_pb2.JOB_STATE_CANCELLED
            job.message = request.reason
            self._changed.notify_all()
            return job

    def WatchJob(self, request, context):
        self._enter("WatchJob", request, context)
        job = self._job(request.job_id, context)
        with self._lock:
            limit = self._breaks.pop(0) if self._breaks else None
        sent = 0

        def snapshot():
            with self._lock:
                return job_service_pb2.JobUpdate(seq=0, snapshot=job)

        # The first snapshot, then every update after after_seq, until terminal.
        yield snapshot()
        sent += 1
        index = 0
        while True:
            if limit is not None and sent >= limit:
                context.abort(grpc.StatusCode.UNAVAILABLE, "Socket closed")
            with self._lock:
                pending = self.updates.get(job.id, [])
                while index >= len(pending) and job.state not in TERMINAL \
                        and context.is_active():
                    self._changed.wait(0.1)
                    pending = self.updates.get(job.id, [])
                if not context.is_active():
                    return
                batch = pending[index:]
                index = len(pending)
                terminal = job.state in TERMINAL
            for update in batch:
                if update.seq and update.seq <= request.after_seq:
                    continue
                if limit is not None and sent >= limit:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "Socket closed")
                yield update
                sent += 1
            if terminal and not batch:
                if limit is not None and sent >= limit:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "Socket closed")
                yield snapshot()
                return

    def GetLogs(self, request, context):
        self._enter("GetLogs", request, context)
        self._job(request.job_id, context)
        with self._lock:
            lines = [line for line in self.logs.get(request.job_id, [])
                     if line.seq > request.after_seq
                     and (request.rank < 0 or line.rank == request.rank)]
        if request.tail > 0:
            lines = lines[-request.tail:]
        for line in lines:
            yield line

    # -- ClusterService ------------------------------------------------------------------

    def ListWorkers(self, request, context):
        self._enter("ListWorkers", request, context)
        with self._lock:
            return job_service_pb2.ListWorkersResponse(workers=self.workers)

    def CordonWorker(self, request, context):
        self._enter("CordonWorker", request, context)
        with self._lock:
            for w in self.workers:
                if w.id == request.worker_id:
                    w.cordon.worker_id = w.id
                    w.cordon.reason = request.reason
                    return w
        context.abort(grpc.StatusCode.NOT_FOUND, "worker '%s' is unknown" % request.worker_id)

    def UncordonWorker(self, request, context):
        self._enter("UncordonWorker", request, context)
        with self._lock:
            for w in self.workers:
                if w.id == request.worker_id:
                    w.ClearField("cordon")
                    return w
        context.abort(grpc.StatusCode.NOT_FOUND, "worker '%s' is unknown" % request.worker_id)

    def ListQueues(self, request, context):
        self._enter("ListQueues", request, context)
        with self._lock:
            return self.queues

    def GetVersion(self, request, context):
        self._enter("GetVersion", request, context)
        return job_service_pb2.GetVersionResponse(version="0.15.0", protocol_version=4,
                                                  min_worker_protocol_version=2)
