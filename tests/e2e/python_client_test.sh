#!/usr/bin/env bash
# baton.client, the Python client, against a real coordinator (TLS, bearer tokens: the
# admin context of lib.sh's BATON_CONFIG) and two workers, with /usr/bin/python3 and the
# package built by //client/python:package: version and workers; a built-in-trainer MNIST
# job submitted from a job file (relative paths resolved against it), watched to
# SUCCEEDED with its events and metric points (steps increasing), waited for, its logs
# read; a second job (a dict) cancelled once RUNNING; a bad token, an unknown job and an
# invalid spec raise the client's exceptions; a watch resumes across a coordinator restart
# (SIGKILL, then the same port and state).
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster

cat >"$TMP/job.yaml" <<YAML
name: python-client
trainer: {model: mlp, dataset: mnist, data_dir: mnist, batch_size: 32, hidden: [64], log_every: 5, threads: 1}
workers: {min: 2}
checkpoint_dir: ckpt
budget: {max_steps: 1000}
YAML

PYTHONPATH=$RUNFILES/client/python/package "$PY" -B - "$TMP" <<'PY' || fail "the Python client script failed"
import os
import signal
import sys
import time

from baton import client as bc

signal.alarm(240)  # a hung stream fails the test instead of the Bazel timeout
tmp = sys.argv[1]


def poll(what, predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


c = bc.Client()
print("connection:", c.connection)
assert not c.connection.insecure and c.connection.token, c.connection

v = c.version()
print("version:", v.version, v.protocol_version, v.min_worker_protocol_version)
assert v.version and 0 < v.min_worker_protocol_version <= v.protocol_version, v
ready = [w for w in c.workers() if w.state == bc.WORKER_STATE_READY]
assert len(ready) == 2, c.workers()

# 1. A job file, watched to the end.
job = c.submit(os.path.join(tmp, "job.yaml"), overrides={"budget.max_steps": 60})
print("submitted", job.id)
assert job.spec.trainer.data_dir == os.path.join(tmp, "mnist"), job.spec.trainer.data_dir
assert job.spec.checkpoint_dir == os.path.join(tmp, "ckpt"), job.spec.checkpoint_dir
states, reasons, steps = [], [], []
for update in c.watch(job.id):
    kind = update.WhichOneof("update")
    if kind == "snapshot":
        states.append(bc.JobState.Name(update.snapshot.state))
    elif kind == "event":
        reasons.append(update.event.reason)
    elif update.metric.rank == 0:
        steps.append(update.metric.step)
        assert "loss" in update.metric.values, update.metric
print("states", states, "\nevents", reasons, "\nrank 0 steps", steps)
assert states[-1] == "JOB_STATE_SUCCEEDED", states
assert "Submitted" in reasons and len(reasons) >= 3, reasons
assert len(steps) >= 2 and steps == sorted(set(steps)) and steps[-1] == 60, steps

done = c.wait(job.id, timeout=30)
assert done.state == bc.JOB_STATE_SUCCEEDED and done.result.steps == 60, done
assert len(done.events) == len(reasons), (len(done.events), len(reasons))

lines = list(c.logs(job.id))
assert lines and {l.rank for l in lines} == {0, 1}, [l.text for l in lines[:5]]
assert all(l.rank == 1 for l in c.logs(job.id, rank=1))
seqs = [l.seq for l in lines]
assert seqs == sorted(seqs), seqs
print("%d log lines, e.g. %r" % (len(lines), lines[0].text))
list(c.logs(job.id, tail=3, since=__import__("datetime").timedelta(hours=1)))

# 2. A dict spec, cancelled once running.
spec = {"name": "python-cancel",
        "trainer": {"model": "mlp", "dataset": "mnist", "data_dir": os.path.join(tmp, "mnist"),
                    "batch_size": 32, "hidden": [64], "threads": 1},
        "workers": {"min": 2},
        "budget": {"max_steps": 1000000}}
second = c.submit(spec, request_id="python-client-test-2")
assert c.submit(spec, request_id="python-client-test-2").id == second.id
poll("RUNNING", lambda: c.get(second.id).state == bc.JOB_STATE_RUNNING)
c.cancel(second.id, reason="python client test")
final = c.wait(second.id, timeout=60)
assert final.state == bc.JOB_STATE_CANCELLED, final
try:
    c.cancel(second.id)
    raise AssertionError("cancelling a cancelled job succeeded")
except bc.FailedPrecondition as e:
    print("cancel again:", e)
assert [j.id for j in c.jobs(states="cancelled")] == [second.id]
assert [j.id for j in c.jobs()] == [second.id, job.id]

# 3. Errors.
try:
    bc.Client(token="not-a-token").get(job.id)
    raise AssertionError("a bad token was accepted")
except bc.Unauthenticated as e:
    assert isinstance(e, bc.AuthError) and e.code == "UNAUTHENTICATED", e
    print("bad token:", e)
try:
    c.get("j-999999")
    raise AssertionError("an unknown job was found")
except bc.NotFound as e:
    print("unknown job:", e)
try:
    c.submit(spec, overrides={"workers.min": 0})
    raise AssertionError("an invalid spec was accepted")
except bc.InvalidArgument as e:
    assert e.field.startswith("workers"), (e.field, str(e))
    print("invalid spec:", e)
c.close()
print("python client: all checks passed")
PY

# 4. A watch outlives a coordinator restart: it resumes after the last seq it delivered,
# sees the job re-attach and ends with it, every event once.
cat >"$TMP/long.yaml" <<YAML
name: outlives-coordinator
command: {argv: ["/bin/sh", "-c", "while [ ! -e $TMP/release ]; do sleep 0.05; done"]}
workers: {min: 2}
YAML
PYTHONPATH=$RUNFILES/client/python/package "$PY" -B - "$TMP" >"$TMP/watcher.log" 2>&1 <<'PY' &
import os
import signal
import sys

from baton import client as bc

signal.alarm(120)
tmp = sys.argv[1]
c = bc.Client(retries=200, max_backoff=0.25)  # tolerates ~50 s without a coordinator
job = c.submit(os.path.join(tmp, "long.yaml"))
with open(os.path.join(tmp, "long.id"), "w") as f:
    f.write(job.id)
seqs, reasons, states = [], [], []
for update in c.watch(job.id):
    if update.HasField("snapshot"):
        states.append(bc.JobState.Name(update.snapshot.state))
        if update.snapshot.state == bc.JOB_STATE_RUNNING:
            open(os.path.join(tmp, "watch.running"), "w").close()
    else:
        seqs.append(update.seq)
        reasons.append(update.event.reason)
        if update.event.reason == "Reattached":  # the test lets the job finish now
            open(os.path.join(tmp, "watch.reattached"), "w").close()
print("states", states, "\nevents", list(zip(seqs, reasons)))
assert seqs == sorted(set(seqs)), "an event came twice or out of order: %s" % seqs
assert reasons.count("Reattached") >= 1, reasons
assert states[-1] == "JOB_STATE_SUCCEEDED", states
assert [e.reason for e in c.get(job.id).events] == reasons, "an event was missed"
print("watch resumed across the restart")
PY
WATCHER=$!
EXTRA_PIDS+=("$WATCHER")
wait_for 60 test -e "$TMP/watch.running"
kill -KILL "$COORDINATOR_PID"
wait "$COORDINATOR_PID" 2>/dev/null || true
start_coordinator "$COORDINATOR_PORT"
# The watch sees the re-attachment live, from the new coordinator, before the job ends.
wait_for 60 test -e "$TMP/watch.reattached"
touch "$TMP/release"
wait "$WATCHER" || { cat "$TMP/watcher.log"; fail "the watch did not survive the restart"; }
cat "$TMP/watcher.log"
echo "PASS"
