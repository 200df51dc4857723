"""A Python client for Baton's coordinator: submit, inspect, watch and cancel jobs.

    from baton.client import Client, NotFound

    with Client() as baton:                       # connects like the `baton` CLI
        job = baton.submit("examples/quickstart.yaml", overrides={"budget.max_steps": 200})
        for update in baton.watch(job.id):        # baton.v1.JobUpdate messages
            if update.HasField("metric"):
                print(update.metric.step, dict(update.metric.values))
        print(baton.get(job.id).state == JOB_STATE_SUCCEEDED)

Results are the generated protobuf messages of package baton.v1 (proto/baton/v1/
job.proto and job_service.proto document every field): Job, JobUpdate, LogLine, Worker,
ListQueuesResponse, GetVersionResponse. Enum values are module constants here too
(JOB_STATE_RUNNING, WORKER_STATE_READY, ...);
`JobState.Name(job.state)` gives a state's name.

Connection: the coordinator address, TLS CA and bearer token resolve as in the CLI
(client/config/connection.h): arguments > environment (BATON_COORDINATOR, BATON_CONTEXT,
BATON_TOKEN, BATON_INSECURE) > the selected context of the config file ($BATON_CONFIG,
else $XDG_CONFIG_HOME/baton/config.yaml, else ~/.config/baton/config.yaml) > localhost:7070.
TLS is the default; every call carries "authorization: Bearer <token>" when there is a
token, as the CLI sends it; plaintext (insecure) only to a loopback address.

Replicas: the coordinator may be given as the addresses of its replicas (a comma-separated
string or a list). Calls go to one of them, the first at the start. A replica that does
not lead answers every call with UNAVAILABLE and names the leader in its trailing metadata
(baton-leader); the client then moves to that leader if it is one of the addresses, else
to the next address in the list, and later calls go there too.

Errors: every failure raises a BatonError subclass with `.code` (the gRPC status name) and
a one-line message: InvalidArgument (`.field`: the field path), NotFound, AlreadyExists,
FailedPrecondition, Unauthenticated and PermissionDenied (both AuthError), Unavailable,
DeadlineExceeded, ResourceExhausted, Unimplemented.

Retries: idempotent calls (submit, with its request_id; get, jobs, workers, queues,
version) and the streams (watch, logs) are retried after UNAVAILABLE, up to `retries`
failures in a row with exponential backoff; a stream that received something resets the
count and resumes after the last sequence number it delivered, so nothing is repeated or
skipped.
A refusal that names a leader among the addresses is retried there at once, once per
call (per stream: once per run without progress), without counting as a failure.
cancel is never retried (after a refusal naming the leader, the next call goes there).

A Client is thread-safe (one gRPC channel per address, made when first used); close it
(or use `with`) when done.
This module needs grpcio and protobuf (and PyYAML for job and config files); plain
`import baton` (the in-script helper) needs only the standard library.
"""

import datetime
import threading
import time
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from baton._connection import Connection, resolve_connection, read_ca
from baton._errors import (AlreadyExists, AuthError, BatonError, DeadlineExceeded,
                           FailedPrecondition, InvalidArgument, NotFound, PermissionDenied,
                           ResourceExhausted, Unauthenticated, Unavailable, Unimplemented,
                           error_for)
from baton._job_file import SpecLike, load_job_file, to_job_spec
from baton.v1 import job_service_pb2, job_service_pb2_grpc
from baton.v1.job_pb2 import (
    JOB_STATE_CANCELLED, JOB_STATE_FAILED, JOB_STATE_QUEUED, JOB_STATE_RENDEZVOUS,
    JOB_STATE_RESTARTING, JOB_STATE_RUNNING, JOB_STATE_SUCCEEDED, JOB_STATE_UNSPECIFIED,
    WORKER_STATE_DRAINING, WORKER_STATE_LOST, WORKER_STATE_READY, WORKER_STATE_UNSPECIFIED,
    Job, JobEvent, JobSpec, JobState, LogLine, MetricPoint, Worker, WorkerState)
from baton.v1.job_service_pb2 import (GetVersionResponse, JobUpdate, ListQueuesResponse,
                                      QueueStatus)

__all__ = [
    "AlreadyExists", "AuthError", "BatonError", "Client", "Connection", "DeadlineExceeded",
    "FailedPrecondition", "GetVersionResponse", "InvalidArgument", "Job", "JobEvent",
    "JobSpec", "JobState", "JobUpdate", "ListQueuesResponse", "LogLine", "MetricPoint",
    "NotFound", "PermissionDenied", "QueueStatus", "ResourceExhausted", "TERMINAL_STATES",
    "Unauthenticated",
    "Unavailable", "Unimplemented", "Worker", "WorkerState", "is_terminal", "load_job_file",
    "resolve_connection", "to_job_spec",
    "JOB_STATE_CANCELLED", "JOB_STATE_FAILED", "JOB_STATE_QUEUED", "JOB_STATE_RENDEZVOUS",
    "JOB_STATE_RESTARTING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED",
    "JOB_STATE_UNSPECIFIED", "WORKER_STATE_DRAINING", "WORKER_STATE_LOST",
    "WORKER_STATE_READY", "WORKER_STATE_UNSPECIFIED",
]

# States a job never leaves.
TERMINAL_STATES = frozenset({JOB_STATE_SUCCEEDED, JOB_STATE_FAILED, JOB_STATE_CANCELLED})

# The largest reply the client accepts (kMaxGrpcMessageBytes, common/spec/message_limits.h).
MAX_MESSAGE_BYTES = 16 << 20

# Trailing metadata of a standby replica's refusal: the leader's HOST:PORT
# (kLeaderMetadataKey, common/net/coordinator_addresses.h).
LEADER_METADATA_KEY = "baton-leader"

# ClusterService's methods; every other is JobService's.
_CLUSTER_METHODS = frozenset({"ListWorkers", "GetVersion", "CordonWorker", "UncordonWorker",
                              "ListQueues"})


def is_terminal(state: int) -> bool:
    """True for SUCCEEDED, FAILED and CANCELLED."""
    return state in TERMINAL_STATES


def _first_line(text: str) -> str:
    return (text or "").split("\n", 1)[0].strip()


def _short_unavailable_reason(details: str) -> str:
    """The end of gRPC's connection failure text ("... last error: ...: Connection
    refused" -> "Connection refused"), as the CLI shows it."""
    reason = _first_line(details)
    sep = reason.rfind(": ")
    if sep >= 0:
        reason = reason[sep + 2:]
    if not reason:
        return "unavailable"
    return reason if len(reason) <= 80 else reason[:77] + "..."


def _leader_hint(error: grpc.RpcError) -> Optional[str]:
    """The leader a standby named in a failed call's trailing metadata; None if none."""
    try:
        trailers = error.trailing_metadata() or ()
    except Exception:  # not a call's error (e.g. raised before the call started)
        return None
    for key, value in trailers:
        if key == LEADER_METADATA_KEY and value:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def _state_number(state: Union[int, str]) -> int:
    if isinstance(state, int):
        if state not in JobState.values():
            raise InvalidArgument("unknown job state %d" % state, field="states")
        return state
    name = str(state).upper()
    if not name.startswith("JOB_STATE_"):
        name = "JOB_STATE_" + name
    try:
        return JobState.Value(name)
    except ValueError:
        raise InvalidArgument("unknown job state %r (one of %s)" % (
            state, ", ".join(n[len("JOB_STATE_"):] for n in JobState.keys()[1:])),
            field="states") from None


def _timestamp(when: Union[datetime.datetime, datetime.timedelta]) -> Any:
    from google.protobuf import timestamp_pb2

    if isinstance(when, datetime.timedelta):
        when = datetime.datetime.now(datetime.timezone.utc) - when
    if not isinstance(when, datetime.datetime):
        raise TypeError("since must be a datetime or a timedelta, not %s" % type(when).__name__)
    seconds = when.timestamp()  # a naive datetime is local time
    out = timestamp_pb2.Timestamp()
    out.seconds = int(seconds // 1)
    out.nanos = int(round((seconds - out.seconds) * 1e9)) % 1000000000
    return out


class Client:
    """A connection to one Baton coordinator (or to the replicas of one).

    Args:
      coordinator: "host:port" ("[v6]:port", "dns:///host:port", "unix:/path"), or the
        addresses of the coordinator's replicas: a comma-separated string or a list (the
        client follows the leader, see the module's docstring). Default: as the CLI
        resolves it (BATON_COORDINATOR, the context's, else localhost:7070).
      context: the config file context to use (default BATON_CONTEXT, else the file's
        current_context).
      ca: PEM file of the CA the coordinator's certificate must chain to (default: the
        context's).
      token: the bearer token itself; token_file: a file holding it. Default: BATON_TOKEN,
        else the context's token_file. No token: calls carry none.
      insecure: plaintext instead of TLS (also BATON_INSECURE=1 or the context's
        `insecure: true`); only to a loopback address (InvalidArgument otherwise).
      timeout: the deadline of each unary call, in seconds (None: none). Streams (watch,
        logs) have none, since they last as long as the job.
      retries: UNAVAILABLE failures in a row that retried calls and streams tolerate.
      backoff, max_backoff: the first delay before a retry and its cap, in seconds (it
        doubles each time).

    Raises what resolve_connection() raises for a bad configuration; nothing is sent
    until the first call (so an unreachable coordinator shows as Unavailable there).
    """

    def __init__(self, coordinator: Union[None, str, Sequence[str]] = None, *,
                 context: Optional[str] = None,
                 ca: Optional[str] = None, token: Optional[str] = None,
                 token_file: Optional[str] = None, insecure: bool = False,
                 timeout: Optional[float] = 10.0, retries: int = 5, backoff: float = 0.25,
                 max_backoff: float = 4.0) -> None:
        self.connection = resolve_connection(coordinator, context=context, ca=ca, token=token,
                                             token_file=token_file, insecure=insecure)
        self.timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._credentials = (None if self.connection.insecure
                             else grpc.ssl_channel_credentials(read_ca(self.connection.ca)))
        self._metadata = ((("authorization", "Bearer " + self.connection.token),)
                          if self.connection.token else ())
        self._addresses: List[str] = list(self.connection.coordinators)
        self._lock = threading.Lock()
        # Guarded by _lock: where calls go (an index into _addresses), each address's
        # channel and stubs (made when first used), and whether close() was called.
        self._current = 0
        self._channels: Dict[str, grpc.Channel] = {}
        self._stubs: Dict[str, Tuple[Any, Any]] = {}
        self._closed = False

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the channels; streams in progress end with an error, and later calls
        raise ValueError. Idempotent."""
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Client(%r)" % (self.connection,)

    # -- jobs ----------------------------------------------------------------------------

    def submit(self, spec: SpecLike, *, request_id: Optional[str] = None,
               overrides: Any = None) -> Job:
        """Validates and queues a job; returns the created Job (`.id`, `.state` QUEUED...).

        Args:
          spec: one of
            * a dict in the job YAML's structure (proto field names: {"name": "mnist",
              "trainer": {"model": "mlp", ...}, "workers": {"min": 2}, ...}; on a shared
              cluster also "queue", "priority" (a class name or an integer) and
              "preemptible"); relative paths (trainer.data_dir, checkpoint_dir,
              command.working_dir) are made absolute against the current directory;
            * a path (str or os.PathLike) to a job YAML file, read as `baton submit FILE`
              does: relative paths against the file's directory;
            * a baton.v1.JobSpec message, sent as it is.
          request_id: makes the call idempotent: a submit with the request_id of an
            existing job returns that job and creates nothing (AlreadyExists if the spec
            differs). Default: a new random id per call, which this method reuses for its
            own retries after UNAVAILABLE; pass your own to make your retries safe too
            (at most 128 printable ASCII characters).
          overrides: changes applied before conversion, each replacing what the spec has
            at a dotted field path: a mapping {"workers.min": 2, "trainer.hidden": [64]}
            or a list of "PATH=VALUE" strings with YAML values as `--set` takes them.
            Not with a JobSpec message (TypeError).

        Raises InvalidArgument naming the field ("FILE:line:col: field: problem" for a
        job file's shape; "field: problem" from the coordinator's validation), NotFound
        for a missing job file, AlreadyExists, Unauthenticated/PermissionDenied,
        Unavailable (after the retries), DeadlineExceeded.
        """
        request = job_service_pb2.SubmitJobRequest(
            spec=to_job_spec(spec, overrides), request_id=request_id or uuid.uuid4().hex)
        return self._unary("SubmitJob", request, retry=True).job

    def get(self, job_id: str) -> Job:
        """The job with its events. NotFound for an unknown id."""
        return self._unary("GetJob", job_service_pb2.GetJobRequest(job_id=job_id), retry=True)

    def jobs(self, states: Union[None, int, str, Iterable[Union[int, str]]] = None,
             limit: Optional[int] = None, *, page_size: int = 0) -> Iterator[Job]:
        """Jobs, newest first, without events: a generator that fetches page after page.

        Args:
          states: only jobs in these states: JobState values or names, with or without
            the JOB_STATE_ prefix, any case ("running", "JOB_STATE_FAILED"); one or many.
          limit: at most this many jobs in all (None: every job).
          page_size: jobs per call (0: the coordinator's default, 500).

        The arguments are checked at once (InvalidArgument for an unknown state); calls
        are made as the generator is consumed.
        """
        if states is None:
            wanted: List[int] = []
        elif isinstance(states, (int, str)):
            wanted = [_state_number(states)]
        else:
            wanted = [_state_number(s) for s in states]
        request = job_service_pb2.ListJobsRequest(states=wanted, limit=limit or 0,
                                                  page_size=page_size)
        return self._list_jobs(request, limit)

    def _list_jobs(self, request: Any, limit: Optional[int]) -> Iterator[Job]:
        if limit is not None and limit <= 0:
            return
        sent = 0
        while True:
            response = self._unary("ListJobs", request, retry=True)
            for job in response.jobs:
                yield job
                sent += 1
                if limit is not None and sent >= limit:
                    return
            if not response.next_page_token:
                return
            request.page_token = response.next_page_token

    def cancel(self, job_id: str, reason: str = "") -> Job:
        """Stops a job's processes and marks it CANCELLED; returns the job.

        `reason` is shown in the job's events. FailedPrecondition if the job is already
        terminal, NotFound for an unknown id, PermissionDenied for another user's job.
        Not retried (a lost reply would make the retry FailedPrecondition).
        """
        return self._unary("CancelJob",
                           job_service_pb2.CancelJobRequest(job_id=job_id, reason=reason))

    def watch(self, job_id: str, after_seq: int = 0) -> Iterator[JobUpdate]:
        """The job's updates, live, until it is terminal: a generator of JobUpdate.

        Each update has one of `snapshot` (the Job without events: first of every stream
        and after each state change), `event` (a JobEvent) or `metric` (a MetricPoint);
        `update.WhichOneof("update")` names it. Events and metric points carry `seq`
        (increasing per job) and only those with seq > after_seq are sent. When the stream
        breaks (UNAVAILABLE, e.g. a coordinator restart) the watch reconnects after the
        last seq it yielded: no event or point is repeated or lost, and a fresh snapshot
        comes first. The generator returns after the terminal snapshot once the
        coordinator ended the stream. Closing the generator cancels the stream.

        Raises NotFound for an unknown job, Unavailable after `retries` broken streams
        in a row that brought no new event or metric point.
        """
        return self._watch(job_id, after_seq, None)

    def wait(self, job_id: str, timeout: Optional[float] = None) -> Job:
        """Blocks until the job is terminal and returns it (with events, as get()).

        Raises DeadlineExceeded (also a TimeoutError) if it is not terminal after
        `timeout` seconds (None: wait as long as it takes), NotFound for an unknown job.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.get(job_id)
        if is_terminal(job.state):
            return job
        for _ in self._watch(job_id, 0, deadline):
            pass
        return self.get(job_id)

    def logs(self, job_id: str, rank: int = -1, follow: bool = False, tail: int = 0,
             since: Union[None, datetime.datetime, datetime.timedelta] = None
             ) -> Iterator[LogLine]:
        """The job's process output: a generator of LogLine (`.text` without newline,
        `.rank`, `.stream`, `.seq`, `.time`).

        Args:
          rank: only this rank's lines; -1 for every rank.
          follow: keep streaming new lines until the job is terminal.
          tail: if > 0, only the last `tail` stored lines (then, with follow, every new one).
          since: only lines written at or after this time: a datetime (a naive one is local
            time) or a timedelta back from now.

        A broken stream (UNAVAILABLE) resumes after the last line's seq, as watch() does.
        The arguments are checked at once (TypeError for a bad `since`); the stream opens
        when the generator is first advanced.
        """
        request = job_service_pb2.GetLogsRequest(job_id=job_id, rank=rank, follow=follow,
                                                 tail=tail)
        if since is not None:
            request.since.CopyFrom(_timestamp(since))

        def open_stream(last_seq: Optional[int], deadline: Optional[float]) -> Any:
            if last_seq is not None:
                request.after_seq = last_seq
                request.tail = 0  # the tail was already sent
            address, get_logs = self._method("GetLogs")
            return address, get_logs(request, metadata=self._metadata)

        return self._resumable(open_stream, None, lambda line: None, lambda: True)

    # -- cluster -------------------------------------------------------------------------

    def workers(self) -> List[Worker]:
        """Every worker the coordinator knows of since it started, lost ones included."""
        return list(self._unary("ListWorkers", job_service_pb2.ListWorkersRequest(),
                                retry=True).workers)

    def cordon(self, worker_id: str, reason: str = "") -> Worker:
        """Keeps the worker out of new jobs until `uncordon` (admins only; its running jobs
        go on). Durable across coordinator restarts; cordoning again replaces the reason.
        Returns the worker, its `.cordon` set. NotFound for an unknown worker. Idempotent,
        so retried after UNAVAILABLE."""
        return self._unary("CordonWorker",
                           job_service_pb2.CordonWorkerRequest(worker_id=worker_id,
                                                               reason=reason), retry=True)

    def uncordon(self, worker_id: str) -> Worker:
        """Lifts a cordon (admins only); a worker not cordoned is returned unchanged."""
        return self._unary("UncordonWorker",
                           job_service_pb2.UncordonWorkerRequest(worker_id=worker_id),
                           retry=True)

    def queues(self) -> ListQueuesResponse:
        """The queues of a shared cluster (a coordinator started with a queue file), as
        `baton queues` shows them: `.configured` (False, with no queues, on a coordinator
        that starts jobs first come, first served), `.queues` (QueueStatus in the file's
        order: `.name`, `.cohort`, `.nominal`, `.used` and `.borrowed` as slots and gpus,
        `.pending_jobs`, `.admitted_jobs`, `.preemptions`, `.shrinks`, `.users`),
        `.default_queue` and `.priority_classes` (`.name`, `.value`; highest first).
        Why a job waits is in its own record: get(job_id).queueing. Unimplemented from a
        coordinator that predates queues."""
        try:
            return self._unary("ListQueues", job_service_pb2.ListQueuesRequest(), retry=True)
        except Unimplemented:
            raise Unimplemented("the coordinator predates queues (it has no ListQueues): it "
                                "starts jobs first come, first served") from None

    def version(self) -> GetVersionResponse:
        """The coordinator's release (`.version`, e.g. "0.15.0") and worker protocol range
        (`.protocol_version`, `.min_worker_protocol_version`). Unimplemented from a
        coordinator older than release 0.15."""
        return self._unary("GetVersion", job_service_pb2.GetVersionRequest(), retry=True)

    # -- plumbing ------------------------------------------------------------------------

    def _method(self, name: str) -> Tuple[str, Any]:
        """The address calls go to now and the stub method `name` ("GetJob", ...) of its
        channel. ValueError once the Client is closed."""
        with self._lock:
            if self._closed:
                raise ValueError("the Client is closed")
            address = self._addresses[self._current]
            stubs = self._stubs.get(address)
            if stubs is None:
                options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                           ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
                if self._credentials is None:
                    channel = grpc.insecure_channel(address, options=options)
                else:
                    channel = grpc.secure_channel(address, self._credentials, options=options)
                stubs = (job_service_pb2_grpc.JobServiceStub(channel),
                         job_service_pb2_grpc.ClusterServiceStub(channel))
                self._channels[address] = channel
                self._stubs[address] = stubs
        return address, getattr(stubs[1] if name in _CLUSTER_METHODS else stubs[0], name)

    def _follow(self, address: str, error: grpc.RpcError) -> bool:
        """After UNAVAILABLE from `address`, moves later calls to the leader the refusal
        named, if it is one of the addresses (returns True), else to the address after
        `address` in the list (unless another call moved them already). One address:
        stays."""
        hint = _leader_hint(error)
        with self._lock:
            if hint is not None and hint != address and hint in self._addresses:
                self._current = self._addresses.index(hint)
                return True
            if self._addresses[self._current] == address:
                self._current = (self._current + 1) % len(self._addresses)
            return False

    def _error(self, error: grpc.RpcError, address: str, what: str = "") -> BatonError:
        """The BatonError for a failed call to `address`: gRPC's debug text left out."""
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = _first_line(error.details() if hasattr(error, "details") else str(error))
        if code == grpc.StatusCode.UNAVAILABLE:
            message = "cannot reach the coordinator at %s (%s)" % (
                address, _short_unavailable_reason(details))
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            message = "the coordinator at %s did not answer within %ss%s" % (
                address, self.timeout, " (%s)" % what if what else "")
        elif code == grpc.StatusCode.UNAUTHENTICATED:
            message = "the coordinator did not accept the credentials: %s" % details
        else:
            message = details or "error code %s" % code.name
        return error_for(code.name, message)

    def _sleep_backoff(self, failures: int) -> None:
        time.sleep(min(self._backoff * (2 ** (failures - 1)), self._max_backoff))

    def _unary(self, name: str, request: Any, *, retry: bool = False) -> Any:
        """Calls method `name` with `request`; with `retry`, again after UNAVAILABLE (see
        the module's Retries)."""
        failures = 0
        redirected = False
        while True:
            address, method = self._method(name)
            try:
                return method(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                error = self._error(e, address, name)
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise error from None
                to_leader = self._follow(address, e)
                if not retry:
                    raise error from None
                if to_leader and not redirected:
                    redirected = True
                    continue
                failures += 1
                if failures > self._retries:
                    raise error from None
            self._sleep_backoff(failures)

    def _watch(self, job_id: str, after_seq: int, deadline: Optional[float]
               ) -> Iterator[JobUpdate]:
        terminal = [False]

        def open_stream(last_seq: Optional[int], deadline: Optional[float]) -> Any:
            request = job_service_pb2.WatchJobRequest(
                job_id=job_id, after_seq=after_seq if last_seq is None else last_seq)
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            address, watch_job = self._method("WatchJob")
            return address, watch_job(request, timeout=timeout, metadata=self._metadata)

        def observe(update: JobUpdate) -> None:
            if update.HasField("snapshot"):
                terminal[0] = is_terminal(update.snapshot.state)

        try:
            for update in self._resumable(open_stream, deadline, observe, lambda: terminal[0]):
                yield update
        except DeadlineExceeded:
            if deadline is None:
                raise
            raise DeadlineExceeded("job %s was not finished when the wait timed out"
                                   % job_id) from None

    def _resumable(self, open_stream: Any, deadline: Optional[float], observe: Any,
                   finished: Any) -> Iterator[Any]:
        """Runs a server stream of messages with `seq` to its end, reopening it with
        `open_stream(last seq > 0 yielded, or None; deadline)` (which returns the address
        and the call) after UNAVAILABLE, or after an end without error when `finished()`
        is False (every message is passed to `observe` first); `retries` failures in a row
        without a new seq end it. A refusal naming a leader among the addresses reopens it
        there at once, once per run without a new seq."""
        last_seq: Optional[int] = None
        failures = 0
        redirected = False
        while True:
            address, stream = open_stream(last_seq, deadline)
            try:
                for item in stream:
                    if item.seq > 0:  # new data (a snapshot alone is no progress)
                        failures = 0
                        redirected = False
                        last_seq = item.seq
                    observe(item)
                    yield item
                if finished():
                    return
                failure: BatonError = Unavailable(
                    "the stream from %s ended before the job finished" % address)
            except grpc.RpcError as e:
                failure = self._error(e, address)
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise failure from None
                if self._follow(address, e) and not redirected:
                    redirected = True
                    continue
            finally:
                stream.cancel()
            failures += 1
            if failures > self._retries:
                raise failure
            self._sleep_backoff(failures)
