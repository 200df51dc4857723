"""Driver of bench/hang_detection.sh: how long a frozen rank (SIGSTOP) goes unnoticed.

Baton: a coordinator and two workers on loopback (recovery_driver.start_cluster), the MLP
784-512-512-10 on MNIST-format data at log_every 1; each round waits for a step past the
last, SIGSTOPs rank 1 and measures the time to the generation's failure (Failure.fail_time,
when the job went RESTARTING), checks that rank 1 is the one named, and waits for the next
generation. Twice: with the learned timeouts (the defaults) and with the fixed 30 s floor
Baton had before (restart_policy stall_floor 30s: the heartbeat silence and every phase's
floor). torchrun: the same model with DDP over gloo (bench/elastic_baseline.py --freeze),
rank 1 SIGSTOPs itself; rank 0 notices when its all-reduce times out (the process group's
timeout: torch's default is 30 min; run here at 30 s, the shortest fixed value that the
slow phases of a real job - checkpoints, evaluation, epoch boundaries - would let one set).
Prints min/median/max per mode and the median step time.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from recovery_driver import free_port, start_cluster, stop, ts, wait_for


def run_baton(args, tmp, rounds, policy):
    procs, baton = start_cluster(args, tmp)
    job_file = os.path.join(tmp, "job.yaml")
    with open(job_file, "w") as f:
        f.write(f"""name: hang
trainer: {{model: mlp, dataset: mnist, data_dir: {args.data_dir}, batch_size: 64, lr: 0.05, momentum: 0.9, seed: 1, hidden: [512, 512], log_every: 1, threads: 1, checkpoint_every: 100}}
workers: {{min: 2}}
budget: {{max_steps: 1000000}}
checkpoint_dir: {os.path.join(tmp, "ckpt")}
restart_policy: {{max_stall_restarts: 100, backoff_initial: 0s{policy}}}
""")
    job = baton("submit", job_file).strip()
    describe = lambda: json.loads(baton("describe", job, "-o", "json"))  # noqa: E731
    results = []
    try:
        target = 0
        for _ in range(rounds):
            target += 300  # steps into the generation: its timeouts are learned

            def ready():
                d = describe()
                steps = int(d.get("result", {}).get("steps", 0))
                return d if d.get("state") == "JOB_STATE_RUNNING" and steps >= target else None
            d = wait_for(ready, 300, "step %d" % target)
            gen = int(d["generation"])
            target = int(d["result"]["steps"])
            pid = [r["pid"] for r in d["ranks"] if r.get("rank", 0) == 1][0]
            t_stop = time.time()
            os.kill(pid, signal.SIGSTOP)

            def failed():
                fs = [f for f in describe().get("restarts", {}).get("failures", [])
                      if int(f["generation"]) == gen]
                return fs[0] if fs else None
            f = wait_for(failed, 120, "the hang of generation %d" % gen)
            if f.get("failure_class") != "FAILURE_CLASS_STALL" or int(f.get("rank", -1)) != 1:
                sys.exit("generation %d: not rank 1's hang: %s" % (gen, f))
            log = ""
            for w in ("w1", "w2"):
                path = os.path.join(tmp, w, "jobs", job, "gen-%d" % gen, "rank-0", "stdout.log")
                if os.path.exists(path):
                    log = open(path).read()
            steps = [float(m.group(1)) / 1000 for m in re.finditer(r"step_ms ([0-9.]+)", log)]
            results.append(dict(detect=ts(f["fail_time"]) - t_stop,
                                step_s=statistics.median(steps[-200:]),
                                evidence=f.get("hang_evidence", "")))
            wait_for(lambda: int(describe()["generation"]) > gen and
                     describe()["state"] == "JOB_STATE_RUNNING", 120, "the next generation")
    finally:
        baton("cancel", job, check=False)
        stop(procs)
    return results


def run_torchrun(args, tmp, rounds, pg_timeout):
    results = []
    for r in range(rounds):
        d = os.path.join(tmp, "round%d" % r)
        ckpt = os.path.join(d, "ckpt")
        os.makedirs(ckpt)
        events = os.path.join(d, "events.jsonl")
        cmd = ["/usr/bin/torchrun", "--nnodes=1", "--nproc_per_node=2", "--max_restarts=0",
               "--monitor_interval=0.1", "--rdzv_backend=c10d",
               "--rdzv_endpoint=127.0.0.1:%d" % free_port(), "--redirects", "9:1", "--tee", "9:1",
               os.path.join(args.bench_dir, "elastic_baseline.py"), "--data_dir=" + args.data_dir,
               "--checkpoint_dir=" + ckpt, "--events=" + events, "--kill_at=300", "--freeze",
               "--pg_timeout=%s" % pg_timeout, "--checkpoint_every=100"]
        env = dict(os.environ, PYTHONPATH=args.bench_dir, OMP_NUM_THREADS="1")
        p = subprocess.Popen(cmd, env=env, stdout=open(os.path.join(d, "torchrun.log"), "w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            def seen(kind):
                if not os.path.exists(events):
                    return None
                ev = [json.loads(l) for l in open(events) if l.strip()]
                return ([e for e in ev if e["event"] == kind] or [None])[0]
            freeze = wait_for(lambda: seen("freeze"), 300, "the freeze")
            timeout = wait_for(lambda: seen("timeout"), 3 * pg_timeout + 60, "the timeout")
            ev = [json.loads(l) for l in open(events) if l.strip()]
            steps = [e["t"] for e in ev if e["event"] == "step"]
            gaps = [b - a for a, b in zip(steps, steps[1:])]
            results.append(dict(detect=timeout["t"] - freeze["t"],
                                step_s=statistics.median(gaps[-200:]), evidence="timeout"))
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return results


def summary(name, results):
    det = sorted(r["detect"] for r in results)
    step = statistics.median(r["step_s"] for r in results)
    print("%-34s SIGSTOP -> detected  min %6.2f  median %6.2f  max %6.2f s   step %.1f ms   %s" % (
        name, det[0], statistics.median(det), det[-1], step * 1000,
        ",".join(sorted(set(r["evidence"] for r in results)))))
    return statistics.median(det)


def main():
    p = argparse.ArgumentParser()
    for flag in ("coordinator", "worker", "trainer", "baton", "data_dir", "bench_dir"):
        p.add_argument("--" + flag, required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--torchrun_timeout", type=float, default=30)
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="baton-hang-")
    learned = run_baton(args, os.path.join(tmp, "learned"), args.repeats, "")
    fixed = run_baton(args, os.path.join(tmp, "fixed"), args.repeats, ", stall_floor: 30s")
    torch = run_torchrun(args, os.path.join(tmp, "torchrun"), args.repeats, args.torchrun_timeout)
    a = summary("Baton, learned timeouts", learned)
    b = summary("Baton, fixed 30 s floor (before)", fixed)
    c = summary("torchrun, gloo timeout %gs" % args.torchrun_timeout, torch)
    print("ratio=%.3f (learned / fixed floor)  ratio_torchrun=%.3f (learned / torchrun)" % (a / b, a / c))


if __name__ == "__main__":
    main()
