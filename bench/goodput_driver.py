"""Driver of bench/goodput.sh (see there): training for --duration seconds while a training
process is SIGKILLed every --kill_every seconds (at a random moment of each period), for
Baton and for torchrun, each also run undisturbed for the same time. Goodput = the steps the
job stands at when the time is up (its net progress: steps redone after a restore count
once) / the steps the same system's undisturbed run made in the same time (Baton without
snapshots, torchrun without checkpoints)."""
import argparse
import glob
import json
import os
import random
import signal
import statistics
import subprocess
import tempfile
import time

import recovery_driver as rd


def start_baton(args, tmp):
    """rd.start_cluster, the workers' snapshot root under --snapshot_root if given."""
    return rd.start_cluster(args, tmp, lambda w: ["--metrics_listen="] + (
        [] if not args.snapshot_root else
        ["--snapshot_root=" + os.path.join(args.snapshot_root, os.path.basename(tmp), w)]))


def kill_times(t0, args, rng):
    """One kill at a random moment of each kill_every-second period after t0."""
    out, start = [], t0
    while start + args.kill_every <= t0 + args.duration:
        out.append(start + rng.uniform(0, args.kill_every))
        start += args.kill_every
    return out


def run_baton(args, baton, name, tmp, snapshot_every, rng):
    ckpt = os.path.join(tmp, name + "-ckpt")
    os.makedirs(ckpt)
    job_file = os.path.join(tmp, name + ".yaml")
    with open(job_file, "w") as f:
        f.write(f"""name: {name}
trainer: {{model: mlp, dataset: mnist, data_dir: {args.data_dir}, batch_size: 64, lr: 0.05, momentum: 0.9, seed: 1, hidden: [512, 512], log_every: 10, threads: 1, checkpoint_every: {args.checkpoint_every}, snapshot_every: {snapshot_every}}}
workers: {{min: 2}}
budget: {{max_steps: 100000000}}
checkpoint_dir: {ckpt}
restart_policy: {{max_user_restarts: 1000, backoff_initial: 0s}}
""")
    job = baton("submit", job_file).strip()
    describe = lambda: json.loads(baton("describe", job, "-o", "json"))
    steps = lambda d: int(d.get("result", {}).get("steps", 0))
    rd.wait_for(lambda: steps(describe()) > 0, 120, "the first step of " + name)
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
    baton("cancel", job)
    restarts = sum(int(d.get("restarts", {}).get(k, 0)) for k in ("infra", "user", "stall"))
    # The trainer's own account of its snapshots (size, cost, interval), from rank 0's log.
    lines = []
    for path in sorted(glob.glob(os.path.join(tmp, "w?", "jobs", job, "gen-*", "rank-0",
                                              "stdout.log"))):
        lines += [l.strip() for l in open(path) if l.startswith("in-memory snapshot:")]
    return dict(steps=steps(d), kills=len(kills), restarts=restarts, snapshot_log=lines[-3:])


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
    os.killpg(agent.pid, signal.SIGTERM)
    try:
        agent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
    return dict(steps=steps, kills=len(kills))


def spread(values):
    """min / median / max of a list, as text."""
    v = sorted(values)
    return "%.3f / %.3f / %.3f" % (v[0], statistics.median(v), v[-1])


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
    args = p.parse_args()
    rng = random.Random(args.seed)
    print("%.0f s of training, a process SIGKILLed every %.0f s (random moment), %d round(s), "
          "seed %d" % (args.duration, args.kill_every, args.repeats, args.seed), flush=True)
    intervals = [int(s) for s in args.torchrun_intervals.split(",")]
    g_baton, g_torch, useful = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            base = os.path.join(tmp, "baton-%d" % r)
            procs, baton = start_baton(args, base)
            try:
                ideal = run_baton(args, baton, "ideal", base, -1, None)
                print("round %d: baton undisturbed, no snapshots: %d steps" % (r, ideal["steps"]),
                      flush=True)
                if r == 0:
                    snap = run_baton(args, baton, "snapshots", base, 0, None)
                    print("round %d: baton undisturbed, snapshots (default): %d steps (%.3f of "
                          "the above)" % (r, snap["steps"], snap["steps"] / ideal["steps"]),
                          flush=True)
                    for line in snap["snapshot_log"]:
                        print("  rank 0: " + line, flush=True)
                hit = run_baton(args, baton, "killed", base, 0, rng)
                print("round %d: baton, %d kills (%d restarts): %d steps" % (
                    r, hit["kills"], hit["restarts"], hit["steps"]), flush=True)
            finally:
                rd.stop(procs)
            t_ideal = run_torchrun(args, "t-ideal-%d" % r, tmp, 10 ** 9, None)
            print("round %d: torchrun undisturbed, no checkpoints: %d steps"
                  % (r, t_ideal["steps"]), flush=True)
            t_runs = {}
            for c in intervals:
                t_runs[c] = run_torchrun(args, "t-%d-%d" % (c, r), tmp, c, rng)
                print("round %d: torchrun, checkpoint every %d steps, %d kills: %d steps"
                      % (r, c, t_runs[c]["kills"], t_runs[c]["steps"]), flush=True)
            best_c = max(t_runs, key=lambda c: t_runs[c]["steps"])
            g_baton.append(hit["steps"] / ideal["steps"])
            g_torch.append(t_runs[best_c]["steps"] / t_ideal["steps"])
            useful.append(hit["steps"] / t_runs[best_c]["steps"])
            print("round %d: goodput baton %.3f (%d / %d steps); torchrun %.3f at its best "
                  "interval (%d steps: %d / %d)" % (r, g_baton[-1], hit["steps"], ideal["steps"],
                                                    g_torch[-1], best_c, t_runs[best_c]["steps"],
                                                    t_ideal["steps"]), flush=True)
    print("goodput (min / median / max over %d round(s)): baton %s; torchrun %s"
          % (args.repeats, spread(g_baton), spread(g_torch)))
    print("useful steps in the same time, baton / torchrun best: %s" % spread(useful))
    print("goodput_baton=%.3f goodput_torchrun=%.3f"
          % (statistics.median(g_baton), statistics.median(g_torch)))


if __name__ == "__main__":
    main()
