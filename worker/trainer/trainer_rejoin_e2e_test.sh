#!/usr/bin/env bash
# Healthy ranks stay alive (contract/rejoin_protocol.h), end to end with real processes, the
# test playing the worker: two ranks started with BATON_REJOIN_FD (a FIFO each), rank 1
# SIGKILLed at a random step. Rank 0 does not exit: it says it waits for the next generation;
# the test starts a replacement rank 1 and tells rank 0 its part in generation 2 (a new
# port). The same rank 0 process joins generation 2, which resumes from the newest
# in-memory snapshot: no completed step lost, none trained twice but the one in flight,
# final weights bit-identical to an uninterrupted run. Periodic snapshots are rare here
# (every 1000 steps, and rank 0's at each checkpoint, every 50): the one resumed from is the
# survivor's own, taken when it lost its peer, of the last step it completed. In two more runs, once rank 0 waits:
# its FIFO closed (no further generation) -> it exits kExitPeer (4), as without the fd;
# SIGTERM -> it exits 143 at once, saying so.
# Both CPU backends: gloo (the ranks as on two hosts, a snapshot directory each) and shm
# (one host, one directory, rank 1 not a snapshot writer).
#   args: <make_mnist> <baton-trainer> <gloo|shm>
set -euo pipefail

source worker/trainer/testing/e2e_lib.sh "$@"
BACKEND=$3

"$MAKE_MNIST" --out_dir=data --train_size=4000 --test_size=100 --seed=5 > /dev/null
STEPS=300

# start_rank NAME GENERATION RANK PORT: rank RANK of run NAME in the background, its
# BATON_REJOIN_FD reading the FIFO NAME.rejoin.RANK, which a holder process keeps open for
# writing (HOLDER[RANK]; killing it is the worker closing its end: EOF). The test writes
# messages with rejoin NAME RANK. Sets PID[RANK] (the trainer itself).
declare -a PID=() HOLDER=()
trap 'kill "${HOLDER[@]}" 2>/dev/null || true' EXIT
start_rank() {
  local name=$1 gen=$2 rank=$3 port=$4 snap local_rank=0 local_world=1
  if [[ $BACKEND == shm ]]; then
    snap=$PWD/$name-snap
    local_rank=$rank
    local_world=2
  else
    snap=$PWD/$name-snap/h$rank
  fi
  mkdir -p "$name-ckpt" "$snap"
  rm -f "$name.rejoin.$rank"
  mkfifo "$name.rejoin.$rank"
  sleep 1000 > "$name.rejoin.$rank" &
  HOLDER[rank]=$!
  env RANK="$rank" WORLD_SIZE=2 LOCAL_RANK=$local_rank LOCAL_WORLD_SIZE=$local_world \
    GROUP_RANK=$((rank / local_world)) MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    BATON_JOB_ID=j-rejoin BATON_GENERATION="$gen" BATON_METRICS_FD=3 BATON_SNAPSHOT_DIR="$snap" \
    BATON_REJOIN_FD=4 \
    "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 --lr=0.05 \
    --momentum=0.9 --seed=3 --hidden=64,32 --log_every=10 --threads=1 --max_steps=$STEPS \
    --checkpoint_dir="$name-ckpt" --checkpoint_every=50 --snapshot_every=1000 \
    --sample_log="$PWD/$name.samples" --rendezvous_timeout=60s --cpu_backend="$BACKEND" \
    3> /dev/null 4< "$name.rejoin.$rank" >> "$name.$rank.out" 2>> "$name.$rank.err" &
  PID[rank]=$!
}

# rejoin NAME RANK GENERATION NEW_RANK LOCAL_WORLD PORT: tells rank RANK of run NAME its part
# in GENERATION (a worker's message).
rejoin() {
  printf 'BATON_GENERATION=%s\nRANK=%s\nWORLD_SIZE=2\nLOCAL_RANK=0\nLOCAL_WORLD_SIZE=%s\nGROUP_RANK=0\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=%s\n\n' \
    "$3" "$4" "$5" "$6" > "$1.rejoin.$2"
}

# expect_exit RANK CODE NAME: waits for rank RANK, which must exit CODE.
expect_exit() {
  local rc=0
  wait "${PID[$1]}" || rc=$?
  [[ $rc -eq $2 ]] || { cat "$3.$1.out" "$3.$1.err" >&2; fail "$3 rank $1 exited $rc, not $2"; }
}

# wait_for SECONDS WHAT CMD...: polls CMD until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || { cat run.0.out >&2; fail "timed out waiting for $what"; }
    sleep 0.05
  done
}

# last_step NAME: the newest step rank 0 logged (0 if none).
last_step() { awk '{ if ($2 > s) s = $2 } END { print s + 0 }' "$1.samples.0"; }
reached() { [[ -s run.samples.0 && $(last_step run) -ge $1 ]]; }
waiting() { grep -q "^baton-trainer: generation $1 lost a peer .*; waiting for the next generation on BATON_REJOIN_FD (this process stays)$" run.0.out; }

# ---- the uninterrupted reference -------------------------------------------------------
PORT=$(free_port)
start_rank ref 1 0 "$PORT"
start_rank ref 1 1 "$PORT"
expect_exit 0 0 ref
expect_exit 1 0 ref

# ---- rank 1 killed: rank 0 stays and rejoins -------------------------------------------
PORT=$(free_port)
start_rank run 1 0 "$PORT"
start_rank run 1 1 "$PORT"
SURVIVOR=${PID[0]}
# Between checkpoint steps (a kill right after step 50 could resume from its snapshot).
KILL_AT=$((60 + RANDOM % 25))
wait_for 120 "step $KILL_AT" reached "$KILL_AT"
kill -KILL "${PID[1]}"
wait "${PID[1]}" || true
wait_for 60 "rank 0 to wait for the next generation" waiting 1
kill -0 "$SURVIVOR" 2>/dev/null || fail "rank 0 exited when its peer was lost"
LOGGED=$(awk '{ if ($2 > s) s = $2 } END { print s }' run.samples.0 run.samples.1)

PORT=$(free_port)
start_rank run 2 1 "$PORT"
rejoin run 0 2 0 "$([[ $BACKEND == shm ]] && echo 2 || echo 1)" "$PORT"
wait_for 60 "rank 0 to rejoin" grep -q "^baton-trainer: rejoining as rank 0/2 of generation 2$" run.0.out
wait_for 120 "step $((LOGGED + 20))" reached $((LOGGED + 20))
[[ ${PID[0]} == "$SURVIVOR" ]] && kill -0 "$SURVIVOR" || fail "rank 0 is not the process it was"
LAST=$(sed -n "s/^restored in-memory snapshot of generation 1 (rank [01]'s copy) at step \([0-9]*\) .*/\1/p" run.0.out | tail -1)
[[ -n $LAST && $LAST -ge $((LOGGED - 1)) ]] ||
  { cat run.0.out >&2; fail "generation 2 did not resume from the snapshot of step $((LOGGED - 1)) or later"; }
grep -q "^in-memory snapshot of step $LAST taken on losing a peer (the step in flight undone)$" run.0.out ||
  { cat run.0.out >&2; fail "the snapshot of step $LAST is not the one rank 0 took on losing its peer"; }
echo "$BACKEND: rank 1 killed once step $KILL_AT was logged; rank 0 (pid $SURVIVOR) stayed and resumed at step $LAST from memory (step $LOGGED was the newest logged)"

# ---- the rest of the run, then a loss with no next generation ---------------------------
expect_exit 0 0 run
expect_exit 1 0 run

# lose_peer NAME: a fresh run NAME whose rank 1 is SIGKILLed at step 20; returns once its
# rank 0 waits for the next generation.
lose_peer() {
  local port
  port=$(free_port)
  start_rank "$1" 1 0 "$port"
  start_rank "$1" 1 1 "$port"
  reached_20() { [[ -s $1.samples.0 && $(last_step "$1") -ge 20 ]]; }
  wait_for 120 "$1's step 20" reached_20 "$1"
  kill -KILL "${PID[1]}"
  wait "${PID[1]}" || true
  until grep -q "waiting for the next generation" "$1.0.out"; do
    kill -0 "${PID[0]}" 2>/dev/null || fail "rank 0 of $1 exited before waiting"
    sleep 0.05
  done
}

# No further generation: EOF on the FIFO ends the survivor as before the fd existed.
lose_peer once
kill "${HOLDER[0]}"
expect_exit 0 4 once

# SIGTERM while it waits (the worker stopping the job): it exits 143 at once, saying so.
lose_peer term
kill -TERM "${PID[0]}"
expect_exit 0 143 term
grep -q "stopped while waiting for the next generation" term.0.err ||
  { cat term.0.out term.0.err >&2; fail "rank 0 did not say it was stopped while waiting"; }

# ---- exactly once, and bit-identical ---------------------------------------------------
check_exactly_once "$STEPS" "$LAST"
echo PASS
