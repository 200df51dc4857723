#!/usr/bin/env bash
# Step profiling end to end: three baton-trainer ranks (shared memory) with --profile_dir,
# a request file (id, steps, start_step) and SIGUSR2 to ranks 0 and 1 before the
# rendezvous; both write their trace of the same steps (rank 2, not asked, writes none), valid Trace Event Format with the phases of
# every step, each bucket's all-reduce with its bytes, and the two ranks' all-reduces of
# a step overlapping on the shared time axis. A bad request is reported, not fatal.
#   args: <make_mnist> <baton-trainer> <trace_format_check.py>
set -euo pipefail

CHECK=$(realpath "$3")  # Before e2e_lib.sh changes directory.
source worker/trainer/testing/e2e_lib.sh "$@"

"$MAKE_MNIST" --out_dir=data --train_size=2000 --test_size=100 --seed=5 >/dev/null
mkdir -p prof
echo "id=e2e steps=3 start_step=5" >prof/profile-request

# wait_line FILE PATTERN: polls (30 s deadline) until FILE has a line matching PATTERN.
wait_line() {
  local deadline=$((SECONDS + 30))
  until grep -q "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || { cat "$1" >&2; fail "no '$2' in $1"; }
    sleep 0.05
  done
}

# start_rank RANK PORT TAG ARGS...: one of 3 ranks. Ranks 0 and 1 are sent SIGUSR2 once
# their profiler exists; they cannot pass the rendezvous before rank 2 (never signalled)
# joins, so both read the request before step 1, whatever the timing.
start_rank() {
  local rank=$1 port=$2 tag=$3
  shift 3
  env RANK=$rank WORLD_SIZE=3 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=3 GROUP_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" BATON_JOB_ID=j-prof BATON_GENERATION=1 \
    "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 --seed=1 \
      --threads=1 --profile_dir=prof --rendezvous_timeout=60s "$@" \
      >"out.$tag.$rank.txt" 2>"err.$tag.$rank.txt" &
  pids+=($!)
  wait_line "out.$tag.$rank.txt" "profiling on SIGUSR2 into prof"
  ((rank == 2)) || kill -USR2 "$!"
}
# run_ranks TAG ARGS...: the three ranks, to a clean exit.
run_ranks() {
  local tag=$1 port i rc
  shift
  port=$(free_port)
  pids=()
  for i in 0 1 2; do start_rank "$i" "$port" "$tag" "$@"; done
  for i in 0 1 2; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    [[ $rc -eq 0 ]] || { cat "out.$tag.$i.txt" "err.$tag.$i.txt" >&2; fail "$tag: rank $i exited $rc"; }
  done
}
run_ranks good --lr=0.05 --hidden=64,32 --log_every=10 --max_steps=20 --bucket_cap_mb=0.1 \
  --checkpoint_dir=ckpt --checkpoint_every=6
[[ ! -e prof/trace-e2e-rank2.json ]] || fail "rank 2 was not asked to profile"
for rank in 0 1; do
  grep -q "^profile: prof/trace-e2e-rank$rank.json" "out.good.$rank.txt" || fail "rank $rank logged no trace"
  "$PY" "$CHECK" "prof/trace-e2e-rank$rank.json"
done

"$PY" - <<'PY' || fail "trace content check failed"
import json
traces = [json.load(open("prof/trace-e2e-rank%d.json" % r)) for r in (0, 1)]
for r, t in enumerate(traces):
    assert t["otherData"]["windows"] == [{"rank": r, "first_step": 5, "steps": 3, "partial": False}], t["otherData"]
    spans = [e for e in t["traceEvents"] if e["ph"] == "X"]
    assert all(e["pid"] == r for e in spans)
    for step in (5, 6, 7):
        names = [e["name"] for e in spans if e["args"].get("step") == step and e["cat"] == "step"]
        for phase in ("data", "forward", "backward", "comm_wait", "optimizer"):
            assert phase in names, (r, step, names)
        buckets = [e for e in spans if e["cat"] == "comm" and e["args"]["step"] == step]
        assert len(buckets) >= 2, (r, step, buckets)  # --bucket_cap_mb=0.1: several
        assert all(b["args"]["bytes"] > 0 and b["tid"] == 1 and b["args"]["backend"] == "shm" for b in buckets), buckets
    assert not [e for e in spans if e["args"].get("step", 5) not in (5, 6, 7)], "spans outside the window"
    # Rank 0 saves the checkpoint of step 6 inside the window.
    saves = [e for e in spans if e["cat"] == "checkpoint"]
    assert (len(saves) == 1 and saves[0]["args"]["step"] == 6) if r == 0 else not saves, saves
# The same bucket of the same step overlaps across the ranks: one time axis.
def bucket(t, step, name):
    return [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "comm" and e["args"]["step"] == step and e["name"] == name][0]
for step in (5, 6, 7):
    a, b = bucket(traces[0], step, "allreduce bucket 0"), bucket(traces[1], step, "allreduce bucket 0")
    assert a["ts"] <= b["ts"] + b["dur"] and b["ts"] <= a["ts"] + a["dur"], (step, a, b)
print("traces: steps 5-7 on both ranks, phases, buckets and the checkpoint; buckets overlap across ranks")
PY

# A bad request: the ranks go on and report it.
echo "id=bad steps=lots" >prof/profile-request
run_ranks bad --hidden=16 --max_steps=3
for rank in 0 1; do
  grep -q "'steps=lots'" "prof/trace-unknown-rank$rank.error" || fail "rank $rank did not report the bad request"
done

# --profile_dir must exist.
if env BATON_JOB_ID=j-prof "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --max_steps=1 \
    --profile_dir=missing >out.missing.txt 2>err.missing.txt; then
  fail "a missing --profile_dir was accepted"
fi
grep -q "profile_dir=missing is not a directory" err.missing.txt || { cat err.missing.txt; fail "unclear error"; }
echo PASS
