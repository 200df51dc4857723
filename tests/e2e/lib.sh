# Shared helpers for Baton's end-to-end tests: real daemons on loopback (ports chosen by
# the OS), the real CLI, real signals. Source it from a test; it cleans up on exit.
set -euo pipefail

RUNFILES=${TEST_SRCDIR:-$PWD}/baton
[[ -d "$RUNFILES" ]] || RUNFILES=$PWD
COORDINATOR_BIN=$RUNFILES/coordinator/baton-coordinator
WORKER_BIN=$RUNFILES/worker/baton-worker
TRAINER_BIN=$RUNFILES/worker/trainer/baton-trainer
BATON=$RUNFILES/client/baton
MAKE_MNIST=$RUNFILES/tools/make_mnist
CERTS=$RUNFILES/tools/certs.sh
EXAMPLES=$RUNFILES/examples
PY=/usr/bin/python3

TMP=${TEST_TMPDIR:-$(mktemp -d)}/e2e
rm -rf "$TMP"
mkdir -p "$TMP"
COORDINATOR_PID=
declare -A WORKER_PIDS=()
# Other processes a test started (e.g. a Prometheus server); stopped first on exit.
EXTRA_PIDS=()
# Functions run first on exit, failure or not (e.g. tearing down a multi-host cluster).
CLEANUP_HOOKS=()

# TLS and tokens as in production: a throwaway CA, the coordinator's certificate, one
# certificate per worker (made by start_worker) and an admin token the CLI uses through
# the config file's context.
PKI=$TMP/pki
"$CERTS" "$PKI" --user e2e:admin --coordinator-san DNS:localhost,IP:127.0.0.1 >/dev/null
export BATON_CONFIG=$PKI/config.yaml
COORDINATOR_TLS=(--tls_cert="$PKI/coordinator.crt" --tls_key="$PKI/coordinator.key"
                 --ca="$PKI/ca.crt" --token_file="$PKI/tokens")
# worker_tls NAME: makes worker NAME's certificate (once) and sets WORKER_TLS to its flags.
worker_tls() {
  "$CERTS" "$PKI" --worker "$1" >/dev/null || fail "tools/certs.sh could not issue $1's certificate"
  WORKER_TLS=(--ca="$PKI/ca.crt" --tls_cert="$PKI/workers/$1.crt" --tls_key="$PKI/workers/$1.key")
}

_e2e_cleanup() {
  local rc=$?
  local hook
  for hook in "${CLEANUP_HOOKS[@]}"; do "$hook" || true; done
  local pids=("${EXTRA_PIDS[@]}" "${WORKER_PIDS[@]}" $COORDINATOR_PID)
  # SIGCONT after SIGTERM: a process the test stopped (SIGSTOP) must run to exit, or the
  # wait below would hang until the test's timeout.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; kill -CONT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((rc != 0)); then
    for f in "$TMP"/*.log; do
      [[ -f "$f" ]] || continue
      echo "----- $f (last 40 lines)" >&2
      tail -n 40 "$f" >&2
    done
    # What the ranks said last (why one exited).
    for f in "$TMP"/*/jobs/*/gen-*/rank-*/stderr.log; do
      [[ -s "$f" ]] || continue
      echo "----- $f (last 5 lines)" >&2
      tail -n 5 "$f" >&2
    done
  fi
  exit $rc
}
trap _e2e_cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# wait_for SECONDS CMD...: polls CMD until it succeeds, failing the test at the deadline.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out waiting for: $*"
    sleep 0.05
  done
}

# Further flags start_coordinator passes (a test may set them before starting it).
COORDINATOR_FLAGS=()

# start_coordinator [PORT]: port 0 (the OS picks) unless given (restart on the same port).
start_coordinator() {
  local port=${1:-0}
  rm -f "$TMP/port"
  rm -f "$TMP/coordinator.metrics_port"
  "$COORDINATOR_BIN" --listen="127.0.0.1:$port" --port_file="$TMP/port" "${COORDINATOR_TLS[@]}" \
    --metrics_listen=127.0.0.1:0 --metrics_port_file="$TMP/coordinator.metrics_port" \
    --state_dir="$TMP/state" --worker_lease=3s --stop_grace=2s \
    --reattach_timeout=20s "${COORDINATOR_FLAGS[@]}" 2>>"$TMP/coordinator.log" &
  COORDINATOR_PID=$!
  wait_for 30 test -s "$TMP/port"
  COORDINATOR_PORT=$(cat "$TMP/port")
  export BATON_COORDINATOR=127.0.0.1:$COORDINATOR_PORT
}

# Further flags every start_worker passes (a test may set them before starting workers).
WORKER_FLAGS=()

# start_worker NAME: a worker daemon with one slot and its own work dir; jobs may keep
# their files anywhere under $TMP and run from the examples (--allowed_paths). Its metrics
# port (OS-chosen) lands in $TMP/NAME.metrics_port.
start_worker() {
  rm -f "$TMP/$1.metrics_port"
  worker_tls "$1"
  "$WORKER_BIN" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/$1" --slots=1 "${WORKER_TLS[@]}" \
    --allowed_paths="$TMP,$EXAMPLES" --trainer="$TRAINER_BIN" --metrics_listen=127.0.0.1:0 \
    --metrics_port_file="$TMP/$1.metrics_port" "${WORKER_FLAGS[@]}" 2>>"$TMP/$1.log" &
  WORKER_PIDS[$1]=$!
}

# ready_workers: how many workers the coordinator sees READY.
ready_workers() { "$BATON" workers -o json | json_get 'sum(1 for w in d.get("workers", []) if w.get("state") == "WORKER_STATE_READY")'; }

wait_for_workers() {
  local n=$1
  _enough_workers() { [[ $(ready_workers) -ge $n ]]; }
  wait_for 60 _enough_workers
}

# json_get EXPR: evaluates a Python expression over the JSON document on stdin (as d).
json_get() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# job_field JOB EXPR: evaluates EXPR over `baton describe JOB -o json` (as d).
job_field() { "$BATON" describe "$1" -o json | json_get "$2"; }

job_state() { job_field "$1" 'd.get("state", "")'; }

# generation_and_pid JOB RANK: "GENERATION PID" of RANK in the job's current generation,
# from one snapshot (so the pid belongs to that generation).
generation_and_pid() {
  job_field "$1" "d['generation'], [r['pid'] for r in d['ranks'] if r.get('rank', 0) == $2][0]"
}

# job_succeeded JOB: true once the job SUCCEEDED; fails the test at once if it FAILED or
# was CANCELLED (for wait_for).
job_succeeded() {
  local s
  s=$(job_state "$1")
  [[ $s == JOB_STATE_FAILED || $s == JOB_STATE_CANCELLED ]] && fail "job ended $s: $("$BATON" describe "$1")"
  [[ $s == JOB_STATE_SUCCEEDED ]]
}

# make_data DIR: a small learnable MNIST-format data set.
make_data() { "$MAKE_MNIST" --out_dir="$1" --train_size=4000 --test_size=500 >/dev/null; }

# start_two_worker_cluster: the setting most tests here start from: data in $TMP/mnist
# (make_data), a coordinator and workers w1 and w2, both READY.
start_two_worker_cluster() {
  make_data "$TMP/mnist"
  start_coordinator
  start_worker w1
  start_worker w2
  wait_for_workers 2
}

# alive PID: the process exists (and is not a zombie).
alive() {
  [[ -e /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# worker_name_of JOB RANK: the name (as started by start_worker) of the worker daemon
# running RANK of the job's current generation.
worker_name_of() {
  # A worker registers under its certificate's name: the name start_worker gave it.
  local id
  id=$(job_field "$1" "[r['worker_id'] for r in d['ranks'] if r.get('rank', 0) == $2][0]")
  [[ -n ${WORKER_PIDS[$id]:-} ]] || fail "no worker daemon of this test runs $id"
  echo "$id"
}

# worker_pid_of JOB RANK: the pid of that worker daemon.
worker_pid_of() {
  local name
  name=$(worker_name_of "$1" "$2")
  echo "${WORKER_PIDS[$name]}"
}

# run_reference: the uninterrupted run of $TMP/reference.yaml, to its end (SUCCEEDED).
run_reference() {
  "$BATON" submit "$TMP/reference.yaml" --wait >"$TMP/reference.out" 2>&1 \
    || { cat "$TMP/reference.out"; fail "reference run did not succeed"; }
}

# weights_identical A B: the final weights in $TMP/A-ckpt and $TMP/B-ckpt are bit-identical.
weights_identical() {
  "$PY" - "$TMP/$1-ckpt/final.pt" "$TMP/$2-ckpt/final.pt" <<'PY' || fail "final weights differ"
import sys, torch
a, b = (torch.load(p) for p in sys.argv[1:3])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
bad = [k for k in a if not torch.equal(a[k], b[k])]
assert not bad, "differ: %s" % bad
print("final weights identical: %d tensors" % len(a))
PY
}

# expect_recovered JOB GEN WORLD CLASS CAUSE_ERE PHASE...: the job, after its generation GEN
# failed or resized, runs as generation GEN+1 at world size WORLD; GEN's Failure record
# has class CLASS (infra, user, stall or planned), a cause matching CAUSE_ERE and every
# PHASE time (e.g. stopped_time); `baton describe` (printed, and kept in
# $TMP/describe.out) shows the row "GEN->GEN+1 CLASS". Sets NEXT and F (the record, as an
# expression for job_field) for further checks.
expect_recovered() {
  local job=$1 gen=$2 world=$3 class=$4 cause=$5
  shift 5
  local phases
  phases=$(printf "'%s', " "$@")
  "$BATON" describe "$job" >"$TMP/describe.out"
  cat "$TMP/describe.out"
  NEXT=$((gen + 1))
  F="[f for f in d['restarts']['failures'] if int(f['generation']) == $gen][0]"
  [[ $(job_field "$job" 'd["generation"]') == "$NEXT" ]] || fail "expected generation $NEXT"
  [[ $(job_field "$job" 'len(d["ranks"])') == "$world" ]] \
    || fail "expected world size $world in generation $NEXT"
  [[ $(job_field "$job" "$F['failure_class']") == "FAILURE_CLASS_${class^^}" ]] \
    || fail "not a $class failure: $(job_field "$job" "$F")"
  job_field "$job" "$F['cause']" | grep -Eq "$cause" \
    || fail "cause: $(job_field "$job" "$F['cause']")"
  [[ $(job_field "$job" "all(k in $F for k in ($phases))") == True ]] \
    || fail "recovery phases not recorded"
  grep -Eq "$gen->$NEXT +$class " "$TMP/describe.out" || fail "describe does not show it"
}

# snapshot_job_yaml NAME STEPS CHECKPOINT_EVERY: a 2-rank trainer job on 2 workers that takes
# an in-memory snapshot every step, logs every step, restarts without backoff and
# checkpoints into $TMP/NAME-ckpt, in $TMP/NAME.yaml.
snapshot_job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 64, lr: 0.05, momentum: 0.9, seed: 11, hidden: [512, 512], log_every: 1, threads: 1, checkpoint_every: $3, snapshot_every: 1}
workers: {min: 2, max: 2}
budget: {max_steps: $2}
checkpoint_dir: $TMP/$1-ckpt
restart_policy: {backoff_initial: 0s}
YAML
  mkdir -p "$TMP/$1-ckpt"
}

# elastic_job_yaml NAME MIN MAX STEPS: a trainer job with a fixed global batch (96: a
# multiple of every world size 1..3), a checkpoint every 25 steps in $TMP/NAME-ckpt (all
# kept) and a sample log at $TMP/NAME-samples.<rank>, in $TMP/NAME.yaml.
elastic_job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 48, global_batch: 96, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 25, keep_checkpoints: 1000, sample_log: $TMP/$1-samples}
workers: {min: $2, max: $3}
budget: {max_steps: $4}
checkpoint_dir: $TMP/$1-ckpt
YAML
  mkdir -p "$TMP/$1-ckpt"
}

# drain_rank_worker JOB RANK STEP: once JOB is past STEP, SIGTERMs the worker daemon
# running RANK (as a Kubernetes eviction does) and waits for it to leave on its own, with
# status 0, once its rank exited and was reported. Sets GEN to the generation it drained.
drain_rank_worker() {
  local job=$1 rank=$2 step=$3 worker
  _drain_past() { (($(job_step "$job") >= $1)); }
  wait_for 60 _drain_past "$step"
  GEN=$(job_field "$job" 'd["generation"]')
  worker=$(worker_pid_of "$job" "$rank")
  kill -TERM "$worker"
  _drain_gone() { ! alive "$worker"; }
  wait_for 60 _drain_gone
  wait "$worker" || fail "the drained worker exited with status $?"
}

# zero_job_yaml NAME STAGE: sets trainer.zero.stage STAGE in $TMP/NAME.yaml (made by
# elastic_job_yaml).
zero_job_yaml() {
  sed -i "s/threads: 1,/threads: 1, zero: {stage: $2},/" "$TMP/$1.yaml"
  grep -q "zero: {stage: $2}" "$TMP/$1.yaml" || fail "could not set trainer.zero in $1.yaml"
}

# expect_zero_resize JOB STAGE WORLD...: ZeRO stage STAGE was in use at each WORLD size (rank
# 0's log line), and rank 1 took part in the sharded checkpoint of the resize.
expect_zero_resize() {
  local job=$1 stage=$2 world
  shift 2
  "$BATON" logs "$job" >"$TMP/logs0.out"
  "$BATON" logs "$job" --rank 1 >"$TMP/logs1.out"
  grep -q "checkpointed: steps=" "$TMP/logs1.out" \
    || fail "rank 1 did not take part in the sharded checkpoint"
  for world in "$@"; do
    grep -q "zero stage $stage: each of $world ranks" "$TMP/logs0.out" \
      || fail "stage $stage was not in use at world size $world"
  done
}

# job_step JOB: the newest step the job reported.
job_step() { job_field "$1" 'int(d.get("result", {}).get("steps", 0))'; }

# compare_runs REFERENCE RUN [no-repeats]: RUN (made by elastic_job_yaml, resized once)
# against the uninterrupted REFERENCE:
# * Samples: every step trained on exactly the samples of REFERENCE's step (for a step that
#   ran more than once, after a restore, its last generation's entry counts; the step the
#   last generation resumed after may lack the samples of a rank killed before it logged
#   them, never have others). With
#   no-repeats, no step ran in two generations (nothing was lost and redone).
# * Weights: a world-size change changes the order of fp32 sums, and training amplifies
#   those rounding differences chaotically (uninterrupted runs of this job at world sizes
#   2 and 3 end up to 1e-2 apart after a few hundred steps, depending on the seed). So the
#   exact check is the first checkpoint of the last generation, at most 25 steps after the
#   resume: within 1e-5 of REFERENCE's checkpoint of that step (a lost optimizer state or
#   a wrong sample shows up far above that). The final weights are only checked to stay
#   within 0.1 of REFERENCE's (the same basin; measured differences are 1e-7 to 4e-2).
compare_runs() {
  "$PY" - "$TMP/$1" "$TMP/$2" "${3:-}" <<'PY'
import glob, os, re, sys, torch
ref, run, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def history(prefix):
    by_step = {}  # step -> generation -> sample ids of every rank
    for path in glob.glob(prefix + "-samples.*"):
        for line in open(path):
            gen, step, _rank, ids = line.split()
            by_step.setdefault(int(step), {}).setdefault(int(gen), []).extend(
                int(i) for i in ids.split(","))
    final = {s: sorted(g[max(g)]) for s, g in by_step.items()}
    repeated = sorted(s for s, g in by_step.items() if len(g) > 1)
    last_gen = max(g for gs in by_step.values() for g in gs)
    resumed = min(s for s, gs in by_step.items() if last_gen in gs)
    return final, repeated, last_gen, resumed
want, _, _, _ = history(ref)
got, repeated, last_gen, resumed = history(run)
assert want, "no sample log from the reference run"
assert sorted(got) == sorted(want), "steps differ: %d vs %d" % (len(got), len(want))
# The step before the resume completed on the survivors, which resumed right after it; a
# rank killed after its part of that step's exchange but before logging it leaves its
# samples out of the log (nothing was trained twice or on other samples).
bad = [s for s in want if got[s] != want[s] and
       not (s == resumed - 1 and got[s] and set(got[s]) < set(want[s]))]
assert not bad, "steps with other samples: %s" % bad[:10]
print("sample ids identical at all %d steps; generation %d resumed at step %d"
      % (len(want), last_gen, resumed))
if mode == "no-repeats":
    assert not repeated, "steps run twice (lost and redone): %s" % repeated
    print("no step ran twice")
def max_diff(a, b):
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
def checkpoint(prefix, step):
    # The file of `step` with the highest generation: ckpt-<step>-g<generation>.pt, or a
    # legacy ckpt-<step>.pt (generation 0).
    found = {}
    for path in glob.glob(prefix + "-ckpt/ckpt-*.pt"):
        m = re.fullmatch(r"ckpt-(\d+)(?:-g(\d+))?\.pt", os.path.basename(path))
        if m and int(m.group(1)) == step:
            found[int(m.group(2) or 0)] = path
    assert found, "no checkpoint of step %d in %s-ckpt" % (step, prefix)
    return found[max(found)]
step = -(-resumed // 25) * 25  # the first checkpoint of the last generation
a, b = (torch.load(checkpoint(p, step))["model"] for p in (ref, run))
diff = max_diff(a, b)
print("step %d (%d steps after the resume): max |weight difference| %.3g (tolerance 1e-5)"
      % (step, step - resumed + 1, diff))
assert diff <= 1e-5, "weights at step %d differ by %g" % (step, diff)
diff = max_diff(*(torch.load(p + "-ckpt/final.pt") for p in (ref, run)))
print("final weights: max |difference| %.3g (tolerance 0.1)" % diff)
assert diff <= 0.1, "final weights differ by %g" % diff
PY
}

# free_port: a loopback port the OS found free (for daemons that must know their port
# before they start, such as etcd's peer URL).
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_etcd [N]: an etcd cluster of N members (default 1; Debian's etcd-server) on
# loopback, member i's data under $TMP/etcd-i; sets ETCD_ENDPOINT (the first member's
# HOST:PORT), ETCD_ENDPOINTS (all, comma-separated) and ETCD_PIDS[i]. stop_etcd_member I /
# start_etcd_member I: SIGKILL member I / start it again on its data. Members run with
# --pre-vote, as deploy/k8s's do: a member back from a hang or a partition does not force
# an election (which answers nothing for 1-2 s) before it can win one.
declare -a ETCD_PIDS=() ETCD_CLIENT=() ETCD_PEER=()
start_etcd() {
  local n=${1:-1} i cluster=""
  for ((i = 0; i < n; i++)); do
    ETCD_CLIENT[i]=127.0.0.1:$(free_port)
    ETCD_PEER[i]=127.0.0.1:$(free_port)
    cluster+="${cluster:+,}m$i=http://${ETCD_PEER[i]}"
  done
  ETCD_CLUSTER=$cluster
  for ((i = 0; i < n; i++)); do start_etcd_member "$i"; done
  ETCD_ENDPOINT=${ETCD_CLIENT[0]}
  ETCD_ENDPOINTS=$(IFS=,; echo "${ETCD_CLIENT[*]}")
  wait_for 30 etcdctl_ endpoint health
}
start_etcd_member() {
  local i=$1
  /usr/bin/etcd --name="m$i" --data-dir="$TMP/etcd-$i" \
    --listen-client-urls="http://${ETCD_CLIENT[i]}" --advertise-client-urls="http://${ETCD_CLIENT[i]}" \
    --listen-peer-urls="http://${ETCD_PEER[i]}" --initial-advertise-peer-urls="http://${ETCD_PEER[i]}" \
    --initial-cluster="$ETCD_CLUSTER" --initial-cluster-state=new --pre-vote \
    --logger=zap --log-level=warn \
    2>>"$TMP/etcd-$i.log" &
  ETCD_PIDS[i]=$!
  EXTRA_PIDS+=("${ETCD_PIDS[i]}")
}
stop_etcd_member() {
  kill -KILL "${ETCD_PIDS[$1]}"
  wait "${ETCD_PIDS[$1]}" 2>/dev/null || true
}

# etcdctl_ ARGS...: etcdctl (v3 API) against the members (ETCD_ENDPOINTS).
etcdctl_() { ETCDCTL_API=3 /usr/bin/etcdctl --endpoints="$ETCD_ENDPOINTS" "$@"; }

# etcd_raft_leader: the index I (ETCD_CLIENT[I]) of the member etcd's own Raft leader is,
# as the members answering say; fails when none answers or they name no member started here.
etcd_raft_leader() {
  etcdctl_ endpoint status -w json 2>/dev/null | "$PY" -c '
import json, sys
clients = sys.argv[1:]
for s in json.load(sys.stdin):
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
        print(clients.index(s["Endpoint"].replace("http://", "")))
        sys.exit(0)
sys.exit(1)' "${ETCD_CLIENT[@]}"
}

# etcd_member_id I: member I's id, in hex (as etcdctl move-leader takes it).
etcd_member_id() {
  ETCD_ENDPOINTS=${ETCD_CLIENT[$1]} etcdctl_ endpoint status -w json |
    "$PY" -c 'import json, sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["member_id"])'
}

# start_replica NAME [PORT]: a coordinator replica on etcd (--store=etcd://.../e2e), its
# state (local history) in $TMP/NAME; sets REPLICA_PIDS[NAME] and REPLICA_PORTS[NAME].
declare -A REPLICA_PIDS=() REPLICA_PORTS=()
start_replica() {
  local name=$1 port=${2:-0}
  rm -f "$TMP/$name.port" "$TMP/$name.metrics_port"
  "$COORDINATOR_BIN" --store="etcd://$ETCD_ENDPOINTS/e2e" --listen="127.0.0.1:$port" \
    --port_file="$TMP/$name.port" "${COORDINATOR_TLS[@]}" --metrics_listen=127.0.0.1:0 \
    --metrics_port_file="$TMP/$name.metrics_port" \
    --state_dir="$TMP/$name" --worker_lease=10s --stop_grace=2s --reattach_timeout=20s \
    "${COORDINATOR_FLAGS[@]}" 2>>"$TMP/$name.log" &
  REPLICA_PIDS[$name]=$!
  EXTRA_PIDS+=("${REPLICA_PIDS[$name]}")
  wait_for 30 test -s "$TMP/$name.port"
  wait_for 30 test -s "$TMP/$name.metrics_port"
  REPLICA_PORTS[$name]=$(cat "$TMP/$name.port")
}

# start_replicas NAME...: start_replica for each, BATON_COORDINATOR set to all of them (the
# CLI finds the leader), and waits until one leads.
start_replicas() {
  local name addresses=""
  for name in "$@"; do
    start_replica "$name"
    addresses+="${addresses:+,}127.0.0.1:${REPLICA_PORTS[$name]}"
  done
  export BATON_COORDINATOR=$addresses
  _has_leader() { leader_name; }
  wait_for 30 _has_leader
}

# release_job_yaml FILE NAME: a command job of two workers whose processes run until the
# test creates $TMP/release.
release_job_yaml() {
  cat >"$1" <<YAML
name: $2
command: {argv: ["/bin/sh", "-c", "while [ ! -e $TMP/release ]; do sleep 0.05; done"]}
workers: {min: 2}
YAML
}

# replica_metric NAME METRIC: the value of the unlabelled METRIC on replica NAME's /metrics
# (empty if it has none).
replica_metric() {
  "$PY" - "$(cat "$TMP/$1.metrics_port")" "$2" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
for line in text.splitlines():
    if line.split(" ")[0] == sys.argv[2]:
        print(float(line.split(" ")[1]))
PY
}

# leader_address: the leader key's value (HOST:PORT of the leading replica), or nothing.
leader_address() { etcdctl_ get --print-value-only /e2e/leader; }

# leader_name: the name of the leading replica (start_replica's NAME).
leader_name() {
  local address name
  address=$(leader_address)
  for name in "${!REPLICA_PORTS[@]}"; do
    [[ "$address" == "127.0.0.1:${REPLICA_PORTS[$name]}" ]] && echo "$name" && return 0
  done
  return 1
}
