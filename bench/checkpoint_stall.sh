#!/usr/bin/env bash
# What a disk checkpoint costs training: baton-trainer alone (1 rank, 1 thread), MLP
# 784-1024-1024-10 with SGD and momentum (a 14 MiB checkpoint), STEPS steps, batch 64, the
# checkpoints in a directory under /tmp (on the disk: fsync'd files), three ways, alternating,
# REPEATS rounds:
#   none   no step checkpoints (checkpoint_every 0: the final ones only, as in the others)
#   sync   a checkpoint every EVERY steps written by the training thread (snapshot_every -1:
#          the path without snapshots: serialise, write, fsync, rename, then the next step)
#   async  the same checkpoints written from in-memory snapshots on the checkpointer's thread
#          (BATON_SNAPSHOT_DIR on /dev/shm, snapshot_every 1000000: the only snapshots are
#          the checkpoint steps'): training waits for the copy into memory only
# Prints wall seconds min/median/max per way, each way's stall per checkpoint ((way - none) /
# checkpoints, medians), and last `stall_async_over_sync=<ratio>`.
#
# Usage: bench/checkpoint_stall.sh [REPEATS=5] [STEPS=400] [EVERY=20]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-5}
STEPS=${2:-400}
EVERY=${3:-20}
PY=/usr/bin/python3
source bench/lib.sh
trainer_bench_setup
"$BIN/tools/make_mnist" --out_dir="$TMP/mnist" --train_size=12000 --test_size=100 >/dev/null
SHM=$(mktemp -d -p /dev/shm baton-bench.XXXXXX)
trap 'rm -rf "$TMP" "$SHM"' EXIT

# run WAY: one run; prints its wall seconds.
run() {
  local way=$1 flags=() start end
  rm -rf "$TMP/ckpt" "$SHM"/*
  mkdir -p "$TMP/ckpt"
  case $way in
    none) flags=(--checkpoint_every=0 --snapshot_every=-1) ;;
    sync) flags=(--checkpoint_every="$EVERY" --snapshot_every=-1) ;;
    async) flags=(--checkpoint_every="$EVERY" --snapshot_every=1000000) ;;
  esac
  start=$(date +%s.%N)
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$(free_port) BATON_SNAPSHOT_DIR="$SHM" \
    "$TRAINER" --model=mlp --dataset=mnist --data_dir="$TMP/mnist" --hidden=1024,1024 \
    --batch_size=64 --threads=1 --lr=0.05 --momentum=0.9 --max_steps="$STEPS" --log_every=100 \
    --checkpoint_dir="$TMP/ckpt" --keep_checkpoints=2 "${flags[@]}" >"$TMP/$way.out" 2>&1 ||
    { cat "$TMP/$way.out" >&2; exit 1; }
  end=$(date +%s.%N)
  if [[ $way == async ]] && ! grep -q "checkpoints are written from in-memory snapshots" "$TMP/$way.out"; then
    cat "$TMP/$way.out" >&2
    echo "the async run did not write its checkpoints from snapshots" >&2
    exit 1
  fi
  $PY -c "print('%.3f' % ($end - $start))"
}

declare -A WALL=([none]="" [sync]="" [async]="")
for ((r = 1; r <= REPEATS; r++)); do
  line="round $r:"
  for way in none sync async; do
    wall=$(run "$way")
    WALL[$way]+=" $wall"
    line+=" $way $wall s"
  done
  echo "$line"
done
CHECKPOINTS=$((STEPS / EVERY))
echo "== wall seconds, $STEPS steps, a checkpoint every $EVERY ($CHECKPOINTS), $REPEATS rounds"
for way in none sync async; do
  # shellcheck disable=SC2086
  echo "$way: $($PY -c 'import statistics,sys; v=sorted(map(float,sys.argv[1:])); print("min %.2f  median %.2f  max %.2f" % (v[0], statistics.median(v), v[-1]))' ${WALL[$way]})"
done
# shellcheck disable=SC2086
NONE=$(median ${WALL[none]}); SYNC=$(median ${WALL[sync]}); ASYNC=$(median ${WALL[async]})
STALL_SYNC=$($PY -c "print('%.1f' % (($SYNC - $NONE) / $CHECKPOINTS * 1000))")
STALL_ASYNC=$($PY -c "print('%.1f' % (($ASYNC - $NONE) / $CHECKPOINTS * 1000))")
echo "stall per checkpoint (medians): sync $STALL_SYNC ms, async $STALL_ASYNC ms"
echo "stall_async_over_sync=$($PY -c "print('%.2f' % ($STALL_ASYNC / $STALL_SYNC))")"
