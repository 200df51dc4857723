#!/usr/bin/python3
"""Baseline for the control-plane benchmark: torchrun-style rendezvous on a c10d TCPStore.

What users have today without Baton: torch elastic agents rendezvous through one
TCPStore server. This script starts that server in its own process (loopback only,
OS-chosen port) and N clients, each its own TCPStore client object on its own thread,
spread over several client processes. It measures:

  connect_s          after every client process is ready (torch imported, threads made),
                     the time until all N clients have connected and the server has
                     accepted all their connections (2 per client);
  rendezvous_s       from "go" (a barrier once all have connected) until every client has
                     done torchrun's pattern: add("rdzv/joined", 1) for an arrival index i,
                     set("rdzv/node/<i-1>", "<host:port>"), the last arrival sets
                     "rdzv/done", then wait(["rdzv/done"]) and get("rdzv/node/0")
                     (the analogue of Baton's submit -> RUNNING);
  server_cpu_rdzv_s  the server process's CPU seconds (utime+stime) during rendezvous;
  then a steady window in which every client sets "rdzv/keepalive/<i>" to a timestamp
  every --heartbeat seconds:
  server_cpu_per_s   server CPU seconds per second over the window;
  server_rss_mib     server VmRSS at the end of the window (includes the torch import;
                     server_rss_idle_mib is the same process before any client connected);
  keepalives_per_s   keep-alive sets completed per second over the window;
  errors             store operations that raised.

Contract: prints exactly one line on stdout,
  tcpstore clients=N connect_s=... rendezvous_s=... server_cpu_rdzv_s=...
      server_cpu_per_s=... server_rss_mib=... server_rss_idle_mib=... keepalives_per_s=...
      errors=K
progress and errors on stderr. Exit 0 iff every client completed the rendezvous and no
store operation failed; 1 on failure or --timeout (children are killed); 2 on bad flags.

Notes: with torch 1.13 each client object holds 2 connections to the server and 1 thread
of its own, so the server needs 2N file descriptors: the soft RLIMIT_NOFILE is raised to
the hard one, and the run refuses to start if that is too low. Server CPU is read from
/proc/<pid>/stat in clock ticks (10 ms). The clients share the machine with the server, so
on a small machine their CPU competes with it.

Usage (Debian's /usr/bin/python3 has torch; run from anywhere):
  /usr/bin/python3 bench/control_plane/tcpstore_baseline.py --clients 1000
  /usr/bin/python3 bench/control_plane/tcpstore_baseline.py --clients 100 --steady 10 --procs 4
"""

import argparse
import collections
import ctypes
import datetime
import math
import multiprocessing as mp
import os
import queue
import random
import resource
import signal
import sys
import threading
import time

HOST = "127.0.0.1"  # Loopback only, by contract.
MAX_CLIENTS = 20000
MAX_PROCS = 64
MAX_THREADS_PER_PROC = 2000
# Per client object (torch 1.13): 2 sockets on the server; 2 sockets + a pipe pair
# and 1 listener thread on the client side.
SERVER_FDS_PER_CLIENT = 2
CLIENT_FDS_PER_CLIENT = 4
FD_SLACK = 256


def log(msg):
    print(f"tcpstore_baseline: {msg}", file=sys.stderr, flush=True)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter,
                     argparse.ArgumentDefaultsHelpFormatter):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    p.add_argument("--clients", type=int, required=True,
                   help=f"N simulated agents, one TCPStore client each (1..{MAX_CLIENTS}); "
                        f"required")
    p.add_argument("--procs", type=int, default=8,
                   help=f"client processes the N clients are spread over (capped at N; "
                        f"at most {MAX_PROCS}); each runs ceil(N/procs) threads, at most "
                        f"{MAX_THREADS_PER_PROC}")
    p.add_argument("--steady", type=float, default=20.0,
                   help="steady window in seconds (keep-alives only); 0 skips it")
    p.add_argument("--heartbeat", type=float, default=1.0,
                   help="seconds between one client's keep-alive sets")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="bound on the whole run in seconds; on expiry children are killed "
                        "and the exit status is 1")
    a = p.parse_args(argv)
    if not 1 <= a.clients <= MAX_CLIENTS:
        p.error(f"--clients must be in 1..{MAX_CLIENTS}, got {a.clients}")
    if not 1 <= a.procs <= MAX_PROCS:
        p.error(f"--procs must be in 1..{MAX_PROCS}, got {a.procs}")
    a.procs = min(a.procs, a.clients)
    if math.ceil(a.clients / a.procs) > MAX_THREADS_PER_PROC:
        p.error(f"{a.clients} clients over {a.procs} processes is more than "
                f"{MAX_THREADS_PER_PROC} threads per process; raise --procs")
    if not 0 <= a.steady <= 3600:
        p.error(f"--steady must be in 0..3600, got {a.steady}")
    if not 0.01 <= a.heartbeat <= 600:
        p.error(f"--heartbeat must be in 0.01..600, got {a.heartbeat}")
    if not 1 <= a.timeout <= 86400:
        p.error(f"--timeout must be in 1..86400, got {a.timeout}")
    return a


def raise_nofile(need):
    """Raises the soft RLIMIT_NOFILE to the hard limit; fails if that is below `need`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(f"tcpstore_baseline: need {need} file descriptors, hard "
                         f"RLIMIT_NOFILE is {hard} (raise it with ulimit -Hn, or lower "
                         f"--clients / raise --procs)")


def die_with_parent():
    """Children get SIGKILL if the parent goes away (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # The parent handles ^C.


def store_timeout(deadline):
    return datetime.timedelta(seconds=max(1.0, deadline - time.monotonic()))


# ---- Server process -------------------------------------------------------------------


def server_main(port_q, stop, deadline):
    die_with_parent()
    from torch.distributed import TCPStore  # pylint: disable=import-outside-toplevel
    store = TCPStore(HOST, 0, None, True, store_timeout(deadline),
                     wait_for_workers=False)
    port_q.put(store.port)
    stop.wait(max(0.0, deadline - time.monotonic()))
    del store


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 (utime, stime) are the 12th and 13th after the ")" of comm.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def server_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


# ---- Client processes -----------------------------------------------------------------


def client_main(proc_idx, ranks, n, port, heartbeat, deadline, events, msgs, keepalives):
    """Runs one thread per client index in `ranks`; reports phases on `msgs`."""
    die_with_parent()
    threading.stack_size(512 * 1024)
    from torch.distributed import TCPStore  # pylint: disable=import-outside-toplevel
    connect_ev, go_ev, stop_ev = (threading.Event() for _ in range(3))
    lock = threading.Lock()
    st = collections.Counter()
    times = {"connected": 0.0, "done": 0.0}

    def error(what, e):
        with lock:
            st["errors"] += 1
            first = st["errors"] <= 3
        if first:  # The first few only: one cause usually fails every client.
            log(f"{what}: {type(e).__name__}: {e}")

    def phase_done(key, count_key):
        with lock:
            st[count_key] += 1
            times[key] = max(times[key], time.monotonic())

    def agent(i):
        connect_ev.wait()
        try:
            store = TCPStore(HOST, port, None, False, store_timeout(deadline),
                             wait_for_workers=False)
        except Exception as e:  # pylint: disable=broad-except
            error(f"client {i} connect", e)
            phase_done("connected", "connect_failed")
            return
        phase_done("connected", "connected")
        go_ev.wait()
        try:
            # torchrun's pattern: arrival index, publish own address, last one closes.
            arrival = store.add("rdzv/joined", 1)
            store.set(f"rdzv/node/{arrival - 1}", f"{HOST}:{29500 + arrival}")
            if arrival == n:
                store.set("rdzv/done", "1")
            store.wait(["rdzv/done"])
            store.get("rdzv/node/0")
        except Exception as e:  # pylint: disable=broad-except
            error(f"client {i} rendezvous", e)
            phase_done("done", "rdzv_failed")
            return
        phase_done("done", "rdzv_ok")
        # Keep-alives at independent phases, as separate agents would.
        next_t = time.monotonic() + random.uniform(0, heartbeat)
        while not stop_ev.wait(max(0.0, next_t - time.monotonic())):
            next_t += heartbeat
            try:
                store.set(f"rdzv/keepalive/{i}", repr(time.time()))
                with keepalives.get_lock():
                    keepalives.value += 1
            except Exception as e:  # pylint: disable=broad-except
                error(f"client {i} keep-alive", e)
                return

    threads = [threading.Thread(target=agent, args=(i,), daemon=True) for i in ranks]
    for t in threads:
        t.start()
    msgs.put(("ready", proc_idx))

    def await_count(keys):
        while time.monotonic() < deadline:
            with lock:
                if sum(st[k] for k in keys) >= len(ranks):
                    return
            time.sleep(0.01)

    events["connect"].wait()
    connect_ev.set()
    await_count(("connected", "connect_failed"))
    msgs.put(("connected", proc_idx, st["connected"], times["connected"]))
    events["go"].wait()
    go_ev.set()
    await_count(("rdzv_ok", "rdzv_failed", "connect_failed"))
    msgs.put(("rdzv", proc_idx, st["rdzv_ok"], times["done"]))
    events["stop"].wait()
    stop_ev.set()
    join_by = min(time.monotonic() + 5.0, deadline)
    for t in threads:
        t.join(max(0.0, join_by - time.monotonic()))
    msgs.put(("end", proc_idx, st["errors"]))


# ---- Parent ---------------------------------------------------------------------------


class Failure(Exception):
    pass


def main(argv):
    args = parse_args(argv)
    n = args.clients
    per_proc = math.ceil(n / args.procs)
    # The parent's limit is inherited by the server and client processes.
    raise_nofile(max(SERVER_FDS_PER_CLIENT * n, CLIENT_FDS_PER_CLIENT * per_proc) + FD_SLACK)
    deadline = time.monotonic() + args.timeout
    ctx = mp.get_context("fork")  # The parent never imports torch nor starts threads.
    children = []

    def on_signal(signum, _frame):
        raise Failure(f"got signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return run(args, n, ctx, deadline, children)
    except Failure as e:
        log(f"FAILED: {e}")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for c in children:
            if c.is_alive():
                c.kill()
        for c in children:
            c.join(5)


def run(args, n, ctx, deadline, children):
    def remaining(what):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure(f"--timeout {args.timeout:g} s expired while {what}")
        return left

    port_q, stop_server = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=server_main, args=(port_q, stop_server, deadline),
                         name="tcpstore-server", daemon=True)
    server.start()
    children.append(server)
    try:
        port = port_q.get(timeout=min(60.0, remaining("starting the server")))
    except queue.Empty:
        raise Failure(f"TCPStore server (pid {server.pid}, exit code {server.exitcode}) "
                      f"did not report its port") from None
    rss_idle = proc_rss_mib(server.pid)
    log(f"server pid {server.pid} on {HOST}:{port}, RSS {rss_idle:.1f} MiB; "
        f"{n} clients over {args.procs} processes")

    events = {k: ctx.Event() for k in ("connect", "go", "stop")}
    msgs = ctx.Queue()
    counters = []
    for p in range(args.procs):
        ranks = list(range(p, n, args.procs))
        counter = ctx.Value("q", 0)
        counters.append(counter)
        c = ctx.Process(target=client_main, name=f"tcpstore-clients-{p}",
                        args=(p, ranks, n, port, args.heartbeat, deadline, events, msgs,
                              counter), daemon=True)
        c.start()
        children.append(c)

    def gather(kind):
        """One `kind` message from every client process."""
        got = {}
        while len(got) < args.procs:
            try:
                m = msgs.get(timeout=min(0.5, remaining(f"waiting for '{kind}' from clients")))
            except queue.Empty:
                for c in children:
                    if c.exitcode is not None:
                        raise Failure(f"{c.name} (pid {c.pid}) exited with {c.exitcode} "
                                      f"while waiting for '{kind}'")
                continue
            if m[0] != kind:
                raise Failure(f"client process {m[1]} sent '{m[0]}', expected '{kind}'")
            got[m[1]] = m[2:]
        return got.values()

    gather("ready")
    fds0 = server_fds(server.pid)
    t_connect = time.monotonic()
    events["connect"].set()
    got = list(gather("connected"))
    connected = sum(g[0] for g in got)
    client_connect_s = max(g[1] for g in got) - t_connect
    if connected != n:
        raise Failure(f"only {connected}/{n} clients connected")
    # A client's connect() returns once the kernel has queued the connection; the server
    # accepts later. Wait for its accepts so that they do not count as rendezvous time.
    want, fds, t_fds = fds0 + SERVER_FDS_PER_CLIENT * n, -1, time.monotonic()
    while True:
        now_fds = server_fds(server.pid)
        if now_fds >= want:
            break
        if now_fds != fds:
            fds, t_fds = now_fds, time.monotonic()
        elif time.monotonic() - t_fds > 2.0:
            log(f"warning: server stuck at {fds} fds, expected {want} (not torch 1.13?); "
                f"going on")
            break
        remaining("waiting for the server to accept every connection")
        time.sleep(0.005)
    connect_s = max(client_connect_s, time.monotonic() - t_connect)
    log(f"{connected}/{n} connected in {client_connect_s:.3f} s, the server had accepted "
        f"them after {connect_s:.3f} s; server RSS {proc_rss_mib(server.pid):.1f} MiB, "
        f"{server_fds(server.pid)} fds")

    cpu0 = proc_cpu_s(server.pid)
    t_go = time.monotonic()
    events["go"].set()
    got = list(gather("rdzv"))
    cpu1 = proc_cpu_s(server.pid)
    rdzv_ok = sum(g[0] for g in got)
    rendezvous_s = max(g[1] for g in got) - t_go
    log(f"{rdzv_ok}/{n} finished the rendezvous in {rendezvous_s:.3f} s, server CPU "
        f"{cpu1 - cpu0:.3f} s, {server_fds(server.pid)} fds")

    cpu_per_s = rss = keepalives_per_s = 0.0
    if args.steady > 0 and rdzv_ok == n:
        time.sleep(min(max(1.0, args.heartbeat), remaining("warming up keep-alives")))
        k0, c0, w0 = sum(c.value for c in counters), proc_cpu_s(server.pid), time.monotonic()
        if remaining("starting the steady window") < args.steady:
            raise Failure(f"--timeout {args.timeout:g} s leaves no room for --steady "
                          f"{args.steady:g} s")
        time.sleep(args.steady)
        k1, c1, w1 = sum(c.value for c in counters), proc_cpu_s(server.pid), time.monotonic()
        cpu_per_s, keepalives_per_s = (c1 - c0) / (w1 - w0), (k1 - k0) / (w1 - w0)
    rss = proc_rss_mib(server.pid)
    if args.steady > 0:
        log(f"steady {args.steady:g} s: server CPU {cpu_per_s:.4f} s/s, RSS {rss:.1f} MiB, "
            f"{server_fds(server.pid)} fds, {keepalives_per_s:.1f} keep-alives/s")

    events["stop"].set()
    errors = 0
    for (errs,) in gather("end"):
        errors += errs
    stop_server.set()

    print(f"tcpstore clients={n} connect_s={connect_s:.4f} rendezvous_s={rendezvous_s:.4f} "
          f"server_cpu_rdzv_s={cpu1 - cpu0:.4f} server_cpu_per_s={cpu_per_s:.4f} "
          f"server_rss_mib={rss:.3f} server_rss_idle_mib={rss_idle:.3f} "
          f"keepalives_per_s={keepalives_per_s:.3f} errors={errors}", flush=True)
    if rdzv_ok != n or errors:
        log(f"FAILED: {rdzv_ok}/{n} clients completed the rendezvous, {errors} errors")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
