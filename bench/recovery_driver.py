"""Driver of bench/recovery_vs_torchrun.sh (see there). Kills one training process per
round, at a random step between two checkpoints, and reports the time from the kill to the
first step completed after recovery, split into phases, and the steps lost.

Rounds are ROUND_CHECKPOINTS checkpoints apart (seconds of training), so that, as with
real failures hours apart, Baton's workers have their warm standby trainers back before
the next kill; the driver checks that on their /metrics before it kills."""
import argparse
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone

CKPT_EVERY = 50
ROUND_CHECKPOINTS = 10


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    sys.exit("timed out waiting for " + what)


def ts(s):
    """RFC 3339 in UTC (protobuf JSON) -> seconds since the epoch."""
    s = s.rstrip("Z")
    frac = ""
    if "." in s:
        s, frac = s.split(".")
    t = datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def kill_steps(rounds, rng):
    # Round r kills at a random step strictly between checkpoints k and k+1, k = 10(r+1).
    return [CKPT_EVERY * ROUND_CHECKPOINTS * (r + 1) + rng.randint(1, CKPT_EVERY - 1)
            for r in range(rounds)]


def start_cluster(args, tmp, worker_flags=lambda w: []):
    """A coordinator and two workers, w1 and w2, on loopback, each with its own work_dir under
    `tmp` (made here), plus worker_flags(name). Plaintext: the measurements are training and
    recovery, not the handshake. Returns (procs, baton): the processes (for stop) and a
    function running the CLI against the cluster, which has both workers READY."""
    os.makedirs(tmp)
    env = dict(os.environ)
    procs = []
    port_file = os.path.join(tmp, "port")
    procs.append(subprocess.Popen(
        [args.coordinator, "--insecure", "--listen=127.0.0.1:0", "--port_file=" + port_file,
         "--state_dir=" + os.path.join(tmp, "state"), "--metrics_listen=", "--stop_grace=2s"],
        stderr=open(os.path.join(tmp, "coordinator.log"), "w")))
    wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 30, "coordinator")
    env["BATON_COORDINATOR"] = "127.0.0.1:" + open(port_file).read().strip()
    env["BATON_INSECURE"] = "1"
    for w in ("w1", "w2"):
        procs.append(subprocess.Popen(
            [args.worker, "--insecure", "--coordinator=" + env["BATON_COORDINATOR"],
             "--work_dir=" + os.path.join(tmp, w),
             "--allowed_paths=" + tmp + "," + os.path.abspath(args.data_dir), "--slots=1",
             "--trainer=" + args.trainer] + worker_flags(w),
            stderr=open(os.path.join(tmp, w + ".log"), "w")))

    def baton(*a, check=True):
        return subprocess.run([args.baton, *a], env=env, capture_output=True, text=True,
                              check=check).stdout

    try:
        wait_for(lambda: baton("workers").count("READY") >= 2, 30, "workers")
    except BaseException:
        stop(procs)  # The caller gets no procs to stop: none may outlive the failed start.
        for name in ("coordinator", "w1", "w2"):  # Why, in the daemons' words.
            with open(os.path.join(tmp, name + ".log")) as f:
                sys.stderr.write("%s.log (last lines):\n%s" % (name, "".join(f.readlines()[-5:])))
        raise
    return procs, baton


def stop(procs):
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)


def run_baton(args, rounds, rng, tmp, rejoin_timeout):
    metrics_port_file = lambda w: os.path.join(tmp, w + ".metrics_port")  # noqa: E731
    procs, baton = start_cluster(args, tmp, lambda w: [
        "--metrics_listen=127.0.0.1:0", "--metrics_port_file=" + metrics_port_file(w),
        # 10s (the default): healthy ranks kept; 0s: every rank restarted.
        "--rejoin_timeout=" + rejoin_timeout])

    def standbys_ready():
        # Every worker has a loaded warm standby trainer.
        for path in map(metrics_port_file, ("w1", "w2")):
            if not os.path.exists(path):
                return False
            url = "http://127.0.0.1:%s/metrics" % open(path).read().strip()
            text = urllib.request.urlopen(url, timeout=5).read().decode()
            ready = [float(l.split()[1]) for l in text.splitlines()
                     if l.startswith('baton_worker_standby_trainers{state="loaded"} ')]
            if not ready or ready[0] < 1:
                return False
        return True

    def rank0_log(job, gen):
        # Generation gen's rank 0 stdout (on whichever worker ran it), or "".
        for w in ("w1", "w2"):
            path = os.path.join(tmp, w, "jobs", job, "gen-%d" % gen, "rank-0", "stdout.log")
            if os.path.exists(path):
                return open(path).read()
        return ""

    def step_times(job, gen):
        # Generation gen's step times in seconds, in order, from rank 0's "step_ms 12.3".
        return [float(m.group(1)) / 1000 for m in re.finditer(r"step_ms ([0-9.]+)", rank0_log(job, gen))]

    def last_logged_step(job, gen):
        # The last step generation gen's rank 0 completed, from its own step log
        # ("step 1234/100000 ..." at log_every 1). Relayed metric points lag it by the
        # window batching, so they would miscount the steps redone after the restore.
        steps = [int(m.group(1)) for m in re.finditer(r"^step (\d+)/", rank0_log(job, gen), re.M)]
        if not steps:
            sys.exit("no step line in generation %d's rank 0 log (see %s)" % (gen, tmp))
        return max(steps)

    job_file = os.path.join(tmp, "job.yaml")
    with open(job_file, "w") as f:
        f.write(f"""name: recovery
trainer: {{model: mlp, dataset: mnist, data_dir: {args.data_dir}, batch_size: 64, lr: 0.05, momentum: 0.9, seed: 1, hidden: [512, 512], log_every: 1, threads: 1, checkpoint_every: {CKPT_EVERY}}}
workers: {{min: 2}}
budget: {{max_steps: 100000}}
checkpoint_dir: {os.path.join(tmp, "ckpt")}
restart_policy: {{max_user_restarts: 100, backoff_initial: 0s}}
""")
    job = baton("submit", job_file).strip()
    results = []
    try:
        for kill_at in kill_steps(rounds, rng):
            def at_target():
                d = json.loads(baton("describe", job, "-o", "json"))
                steps = int(d.get("result", {}).get("steps", 0))
                return d if d.get("state") == "JOB_STATE_RUNNING" and steps >= kill_at else None
            d = wait_for(at_target, 300, "step %d" % kill_at)
            wait_for(standbys_ready, 60, "warm standby trainers")
            d = json.loads(baton("describe", job, "-o", "json"))
            gen = int(d["generation"])
            pid = [r["pid"] for r in d["ranks"] if r.get("rank", 0) == 1][0]
            t_kill = time.time()
            os.kill(pid, signal.SIGKILL)

            def recovered():
                d = json.loads(baton("describe", job, "-o", "json"))
                fs = [f for f in d.get("restarts", {}).get("failures", [])
                      if int(f["generation"]) == gen and "first_step_time" in f]
                return fs[0] if fs else None
            f = wait_for(recovered, 120, "recovery of generation %d" % gen)
            first = ts(f["first_step_time"])
            resumed = int(f["resumed_step"])
            # The duration of generation gen + 1's first step; the rest of RUNNING -> first
            # step is start-up and the restore.
            step_s = wait_for(lambda: step_times(job, gen + 1)[:1], 30,
                              "the first step line of generation %d" % (gen + 1))[0]
            pid0 = [r["pid"] for r in d["ranks"] if r.get("rank", 0) == 0][0]
            now = json.loads(baton("describe", job, "-o", "json"))
            kept = [r["pid"] for r in now["ranks"] if r.get("rank", 0) == 0][0] == pid0
            results.append(dict(
                kept=kept,
                step_s=statistics.median(step_times(job, gen)),
                total=first - t_kill,
                phases=dict(detect=ts(f["fail_time"]) - t_kill,
                            stop=ts(f["stopped_time"]) - ts(f["fail_time"]),
                            rendezvous=ts(f["running_time"]) - ts(f["stopped_time"]),
                            # Standby handoff, data, store connect, checkpoint restore.
                            start_restore=first - ts(f["running_time"]) - step_s,
                            first_step=step_s),
                # Steps completed after the restored checkpoint, trained again.
                lost=last_logged_step(job, gen) - (resumed - 1)))
    finally:
        baton("cancel", job, check=False)
        stop(procs)
    return results


def run_torchrun(args, rounds, rng, tmp, monitor_interval):
    ckpt = os.path.join(tmp, "ckpt")
    os.makedirs(ckpt)
    events = os.path.join(tmp, "events.jsonl")
    kills = kill_steps(rounds, rng)
    cmd = ["/usr/bin/torchrun", "--nnodes=1", "--nproc_per_node=2", "--max_restarts=%d" % rounds,
           "--monitor_interval=%s" % monitor_interval, "--rdzv_backend=c10d",
           "--rdzv_endpoint=127.0.0.1:%d" % free_port(), "--redirects", "9:1", "--tee", "9:1",
           os.path.join(args.bench_dir, "elastic_baseline.py"), "--data_dir=" + args.data_dir,
           "--checkpoint_dir=" + ckpt, "--events=" + events,
           "--kill_at=" + ",".join(map(str, kills)),
           "--max_steps=%d" % (kills[-1] + CKPT_EVERY)]
    env = dict(os.environ, PYTHONPATH=args.bench_dir, OMP_NUM_THREADS="1")
    subprocess.run(cmd, env=env, stdout=open(os.path.join(tmp, "torchrun.log"), "w"),
                   stderr=subprocess.STDOUT, timeout=900)
    ev = [json.loads(l) for l in open(events)]
    results = []
    for r in range(rounds):
        kill = [e for e in ev if e["event"] == "kill" and e["restart"] == r]
        nxt = [e for e in ev if e["restart"] == r + 1]
        if not kill or not nxt:
            sys.exit("torchrun round %d did not recover (see %s)" % (r, tmp))
        t_kill = kill[0]["t"]
        at = {e["event"]: e for e in reversed(nxt)}  # first of each kind
        first = [e for e in nxt if e["event"] == "step"][0]
        steps = [e for e in ev if e["event"] == "step" and e["restart"] == r]
        gaps = [b["t"] - a["t"] for a, b in zip(steps, steps[1:]) if b["step"] == a["step"] + 1]
        results.append(dict(
            step_s=statistics.median(gaps),
            total=first["t"] - t_kill,
            phases=dict(detect_stop_respawn=at["start"]["t"] - t_kill,
                        import_torch=at["imported"]["t"] - at["start"]["t"],
                        rendezvous=at["rendezvous"]["t"] - at["imported"]["t"],
                        restore=at["restored"]["t"] - at["rendezvous"]["t"],
                        first_step=first["t"] - at["restored"]["t"]),
            lost=kill[0]["step"] - (first["step"] - 1)))
    return results


def summary(name, results):
    # Steps recomputed: completed before the kill, trained again after the restore (the steps
    # lost). Wasted seconds: the time from the kill to the first step plus the recomputed
    # steps at the run's median step time.
    tot = sorted(r["total"] for r in results)
    wasted = sorted(r["total"] + r["lost"] * r["step_s"] for r in results)
    print("%-28s kill -> first step: min %.2f  median %.2f  max %.2f s; steps lost (recomputed): "
          "%s; wasted s: min %.2f  median %.2f  max %.2f" % (
              name, tot[0], statistics.median(tot), tot[-1], [r["lost"] for r in results],
              wasted[0], statistics.median(wasted), wasted[-1]))
    if "kept" in results[0]:
        print("%-28s   rank 0 kept (same pid) in %d of %d rounds" % (
            "", sum(r["kept"] for r in results), len(results)))
    for phase in results[0]["phases"]:
        v = [r["phases"][phase] for r in results]
        print("%-28s   %-20s median %.3f s (min %.3f, max %.3f)" % (
            "", phase, statistics.median(v), min(v), max(v)))
    return statistics.median(tot), statistics.median(wasted)


def main():
    p = argparse.ArgumentParser()
    for flag in ("coordinator", "worker", "trainer", "baton", "data_dir", "bench_dir"):
        p.add_argument("--" + flag, required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=int(time.time()))
    args = p.parse_args()
    rng = random.Random(args.seed)
    print("kills at random steps between checkpoints (every %d steps), seed %d, %d repeats"
          % (CKPT_EVERY, args.seed, args.repeats))
    with tempfile.TemporaryDirectory() as tmp:
        kept = run_baton(args, args.repeats, rng, os.path.join(tmp, "baton"), "10s")
        restart = run_baton(args, args.repeats, rng, os.path.join(tmp, "baton-restart"), "0s")
        fast = run_torchrun(args, args.repeats, rng, os.path.join(tmp, "torchrun-0.1"), "0.1")
        slow = run_torchrun(args, args.repeats, rng, os.path.join(tmp, "torchrun-5"), "5")
    b, bw = summary("baton (healthy ranks kept)", kept)
    r, rw = summary("baton (every rank restarted)", restart)
    t1, t1w = summary("torchrun --monitor_interval=0.1", fast)
    t5, t5w = summary("torchrun --monitor_interval=5", slow)
    best, best_w = min(t1, t5), min(t1w, t5w)
    print("ratio baton kept / baton restart (medians, kill -> first step): %.2f" % (b / r))
    print("ratio baton / torchrun best (medians, wasted seconds): %.2f" % (bw / best_w))
    print("ratio baton / torchrun best (medians, kill -> first step): %.2f" % (b / best))
    print("ratio=%.2f" % (b / best))


if __name__ == "__main__":
    main()
