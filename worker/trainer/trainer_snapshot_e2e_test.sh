#!/usr/bin/env bash
# In-memory snapshots, end to end with real processes: two ranks as on two hosts (each its
# own BATON_SNAPSHOT_DIR, each the writer of its host). Rank 1 is SIGKILLed at a random
# step; the restarted gang resumes from the newest snapshot a survivor holds, losing no
# completed step (the sample log shows every step once, but for the one in flight at the
# kill) and ending with weights bit-identical to an uninterrupted run. Then both hosts' snapshots are lost at once: the
# gang falls back to the disk checkpoint and says so.
#   args: <make_mnist> <baton-trainer>
set -euo pipefail

source worker/trainer/testing/e2e_lib.sh "$@"

"$MAKE_MNIST" --out_dir=data --train_size=4000 --test_size=100 --seed=5 > /dev/null
STEPS=400

# start_gang NAME GENERATION: both ranks of run NAME in the background (pids in PIDS).
start_gang() {
  local name=$1 gen=$2 port
  port=$(free_port)
  PIDS=()
  mkdir -p "$name-ckpt" "$name-snap/h0" "$name-snap/h1"
  for rank in 0 1; do
    env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$rank \
      MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" BATON_JOB_ID=j-snap BATON_GENERATION="$gen" \
      BATON_METRICS_FD=3 BATON_SNAPSHOT_DIR="$PWD/$name-snap/h$rank" \
      timeout 300 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
        --lr=0.05 --momentum=0.9 --seed=3 --hidden=64,32 --log_every=10 --threads=1 \
        --max_steps=$STEPS --checkpoint_dir="$name-ckpt" --checkpoint_every=50 --snapshot_every=1 \
        --sample_log="$PWD/$name.samples" --rendezvous_timeout=60s --cpu_backend=gloo \
        3> /dev/null > "$name.g$gen.$rank.out" 2> "$name.g$gen.$rank.err" &
    PIDS+=($!)
  done
}

# finish NAME GENERATION: both ranks must succeed.
finish() {
  for rank in 0 1; do
    local rc=0
    wait "${PIDS[$rank]}" || rc=$?
    [[ $rc -eq 0 ]] || { cat "$1.g$2.$rank.out" "$1.g$2.$rank.err" >&2; fail "$1 generation $2 rank $rank exited $rc"; }
  done
}

# last_step NAME GENERATION: the newest step rank 0 logged in that generation (0 if none).
last_step() {
  awk -v g="$2" '$1 == g { s = $2 } END { print s + 0 }' "$1.samples.0"
}

# wait_for_step NAME GENERATION STEP: until rank 0 of that generation has logged STEP.
wait_for_step() {
  local deadline=$((SECONDS + 120))
  until [[ -s "$1.samples.0" && $(last_step "$1" "$2") -ge $3 ]]; do
    ((SECONDS < deadline)) || fail "$1 generation $2 did not reach step $3"
    sleep 0.05
  done
}

# kill_rank1 NAME GENERATION AT_STEP: SIGKILLs rank 1 once rank 0 logged AT_STEP; rank 0 then
# fails its next collective and exits non-zero.
kill_rank1() {
  wait_for_step "$1" "$2" "$3"
  kill -KILL "$(pgrep -P "${PIDS[1]}")"
  wait "${PIDS[0]}" && fail "rank 0 of $1 generation $2 survived its peer's death" || true
  wait "${PIDS[1]}" || true
}

# ---- the uninterrupted reference -------------------------------------------------------
start_gang ref 1
finish ref 1
grep -q '^in-memory snapshot: [0-9.]* MiB per snapshot$' ref.g1.0.out ||
  { cat ref.g1.0.out >&2; fail "rank 0 did not report its snapshots"; }
grep -q '^checkpoints are written from in-memory snapshots, off the training thread (step 50 first)$' ref.g1.0.out ||
  { cat ref.g1.0.out >&2; fail "rank 0 did not write its checkpoints from its snapshots"; }
ls ref-snap/h0/snapshot-rank0.bin ref-snap/h1/snapshot-rank1.bin > /dev/null ||
  fail "each host's writer should keep a snapshot file"

# ---- a rank killed at a random step between checkpoints --------------------------------
KILL_AT=$((60 + RANDOM % 35))
start_gang run 1
kill_rank1 run 1 "$KILL_AT"
# Steps are logged once computed, before their gradients are exchanged: the newest one
# logged may be the step in flight, which never completed.
LOGGED=$(awk '{ if ($2 > s) s = $2 } END { print s }' run.samples.0 run.samples.1)
start_gang run 2
wait_for_step run 2 $((LOGGED + 1))
# The last "restored" line says where it resumed: the snapshot, or the disk checkpoint when
# the kill came right after one (the snapshot of that step is then no newer).
LAST=$(sed -n "s/^restored .* at step \([0-9]*\) .*/\1/p" run.g2.0.out | tail -1)
[[ -n $LAST && $LAST -ge $((LOGGED - 1)) ]] ||
  { cat run.g2.0.out >&2; fail "generation 2 did not resume at step $((LOGGED - 1)) or later"; }
grep -q "^restored in-memory snapshot of generation 1 (rank [01]'s copy) at step $LAST " run.g2.0.out ||
  [[ $((LAST % 50)) == 0 ]] || { cat run.g2.0.out >&2; fail "generation 2 did not restore the snapshot of step $LAST"; }
# A snapshot newer than the disk's newest checkpoint is restored without reading the disk.
if grep -q "^restored in-memory snapshot " run.g2.0.out && grep -q "^restored run-ckpt/" run.g2.0.out; then
  cat run.g2.0.out >&2
  fail "generation 2 read the disk checkpoint although it restored a newer snapshot"
fi
echo "killed once step $KILL_AT was logged; resumed at step $LAST from memory (step $LOGGED was the newest logged)"

# ---- both hosts' snapshots lost: back to the disk checkpoint ---------------------------
KILL2_AT=$((LAST + 15))
kill_rank1 run 2 "$KILL2_AT"
rm -rf run-snap
DISK=$(ls run-ckpt | sed -n 's/^ckpt-0*\([0-9][0-9]*\)-g[0-9]*\.pt$/\1/p' | sort -n | tail -1)
start_gang run 3
finish run 3
grep -q "^no in-memory snapshot newer than step $DISK on any rank: resuming from run-ckpt/ckpt-" run.g3.0.out ||
  { cat run.g3.0.out >&2; fail "generation 3 did not say it fell back to the disk checkpoint of step $DISK"; }

# ---- exactly once, and bit-identical ---------------------------------------------------
check_exactly_once "$STEPS" "$LAST" 3 "$DISK"
echo PASS
