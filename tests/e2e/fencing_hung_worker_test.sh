#!/usr/bin/env bash
# Fencing without a live worker daemon (issue 26, item 1): a worker daemon that hangs
# (SIGSTOP: it renews nothing, reports nothing, kills nothing) must not leave its ranks
# running into the job's next generation. Each rank's shim holds the lease deadline and
# kills the rank's process tree once it passes unrenewed.
#
# Mode "training" (default): a 1-rank job (workers 1..1) trains on w1 with w2 idle; w1's
# daemon is stopped. Mode "collective": a 2-rank job on two of four workers; rank 1 is
# stopped, so rank 0 hangs inside the step's all-reduce, and then both daemons are stopped:
# rank 0 never reaches a step boundary where the trainer could notice the lease itself,
# and nothing of its dead peer reaches it (the peer is stopped, its daemon too), so only
# the shims can end them.
#
# Either way the old ranks' pids must be gone before the first process of the replacement
# generation starts: the test samples the old pids (with /proc/uptime, boot-time seconds)
# and compares the moment they were first seen gone with the new processes' start times
# (/proc/PID/stat, the same clock). Then the job goes on, and after SIGCONT the stopped
# workers find they lost their lease, clean up and register READY again.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
MODE=${1:-training}

uptime_s() { cut -d' ' -f1 /proc/uptime; }
# start_s PID: when PID started, in boot-time seconds (field 22 of /proc/PID/stat).
start_s() {
  "$PY" - "$1" <<'PY'
import os, sys
stat = open("/proc/%s/stat" % sys.argv[1]).read()
ticks = int(stat[stat.rindex(")") + 2:].split()[19])
print("%.2f" % (ticks / os.sysconf("SC_CLK_TCK")))
PY
}
# generation_pids JOB GEN: the pids of GEN's ranks, once every rank of GEN reported one.
generation_pids() {
  job_field "$1" "' '.join(str(r['pid']) for r in d['ranks']) if int(d['generation']) == $2 and all(int(r.get('pid', 0)) > 0 for r in d['ranks']) else ''"
}

# Every rank fork/exec'd: a warm standby's /proc start time is when it was pre-started,
# not when it became the rank.
WORKER_FLAGS=(--standby_trainers=0)
# Whatever happens, nothing stays stopped (a stopped daemon would not end on SIGTERM).
STOPPED=()
_resume_stopped() { local pid; for pid in "${STOPPED[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done; }
CLEANUP_HOOKS+=(_resume_stopped)

make_data "$TMP/mnist"
start_coordinator
start_worker w1
start_worker w2
WORLD=1
if [[ $MODE == collective ]]; then
  start_worker w3
  start_worker w4
  WORLD=2
fi
wait_for_workers $((2 * WORLD))

elastic_job_yaml hung "$WORLD" "$WORLD" 1000000
JOB=$("$BATON" submit "$TMP/hung.yaml")
has_checkpoint() { compgen -G "$TMP/hung-ckpt/ckpt-*.pt" >/dev/null; }
wait_for 120 has_checkpoint
read -r GEN OLD_PID < <(generation_and_pid "$JOB" 0)
OLD_PIDS=("$OLD_PID")
WORKER_NAMES=("$(worker_name_of "$JOB" 0)")
if [[ $MODE == collective ]]; then
  read -r _ PEER_PID < <(generation_and_pid "$JOB" 1)
  OLD_PIDS+=("$PEER_PID")
  WORKER_NAMES+=("$(worker_name_of "$JOB" 1)")
  STOPPED+=("$PEER_PID")
  kill -STOP "$PEER_PID"  # Rank 0 now waits in the step's all-reduce for its peer.
fi
for pid in "${OLD_PIDS[@]}"; do alive "$pid" || fail "rank pid $pid is not running"; done
for name in "${WORKER_NAMES[@]}"; do
  STOPPED+=("${WORKER_PIDS[$name]}")
  kill -STOP "${WORKER_PIDS[$name]}"
  echo "stopped worker $name (${WORKER_PIDS[$name]}) at $(uptime_s)s"
done
echo "ranks: ${OLD_PIDS[*]}"

# Sample the old ranks until they are gone (the lease is 3 s; the coordinator waits
# lease + 1 s margin after its last grant before it counts them as stopped).
_any_old_alive() { local pid; for pid in "${OLD_PIDS[@]}"; do alive "$pid" && return 0; done; return 1; }
deadline=$((SECONDS + 60))
while _any_old_alive; do
  ((SECONDS < deadline)) || fail "a rank of ${OLD_PIDS[*]} outlived its lease by a minute"
  sleep 0.02
done
GONE_AT=$(uptime_s)
echo "old ranks seen gone at ${GONE_AT}s"

NEXT=$((GEN + 1))
_next_started() { [[ -n $(generation_pids "$JOB" "$NEXT") ]]; }
wait_for 120 _next_started
NEW_PIDS=$(generation_pids "$JOB" "$NEXT")
for pid in $NEW_PIDS; do
  started=$(start_s "$pid")
  echo "generation $NEXT: pid $pid started at ${started}s"
  "$PY" -c "import sys; sys.exit(0 if $GONE_AT <= $started else 1)" \
    || fail "generation $NEXT's pid $pid started at ${started}s, before the old rank was gone (${GONE_AT}s)"
done
RUNS_ON=$(job_field "$JOB" "' '.join(r['worker_id'] for r in d['ranks'])")
for name in "${WORKER_NAMES[@]}"; do
  [[ " $RUNS_ON " != *" $name "* ]] || fail "generation $NEXT runs on the stopped worker $name"
done

# The job goes on from its checkpoint.
STEP_AT_RESTART=$(job_step "$JOB")
_progress() { (($(job_step "$JOB") > STEP_AT_RESTART + 10)); }
wait_for 120 _progress

# The stopped workers wake up: each notices its lease ran out, has nothing of the old
# generation left, and registers READY again.
for name in "${WORKER_NAMES[@]}"; do kill -CONT "${WORKER_PIDS[$name]}"; done
if [[ $MODE == collective ]]; then kill -CONT "$PEER_PID" 2>/dev/null || true; fi
for name in "${WORKER_NAMES[@]}"; do
  wait_for 60 grep -q "lease ran out" "$TMP/$name.log"
  _ready_again() { [[ $("$BATON" workers -o json | json_get "[w.get('state') for w in d.get('workers', []) if w.get('id') == '$name'][0]") == WORKER_STATE_READY ]]; }
  wait_for 60 _ready_again
done
for pid in "${OLD_PIDS[@]}"; do alive "$pid" && fail "rank pid $pid is back"; done

"$BATON" cancel "$JOB" >/dev/null
echo "PASS"
