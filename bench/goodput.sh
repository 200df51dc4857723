#!/usr/bin/env bash
# Goodput under repeated failures, side by side: Baton (coordinator + 2 workers on loopback,
# baton-trainer, in-memory snapshots by default, a disk checkpoint every 500 steps) and
# torchrun (--max_restarts, c10d rendezvous, --monitor_interval=0.1, bench/goodput_baseline.py:
# the same MLP 784-512-512-10 and data, batches indexed from one tensor, a checkpoint every
# N steps for each N of --torchrun_intervals; the best is compared). Each trains for
# DURATION seconds with a training process SIGKILLed at a random moment of every KILL_EVERY
# seconds, and undisturbed for as long (training alone: no snapshots or checkpoints).
# Goodput = net steps at the end / the undisturbed run's steps, and against the killed
# run's own steady pace (see goodput_driver.py), per round (--repeats=N: N rounds, each
# running every configuration once, undisturbed next to killed), min / median / max over
# rounds. The last line (medians):
#   goodput_baton=<g> goodput_torchrun=<g>
#
# Usage: bench/goodput.sh [DURATION=600] [KILL_EVERY=30] [driver flags: --repeats=N,
# --snapshot_root=<tmpfs>, --torchrun_intervals=...]. Run on an otherwise idle machine; a
# round takes about 5 x DURATION (the first one 6 x).
#
# --overhead: no kills and no torchrun; what snapshots and the disk checkpoints written from
# them cost undisturbed Baton, against training alone, in rotating order per round. Last
# line: overhead_snapshots=<1 - steady pace ratio> overhead_snapshots_checkpoints=<...> (medians).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-600}
KILL_EVERY=${2:-30}
PY=/usr/bin/python3
source bench/lib.sh
cluster_bench_setup
PYTHONPATH="$PWD/bench" "$PY" bench/goodput_driver.py \
  --coordinator="$BIN/coordinator/baton-coordinator" --worker="$BIN/worker/baton-worker" \
  --trainer="$BIN/worker/trainer/baton-trainer" --baton="$BIN/client/baton" \
  --data_dir="$TMP/mnist" --bench_dir="$PWD/bench" --duration="$DURATION" \
  --kill_every="$KILL_EVERY" "${@:3}"
