"""In-script helper for programs that Baton runs as command jobs (pure Python, stdlib only).

A torchrun-style training script uses it to take part in Baton's contract with its training
processes (the same contract the built-in trainer follows, worker/trainer/contract/contract.h):

* ``report(step=..., loss=..., samples=..., **metrics)`` writes one metric line on the file
  descriptor in ``BATON_METRICS_FD``: what ``baton submit --wait`` and ``baton describe``
  show as progress. Outside Baton (the variable unset, e.g. under plain torchrun) it does
  nothing, so the same script runs anywhere.
* ``checkpoint_requested()`` / ``on_checkpoint_request(callback)``: a job whose spec says
  ``command: {elastic: true}`` is resized (a worker drains, a worker joins) by asking rank 0
  to checkpoint: the worker sends SIGUSR1 to rank 0's process group. The script finishes the
  step it is in, saves its state and exits with ``CHECKPOINT_EXIT_CODE`` (75); the next
  generation (another world size) resumes from that checkpoint, so no step is lost.
* ``rank_info()``: rank, world size, local rank, job id and generation from the environment
  Baton (and torchrun) set.
* ``snapshot(state, step)`` / ``restore()``: in-memory snapshots, so that a restarted gang
  resumes at the last step any survivor completed instead of the last checkpoint on disk.
  ``snapshot`` keeps ``state`` (anything ``torch.save`` takes) in the directory the worker
  keeps for the job on this host (``BATON_SNAPSHOT_DIR``; local rank 0 writes: in data
  parallelism every rank holds the same state); ``restore`` (every rank, after
  ``init_process_group``) returns the newest snapshot any rank holds, sent by its holder.
  They need torch, imported when called.
* ``lease_expired()``: whether the worker's lease (the page at ``BATON_LEASE_FD``) has run
  out. ``report()`` checks it first and, once it has, ends the process at once with
  ``FENCED_EXIT_CODE``: the worker daemon hangs or lost the coordinator, and the job's next
  generation may already run elsewhere (the rank's shim kills it too; this is the second
  layer, docs/ARCHITECTURE.md "Fencing").

The module installs its SIGUSR1 handler when it is imported in the main thread of a process
that Baton started (``BATON_JOB_ID`` set) and SIGUSR1 still has its default action (which
would kill the process); elsewhere on the first call of ``checkpoint_requested()`` or
``on_checkpoint_request()``. So import it before the first step.

This module uses the standard library only. The coordinator's gRPC client, for programs
that submit and watch jobs, is the submodule ``baton.client`` (grpcio, protobuf, PyYAML;
see client/python/README.md); importing ``baton`` does not import it.
"""

import math
import mmap
import operator
import os
import signal
import struct
import sys
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

__all__ = [
    "CHECKPOINT_EXIT_CODE",
    "FENCED_EXIT_CODE",
    "RankInfo",
    "checkpoint_requested",
    "format_metrics_line",
    "lease_expired",
    "on_checkpoint_request",
    "rank_info",
    "report",
    "restore",
    "snapshot",
]

# The exit code of a process that saved a checkpoint because it was asked to (SIGUSR1) and
# left: the coordinator counts it as the planned end of its generation, not a failure
# (kExitCheckpointed in contract.h).
CHECKPOINT_EXIT_CODE = 75

# The exit code of a process that stopped because the worker's lease ran out (as the
# built-in trainer's kExitPeer: the generation is over, a retryable end).
FENCED_EXIT_CODE = 4

# Environment variables (contract.h; worker/supervisor/rank_env.h; lease_page.h).
ENV_LEASE_FD = "BATON_LEASE_FD"
ENV_METRICS_FD = "BATON_METRICS_FD"
ENV_JOB_ID = "BATON_JOB_ID"
ENV_GENERATION = "BATON_GENERATION"
ENV_CHECKPOINT_DIR = "BATON_CHECKPOINT_DIR"
ENV_SNAPSHOT_DIR = "BATON_SNAPSHOT_DIR"

Number = Union[int, float]


# ---------------------------------------------------------------------------------------
# Metric lines.
# ---------------------------------------------------------------------------------------

def _json_key(key: str) -> str:
    out = ['"']
    for c in key:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _json_number(value: float) -> str:
    if math.trunc(value) == value and abs(value) < 2.0 ** 53:
        return str(int(value))
    return "%.9g" % value


def format_metrics_line(fields: List[Tuple[str, Number]]) -> str:
    """One metric line, exactly as the built-in trainer writes it (FormatMetricsLine).

    A JSON object of the (key, value) pairs in the given order, ending in a newline.
    Integral values print without a fraction ("step":10), others with up to 9 significant
    digits ("%.9g"); non-finite values (NaN, infinities) are left out, since JSON has none.
    Keys are escaped ('"', '\\\\', newline and other control characters). Raises TypeError
    for a value that is not a real number (bool counts as 0/1).
    """
    parts = []
    for key, value in fields:
        if not isinstance(key, str):
            raise TypeError("metric name %r is not a string" % (key,))
        if not isinstance(value, (int, float)):
            try:
                value = float(value)  # numpy and torch scalars, Fraction, Decimal
            except (TypeError, ValueError):
                raise TypeError("metric %r is %r, not a number" % (key, value)) from None
        value = float(value)
        if not math.isfinite(value):
            continue
        parts.append(_json_key(key) + ":" + _json_number(value))
    return "{" + ",".join(parts) + "}\n"


def _fd_from_env(name: str, use: Callable[[int], Any], what: str) -> Any:
    """`use(fd)` for the descriptor number in environment variable `name`; None when it is
    unset or empty. ValueError naming the variable and its value if it is not a
    non-negative integer or `use` fails with OSError."""
    raw = os.environ.get(name, "")
    if raw == "":
        return None
    try:
        fd = int(raw)
        if fd < 0:
            raise ValueError
        return use(fd)
    except (ValueError, OSError):
        raise ValueError("%s=%r is not %s" % (name, raw, what)) from None


def _open_fd(fd: int) -> int:
    os.fstat(fd)  # OSError if it is not open
    return fd


class _Reporter:
    """Owns the metrics descriptor and the rate window. Thread-safe (one lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: Optional[int] = None
        self._resolved = False
        self._last: Optional[Tuple[int, float]] = None  # (step, monotonic time) of last line

    def _resolve(self) -> Optional[int]:
        if not self._resolved:
            self._resolved = True
            self._fd = _fd_from_env(ENV_METRICS_FD, _open_fd, "an open file descriptor")
        return self._fd

    def report(self, step: int, loss: Optional[Number], samples: Optional[Number],
               metrics: Dict[str, Number]) -> bool:
        try:
            if isinstance(step, bool):
                raise TypeError
            step = operator.index(step)  # int, numpy and 0-d torch integers
        except TypeError:
            raise ValueError("step must be a non-negative integer, not %r" % (step,)) from None
        if step < 0:
            raise ValueError("step must be a non-negative integer, not %r" % (step,))
        _stop_if_fenced()
        with self._lock:
            fd = self._resolve()
            if fd is None:
                return False
            now = time.monotonic()
            fields: List[Tuple[str, Number]] = [("step", step)]
            if loss is not None:
                fields.append(("loss", loss))
            if self._last is not None:
                last_step, last_time = self._last
                elapsed = now - last_time
                if samples is not None and elapsed > 0 and "samples_per_sec" not in metrics:
                    fields.append(("samples_per_sec", float(samples) / elapsed))
                if step > last_step and "time_step_s" not in metrics:
                    fields.append(("time_step_s", elapsed / (step - last_step)))
            fields.extend(metrics.items())
            data = format_metrics_line(fields).encode("utf-8")
            self._last = (step, now)
            try:
                while data:  # one write(2) in practice: lines are far below PIPE_BUF
                    data = data[os.write(fd, data):]
            except OSError as e:
                self._fd = None
                print("baton: stopped writing metrics to fd %d: %s" % (fd, e), file=sys.stderr,
                      flush=True)
                return False
            return True


_reporter = _Reporter()


class _Lease:
    """The lease page (worker/trainer/contract/lease_page.h): 8 bytes, a native int64, the
    CLOCK_BOOTTIME nanosecond at which the worker's lease runs out (INT64_MAX: none)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resolved = False
        self._page: Optional[mmap.mmap] = None

    def expired(self) -> bool:
        with self._lock:
            if not self._resolved:
                self._resolved = True
                self._page = _fd_from_env(
                    ENV_LEASE_FD, lambda fd: mmap.mmap(fd, 8, mmap.MAP_SHARED, mmap.PROT_READ),
                    "a lease page's file descriptor")
            if self._page is None:
                return False
            deadline = struct.unpack_from("=q", self._page, 0)[0]
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME) >= deadline


_lease = _Lease()


def lease_expired() -> bool:
    """True once the worker's lease has run out (BATON_LEASE_FD); False outside Baton.

    A script that wants to stop cleanly before its shim kills it can check this at each
    step; report() already does, and ends the process. Raises ValueError if BATON_LEASE_FD is
    set but not a lease page's descriptor. Thread-safe.
    """
    return _lease.expired()


def _stop_if_fenced() -> None:
    if _lease.expired():
        print("baton: the worker's lease ran out unrenewed; this generation is fenced and the "
              "process stops (exit %d)" % FENCED_EXIT_CODE, file=sys.stderr, flush=True)
        os._exit(FENCED_EXIT_CODE)


def report(step: int, loss: Optional[Number] = None, samples: Optional[Number] = None,
           **metrics: Number) -> bool:
    """Writes one metric line on BATON_METRICS_FD; a no-op (returns False) when it is unset.

    Call it on every rank, at the same steps (the coordinator tracks each rank's progress:
    a job that reported a step and then makes no progress for max(stall_factor x median
    step time, stall_floor) is restarted as stalled; rank 0's lines are the progress that
    `baton submit --wait` and `baton describe` show).

    Args:
      step: completed optimizer steps, counting from 1 and continuing after a resume from a
        checkpoint (a non-negative integer: int, or anything with __index__ such as a numpy
        integer; ValueError otherwise). Line key "step".
      loss: the training loss over the steps since the previous report ("loss").
      samples: samples the whole job (all ranks) trained on since this process's previous
        report. With it, the line has "samples_per_sec" (samples over the wall time since
        the previous report). Every line after the first also has "time_step_s" (wall
        seconds per step since the previous report), which the coordinator's goodput and
        straggler detection read. A key given in `metrics` is written as given instead.
      **metrics: further numbers, written in the order given, e.g. epoch=0, lr=0.05,
        accuracy=0.9 (a fraction; see contract.h for the keys Baton knows).

    First, if the worker's lease has run out (lease_expired()), the process ends at once
    with FENCED_EXIT_CODE, writing nothing: another generation may already be training.
    The line is one JSON object, as format_metrics_line() writes it; non-finite values are
    left out. Returns True once written. A failed write (the worker is gone: EPIPE) prints
    one line on stderr, disables later reports and returns False; training goes on.
    Raises ValueError if BATON_METRICS_FD is set but not an open descriptor, TypeError for
    a value that is not a number. Thread-safe.
    """
    return _reporter.report(step, loss, samples, metrics)


# ---------------------------------------------------------------------------------------
# Checkpoint requests (SIGUSR1).
# ---------------------------------------------------------------------------------------

_requested = threading.Event()
_callbacks: List[Callable[[], None]] = []
_installed = False


def _on_sigusr1(signum, frame) -> None:
    _requested.set()
    for callback in list(_callbacks):
        callback()


def _install_handler() -> None:
    """Installs the SIGUSR1 handler once. Python runs signal handlers in the main thread,
    and only the main thread may install one: from another thread this raises ValueError."""
    global _installed
    if not _installed:
        signal.signal(signal.SIGUSR1, _on_sigusr1)
        _installed = True


def checkpoint_requested() -> bool:
    """True once Baton asked this process to checkpoint (SIGUSR1 arrived; it stays True).

    Check it at every step boundary: when True, save the full training state (model,
    optimizer, data position, RNG) where the next generation finds it (rank_info().
    checkpoint_dir, a shared directory) and exit with CHECKPOINT_EXIT_CODE. Only rank 0
    is asked; the other ranks are stopped by Baton once rank 0 exited (they are blocked in
    the next step's collective, so they never complete a step rank 0 did not).
    Installs the handler if it is not installed yet (main thread only).
    """
    _install_handler()
    return _requested.is_set()


def on_checkpoint_request(callback: Callable[[], None]) -> Callable[[], None]:
    """Calls `callback()` (no arguments) when a checkpoint request arrives, and returns it
    (so it works as a decorator).

    The callback runs in the main thread, inside Python's signal handler, between two
    bytecodes of whatever the main thread is doing: keep it short (set a flag; do not save
    from it, since the step is half done). checkpoint_requested() turns True first.
    Installs the handler if needed: call it from the main thread (ValueError otherwise).
    """
    _install_handler()
    _callbacks.append(callback)
    return callback


def _install_if_under_baton() -> None:
    if os.environ.get(ENV_JOB_ID) is None:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL:  # never replace a user's handler
        _install_handler()


_install_if_under_baton()


# ---------------------------------------------------------------------------------------
# Where this process is.
# ---------------------------------------------------------------------------------------

class RankInfo(NamedTuple):
    """This process's place in the job, from the environment Baton (or torchrun) set."""

    rank: int  # RANK; 0 when unset
    world_size: int  # WORLD_SIZE; 1 when unset (a single process)
    local_rank: int  # LOCAL_RANK; 0 when unset
    local_world_size: int  # LOCAL_WORLD_SIZE; 1 when unset
    job_id: Optional[str]  # BATON_JOB_ID (e.g. "j-000001"); None outside Baton
    generation: int  # BATON_GENERATION (the rendezvous generation, >= 1); 0 = unknown
    checkpoint_dir: Optional[str]  # BATON_CHECKPOINT_DIR (the spec's checkpoint_dir); None


def _int_env(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("%s=%r is not an integer" % (name, raw)) from None
    if value < minimum:
        raise ValueError("%s=%r is below %d" % (name, raw, minimum))
    return value


def rank_info() -> RankInfo:
    """Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, BATON_JOB_ID, BATON_GENERATION
    and BATON_CHECKPOINT_DIR now; unset ones take the defaults in RankInfo. Raises
    ValueError naming the variable when one is set but not a valid integer."""
    return RankInfo(
        rank=_int_env("RANK", 0, 0),
        world_size=_int_env("WORLD_SIZE", 1, 1),
        local_rank=_int_env("LOCAL_RANK", 0, 0),
        local_world_size=_int_env("LOCAL_WORLD_SIZE", 1, 1),
        job_id=os.environ.get(ENV_JOB_ID) or None,
        generation=_int_env(ENV_GENERATION, 0, 0),
        checkpoint_dir=os.environ.get(ENV_CHECKPOINT_DIR) or None,
    )


# ---------------------------------------------------------------------------------------
# In-memory snapshots (the files of worker/trainer/snapshot/snapshot_store.h: _snapshot.py).
# ---------------------------------------------------------------------------------------

_snapshot_writer = None


def snapshot(state: Any, step: int) -> bool:
    """Keeps ``state`` as this job's in-memory snapshot of optimizer step ``step``: call it
    after each step (or every few). Only local rank 0 writes, into a double-buffered file in
    ``BATON_SNAPSHOT_DIR`` (the copy being written is never the only one); the others, and
    any process outside Baton (the variable unset), return False at once. The state is
    serialised with ``torch.save`` on the calling thread: hold it still meanwhile."""
    directory = os.environ.get(ENV_SNAPSHOT_DIR)
    info = rank_info()
    if not directory or info.local_rank != 0:
        return False
    import io

    import torch

    from baton import _snapshot

    global _snapshot_writer
    if _snapshot_writer is None:
        _snapshot_writer = _snapshot.Writer(directory, "rank%d" % info.rank)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    _snapshot_writer.write(info.generation, int(step), buffer.getbuffer())
    return True


def restore(newer_than: int = -1) -> Optional[Tuple[int, Any]]:
    """The newest in-memory snapshot any rank of the gang holds, as ``(step, state)``, when
    its step is above ``newer_than`` (say, the step of the disk checkpoint already loaded);
    else None. Collective once ``torch.distributed`` is initialised: call it on every rank at
    start, after ``init_process_group``; every rank returns the same. Newest means by
    generation, then step (a superseded generation's late writes never win once the newer
    one wrote a snapshot). Outside Baton it returns None."""
    directory = os.environ.get(ENV_SNAPSHOT_DIR)
    import io

    import torch
    import torch.distributed as dist

    from baton import _snapshot

    mine = None
    for ref in (_snapshot.list_snapshots(directory) if directory else []):
        if ref.step > newer_than:
            mine = ref
            break
    offer = (mine.generation, mine.step) if mine else (-1, 0)
    distributed = dist.is_available() and dist.is_initialized()
    if distributed:
        offers = [None] * dist.get_world_size()
        dist.all_gather_object(offers, offer)
    else:
        offers = [offer]
    best = max(range(len(offers)), key=lambda r: (offers[r], -r))
    if offers[best][0] < 0:
        return None
    me = dist.get_rank() if distributed else 0
    payload = [_snapshot.read(mine) if me == best else None]
    if distributed:
        dist.broadcast_object_list(payload, src=best)
    if payload[0] is None:
        return None
    return offers[best][1], torch.load(io.BytesIO(payload[0]))
