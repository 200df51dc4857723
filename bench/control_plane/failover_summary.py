#!/usr/bin/env python3
"""The tables of FAILOVER=1 bench/control_plane/run.sh (failover.sh) from its raw lines.

  failover_summary.py RESULTS

Per N: today's restart path and each election ttl's failover, min/median/max of each
measure; then the steady state on SQLite and on etcd with the ratios of their medians;
then the issue's targets, met or missed.
"""
import collections
import statistics
import sys

FAILOVER = [
    ("kill -> a replica SERVING (leader_s)", "leader_s", "%.3f"),
    ("kill -> every worker re-registered (reattach_s)", "reattach_s", "%.3f"),
    ("kill -> last Reattached event, coordinator (s)", "reattached_event_s", "%.3f"),
    ("kill -> first worker re-registered (s)", "reattach_first_s", "%.3f"),
    ("kill -> half the workers re-registered (s)", "reattach_p50_s", "%.3f"),
    ("log: kill -> new leader won the election (s)", "leading_s", "%.3f"),
    ("log: kill -> coordinator listening (s)", "listening_s", "%.3f"),
    ("SERVING -> every worker re-registered (s)", "reconnect_s", "%.3f"),
    ("restarted jobs (want 0)", "restarted_jobs", "%d"),
    ("jobs re-attached", "reattached_jobs", "%d"),
    ("workers' election retries (200 ms)", "election_retries", "%d"),
    ("etcd proposals (writes), kill -> every job re-attached", "etcd_proposals_failover", "%d"),
    ("etcd MiB received, kill -> every job re-attached", "etcd_received_mib_failover", "%.1f"),
    ("submit -> every job RUNNING before the kill (s)", "submit_to_running_s", "%.3f"),
]
STEADY = [
    ("submit -> RUNNING (s)", "submit_to_running_s", "%.3f"),
    ("submit -> last StartAssignment (s)", "submit_to_last_start_s", "%.3f"),
    ("coordinator CPU s/s", "coord_cpu_per_s", "%.4f"),
    ("coordinator RSS MiB", "coord_rss_mib", "%.1f"),
    ("store transactions/s (coordinator)", "store_commits_per_s", "%.2f"),
    ("etcd proposals committed/s", "etcd_proposals_per_s", "%.2f"),
    ("etcd puts/s", "etcd_puts_per_s", "%.2f"),
    ("etcd KiB received/s", "etcd_received_kib_per_s", "%.1f"),
    ("etcd CPU s/s", "etcd_cpu_per_s", "%.4f"),
    ("watch latency p50 (ms)", "watch_latency_p50_ms", "%.1f"),
    ("last heartbeat -> next generation RUNNING (s)", "restart_s", "%.3f"),
]


def parse(path):
    runs = []
    for line in open(path):
        fields = line.split()
        if not fields or fields[0] != "result":
            continue
        kv = {}
        for f in fields[1:]:
            k, _, v = f.partition("=")
            try:
                kv[k] = float(v)
            except ValueError:
                kv[k] = v
        runs.append(kv)
    return runs


def values(runs, key):
    return sorted(r[key] for r in runs if isinstance(r.get(key), float) and r[key] >= 0)


def med(runs, key):
    v = values(runs, key)
    return statistics.median(v) if v else None


def row(label, runs, key, fmt):
    v = values(runs, key)
    if v:
        print("| %s | %s | %s | %s |" % (label, fmt % v[0], fmt % statistics.median(v), fmt % v[-1]))


def kind(run):
    jobs = int(run.get("jobs", 1))
    where = "%d jobs of %d workers, " % (jobs, int(run["workers"]) // jobs) if jobs > 1 else ""
    if run.get("restart") == 1:
        return where + "restart: one SQLite coordinator, restarted at once"
    return where + "failover: 3 replicas on etcd, --election_ttl=%gs" % run.get("election_ttl_s", 0)


def main():
    runs = parse(sys.argv[1])
    failovers = collections.defaultdict(list)
    steady = collections.defaultdict(list)
    for r in runs:
        if r.get("failover") == 1:
            if r.get("ended") == "SUCCEEDED" and r.get("leader_s", -1) >= 0:
                r["reconnect_s"] = r["reattach_s"] - r["leader_s"]
            failovers[(int(r["workers"]), kind(r))].append(r)
        else:
            steady[(int(r["workers"]), r.get("etcd") == 1)].append(r)
    for (n, k), rs in sorted(failovers.items()):
        ok = sum(1 for r in rs if r.get("ended") == "SUCCEEDED")
        print("\nN = %d, %s (%d runs, %d complete)" % (n, k, len(rs), ok))
        print("| | min | median | max |\n|---|---|---|---|")
        for label, key, fmt in FAILOVER:
            row(label, rs, key, fmt)
    for n in sorted({n for n, _ in steady}):
        sq, et = steady[(n, False)], steady[(n, True)]
        print("\nN = %d steady state: SQLite (%d runs) vs etcd, one replica (%d runs), medians"
              % (n, len(sq), len(et)))
        print("| | SQLite | etcd | etcd / SQLite |\n|---|---|---|---|")
        for label, key, fmt in STEADY:
            a, b = med(sq, key), med(et, key)
            if a is None and b is None:
                continue
            ratio = "%.2f" % (b / a) if a and b is not None else "-"
            print("| %s | %s | %s | %s |" % (label, "-" if a is None else fmt % a,
                                             "-" if b is None else fmt % b, ratio))
    print("\nTargets (medians; done = every worker re-registered and every job re-attached):")
    for (n, k), rs in sorted(failovers.items()):
        limit = 3.0 if n <= 100 else 5.0 if n <= 1000 else None
        done = [max(r.get("reattach_s", -1), r.get("reattached_event_s", -1)) for r in rs
                if r.get("ended") == "SUCCEEDED"]
        restarted = sum(int(r.get("restarted_jobs", 0)) for r in rs)
        if done and limit:
            m = statistics.median(done)
            print("  N=%d %s: %.3f s vs <= %.0f s: %s; restarted jobs %d" %
                  (n, k, m, limit, "met" if m <= limit else "MISSED", restarted))
    for n in sorted({n for n, _ in steady}):
        sq, et = steady[(n, False)], steady[(n, True)]
        for label, key in (("submit -> RUNNING", "submit_to_running_s"),
                           ("coordinator CPU", "coord_cpu_per_s")):
            a, b = med(sq, key), med(et, key)
            if a and b is not None:
                print("  N=%d steady %s etcd/SQLite %.2fx vs <= 2x: %s" %
                      (n, label, b / a, "met" if b / a <= 2 else "MISSED"))


if __name__ == "__main__":
    main()
