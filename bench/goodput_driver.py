"""Driver of bench/goodput.sh (see there): training for --duration seconds while a training
process is SIGKILLed every --kill_every seconds (at a random moment of each period), for
Baton and for torchrun, each also run undisturbed for the same time. Goodput = the steps the
job stands at when the time is up (its net progress: steps redone after a restore count
once) / the steps the same system's undisturbed run made in the same time (training alone:
Baton without snapshots or checkpoints, torchrun without checkpoints). Runs on a shared
machine drift by 10-30 % from one to the next, so each killed run is also measured against
its own steady pace (StepSampler.steady_goodput: the median rate of its 2-second windows),
which such drifts do not move."""
import argparse
import glob
import json
import os
import random
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time

import recovery_driver as rd


def start_baton(args, tmp):
    """rd.start_cluster, the workers' snapshot root under --snapshot_root if given."""
    return rd.start_cluster(args, tmp, lambda w: ["--metrics_listen="] + (
        [] if not args.snapshot_root else
        ["--snapshot_root=" + os.path.join(args.snapshot_root, os.path.basename(tmp), w)]))


class StepSampler:
    """Samples step() (the job's newest step, read from files: no process is started) every
    0.25 s on a thread of its own, from start() to stop()."""

    def __init__(self, step):
        self.step, self.samples, self._stop = step, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.25):
            try:
                self.samples.append((time.time(), self.step()))
            except (OSError, ValueError):
                pass  # A file being rotated or written.

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def steady_rate(self):
        """The median rate (steps/s) of the sampled 2-second windows; nan if too few."""
        s = self.samples
        if len(s) < 9:
            return float("nan")
        return statistics.median(
            (s[i + 8][1] - s[i][1]) / (s[i + 8][0] - s[i][0]) for i in range(len(s) - 8))

    def steady_goodput(self):
        """Net steps over the sampled time / (the median rate of its 2-second windows x that
        time): the run against its own steady pace, which slow drifts of the machine's
        speed between runs do not move (a dip of a recovery is a minority of windows)."""
        s = self.samples
        if len(s) < 9:
            return float("nan")
        return (s[-1][1] - s[0][1]) / (self.steady_rate() * (s[-1][0] - s[0][0]))


def tail_step(path, pattern):
    """The last match of `pattern` (group 1: a step) in the last 4 KiB of `path`; 0 if none."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 4096))
        found = re.findall(pattern, f.read().decode(errors="ignore"))
    return int(found[-1]) if found else 0


def kill_times(t0, args, rng):
    """One kill at a random moment of each kill_every-second period after t0."""
    out, start = [], t0
    while start + args.kill_every <= t0 + args.duration:
        out.append(start + rng.uniform(0, args.kill_every))
        start += args.kill_every
    return out


def run_baton(args, baton, name, tmp, snapshot_every, rng, checkpoint_every=None):
    """One job of `name` for args.duration seconds (killed by `rng` unless None); disk
    checkpoints every args.checkpoint_every steps unless `checkpoint_every` says otherwise
    (0: none)."""
    if checkpoint_every is None:
        checkpoint_every = args.checkpoint_every
    ckpt = os.path.join(tmp, name + "-ckpt")
    os.makedirs(ckpt)
    job_file = os.path.join(tmp, name + ".yaml")
    with open(job_file, "w") as f:
        f.write(f"""name: {name}
trainer: {{model: mlp, dataset: mnist, data_dir: {args.data_dir}, batch_size: 64, lr: 0.05, momentum: 0.9, seed: 1, hidden: [512, 512], log_every: 10, threads: 1, checkpoint_every: {checkpoint_every}, snapshot_every: {snapshot_every}}}
workers: {{min: 2}}
budget: {{max_steps: 100000000}}
checkpoint_dir: {ckpt}
restart_policy: {{max_user_restarts: 1000, backoff_initial: 0s}}
""")
    job = baton("submit", job_file).strip()
    describe = lambda: json.loads(baton("describe", job, "-o", "json"))
    steps = lambda d: int(d.get("result", {}).get("steps", 0))
    rd.wait_for(lambda: steps(describe()) > 0, 120, "the first step of " + name)

    def newest_step():  # Rank 0's newest logged step, in the newest generation.
        logs = glob.glob(os.path.join(tmp, "w?", "jobs", job, "gen-*", "rank-0", "stdout.log"))
        newest = max(logs, key=lambda p: int(re.search(r"gen-(\d+)", p).group(1)))
        return tail_step(newest, r"(?m)^step (\d+)/")

    sampler = StepSampler(newest_step)
    sampler.start()
    t0 = time.time()
    kills = kill_times(t0, args, rng) if rng is not None else []
    for at in kills:
        time.sleep(max(0.0, at - time.time()))
        d = describe()
        ranks = [r for r in d.get("ranks", []) if r.get("pid")]
        if ranks:
            os.kill(int(rng.choice(ranks)["pid"]), signal.SIGKILL)
    time.sleep(max(0.0, t0 + args.duration - time.time()))
    d = describe()
    sampler.stop()
    baton("cancel", job)
    restarts = sum(int(d.get("restarts", {}).get(k, 0)) for k in ("infra", "user", "stall"))
    # The trainer's own account of its snapshots (size, cost, interval), from rank 0's log.
    lines = []
    for path in sorted(glob.glob(os.path.join(tmp, "w?", "jobs", job, "gen-*", "rank-0",
                                              "stdout.log"))):
        lines += [l.strip() for l in open(path) if l.startswith("in-memory snapshot:")]
    return dict(steps=steps(d), kills=len(kills), restarts=restarts, snapshot_log=lines[-3:],
                steady=sampler.steady_goodput(), rate=sampler.steady_rate())


def run_torchrun(args, name, tmp, checkpoint_every, rng):
    ckpt = os.path.join(tmp, name)
    os.makedirs(ckpt)
    events = os.path.join(tmp, name + ".jsonl")
    cmd = ["/usr/bin/torchrun", "--nnodes=1", "--nproc_per_node=2", "--max_restarts=1000",
           "--monitor_interval=0.1", "--rdzv_backend=c10d",
           "--rdzv_endpoint=127.0.0.1:%d" % rd.free_port(), "--redirects", "9:1", "--tee", "9:1",
           os.path.join(args.bench_dir, "goodput_baseline.py"), "--data_dir=" + args.data_dir,
           "--checkpoint_dir=" + ckpt, "--events=" + events,
           "--checkpoint_every=%d" % checkpoint_every]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    agent = subprocess.Popen(cmd, env=env, stdout=open(os.path.join(tmp, name + ".log"), "w"),
                             stderr=subprocess.STDOUT, start_new_session=True)

    def last_step():
        if not os.path.exists(events):
            return 0
        lines = open(events).read().splitlines()
        for line in reversed(lines):
            try:
                return json.loads(line)["step"]
            except ValueError:
                continue  # A line being written.
        return 0

    rd.wait_for(lambda: last_step() > 0, 120, "the first step of " + name)
    sampler = StepSampler(lambda: tail_step(events, r'"step": ?(\d+)'))
    sampler.start()
    t0 = time.time()
    kills = kill_times(t0, args, rng) if rng is not None else []
    for at in kills:
        time.sleep(max(0.0, at - time.time()))
        children = subprocess.run(["pgrep", "-P", str(agent.pid)], capture_output=True,
                                  text=True).stdout.split()
        if children:
            os.kill(int(rng.choice(children)), signal.SIGKILL)
    time.sleep(max(0.0, t0 + args.duration - time.time()))
    steps = last_step()
    sampler.stop()
    os.killpg(agent.pid, signal.SIGTERM)
    try:
        agent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
    return dict(steps=steps, kills=len(kills), steady=sampler.steady_goodput())


def spread(values):
    """min / median / max of a list, as text."""
    v = sorted(values)
    return "%.3f / %.3f / %.3f" % (v[0], statistics.median(v), v[-1])


def overhead(args):
    """--overhead: what in-memory snapshots and the disk checkpoints written from them cost
    undisturbed training, against training alone (no snapshots, no checkpoints): the three
    ways each --duration seconds, in a rotating order, --repeats rounds on one cluster.
    Each way's steps in the time and its steady pace (the median rate of its 2-second
    windows, which a burst of the machine's noise moves less), as ratios to training alone
    in the same round."""
    ways = [("alone", -1, 0), ("snapshots", 0, 0), ("snapshots+checkpoints", 0, None)]
    ratios = {name: [] for name, _, _ in ways[1:]}
    pace = {name: [] for name, _, _ in ways[1:]}
    with tempfile.TemporaryDirectory() as parent:
        tmp = os.path.join(parent, "cluster")
        procs, baton = start_baton(args, tmp)
        try:
            for r in range(args.repeats):
                runs = {}
                for i in range(len(ways)):
                    name, snapshot_every, checkpoint_every = ways[(r + i) % len(ways)]
                    run = run_baton(args, baton, "%s-%d" % (name.replace("+", "-"), r), tmp,
                                    snapshot_every, None, checkpoint_every=checkpoint_every)
                    runs[name] = run
                    print("round %d: %s: %d steps, steady pace %.1f steps/s%s" % (
                        r, name, run["steps"], run["rate"],
                        "".join("\n  rank 0: " + l for l in run["snapshot_log"])), flush=True)
                for name in ratios:
                    ratios[name].append(runs[name]["steps"] / runs["alone"]["steps"])
                    pace[name].append(runs[name]["rate"] / runs["alone"]["rate"])
                print("round %d: against alone (steps, pace): %s" % (r, ", ".join(
                    "%s %.3f %.3f" % (n, ratios[n][-1], pace[n][-1]) for n in ratios)),
                      flush=True)
        finally:
            rd.stop(procs)
    for name in ratios:
        print("%s / alone (min / median / max over %d round(s)): steps %s; steady pace %s"
              % (name, args.repeats, spread(ratios[name]), spread(pace[name])))
    print("overhead_snapshots=%.3f overhead_snapshots_checkpoints=%.3f (steady pace, medians)"
          % tuple(1 - statistics.median(pace[n]) for n in pace))


def main():
    p = argparse.ArgumentParser()
    for flag in ("coordinator", "worker", "trainer", "baton", "data_dir", "bench_dir"):
        p.add_argument("--" + flag, required=True)
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--kill_every", type=float, default=30)
    p.add_argument("--checkpoint_every", type=int, default=500,
                   help="Baton's disk checkpoints (the durable copy)")
    p.add_argument("--torchrun_intervals", default="20,100,500",
                   help="torchrun checkpoint intervals tried; the best is compared")
    p.add_argument("--repeats", type=int, default=1,
                   help="rounds; each runs every configuration once, undisturbed next to "
                        "killed, so that a round's goodput compares neighbouring runs")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--snapshot_root", default="",
                   help="a directory (e.g. a tmpfs mount) for the workers' --snapshot_root")
    p.add_argument("--overhead", action="store_true",
                   help="measure the undisturbed cost of snapshots and checkpoints instead "
                        "(no kills, no torchrun)")
    args = p.parse_args()
    if args.overhead:
        overhead(args)
        return
    rng = random.Random(args.seed)
    print("%.0f s of training, a process SIGKILLed every %.0f s (random moment), %d round(s), "
          "seed %d" % (args.duration, args.kill_every, args.repeats, args.seed), flush=True)
    intervals = [int(s) for s in args.torchrun_intervals.split(",")]
    g_baton, g_torch, useful, s_baton, s_torch = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            base = os.path.join(tmp, "baton-%d" % r)
            procs, baton = start_baton(args, base)
            try:
                # Training alone, as torchrun's reference: no snapshots, no checkpoints.
                ideal = run_baton(args, baton, "ideal", base, -1, None, checkpoint_every=0)
                print("round %d: baton undisturbed, no snapshots or checkpoints: %d steps"
                      % (r, ideal["steps"]), flush=True)
                if r == 0:
                    snap = run_baton(args, baton, "snapshots", base, 0, None)
                    print("round %d: baton undisturbed, snapshots (default): %d steps (%.3f of "
                          "the above)" % (r, snap["steps"], snap["steps"] / ideal["steps"]),
                          flush=True)
                    for line in snap["snapshot_log"]:
                        print("  rank 0: " + line, flush=True)
                hit = run_baton(args, baton, "killed", base, 0, rng)
                print("round %d: baton, %d kills (%d restarts): %d steps; against its own "
                      "steady pace %.3f (undisturbed: %.3f)" % (
                          r, hit["kills"], hit["restarts"], hit["steps"], hit["steady"],
                          ideal["steady"]), flush=True)
            finally:
                rd.stop(procs)
            t_ideal = run_torchrun(args, "t-ideal-%d" % r, tmp, 10 ** 9, None)
            print("round %d: torchrun undisturbed, no checkpoints: %d steps"
                  % (r, t_ideal["steps"]), flush=True)
            t_runs = {}
            for c in intervals:
                t_runs[c] = run_torchrun(args, "t-%d-%d" % (c, r), tmp, c, rng)
                print("round %d: torchrun, checkpoint every %d steps, %d kills: %d steps; "
                      "against its own steady pace %.3f" % (r, c, t_runs[c]["kills"],
                                                            t_runs[c]["steps"],
                                                            t_runs[c]["steady"]), flush=True)
            best_c = max(t_runs, key=lambda c: t_runs[c]["steps"])
            g_baton.append(hit["steps"] / ideal["steps"])
            g_torch.append(t_runs[best_c]["steps"] / t_ideal["steps"])
            s_baton.append(hit["steady"])
            s_torch.append(max(t["steady"] for t in t_runs.values()))
            useful.append(hit["steps"] / t_runs[best_c]["steps"])
            print("round %d: goodput baton %.3f (%d / %d steps); torchrun %.3f at its best "
                  "interval (%d steps: %d / %d)" % (r, g_baton[-1], hit["steps"], ideal["steps"],
                                                    g_torch[-1], best_c, t_runs[best_c]["steps"],
                                                    t_ideal["steps"]), flush=True)
    print("goodput (min / median / max over %d round(s)): baton %s; torchrun %s"
          % (args.repeats, spread(g_baton), spread(g_torch)))
    print("goodput against the run's own steady pace (min / median / max): baton %s; "
          "torchrun %s (its best interval)" % (spread(s_baton), spread(s_torch)))
    print("useful steps in the same time, baton / torchrun best: %s" % spread(useful))
    print("goodput_baton=%.3f goodput_torchrun=%.3f"
          % (statistics.median(g_baton), statistics.median(g_torch)))


if __name__ == "__main__":
    main()
