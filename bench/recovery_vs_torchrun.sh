#!/usr/bin/env bash
# Recovery speed, side by side: Baton (coordinator + 2 workers on loopback, baton-trainer)
# and torchrun (--max_restarts, c10d rendezvous, bench/elastic_baseline.py), the same MLP
# 784-512-512-10, the same MNIST-format data, a checkpoint every 50 steps, one process of
# the two SIGKILLed per round at a random step between checkpoints. Reports, min/median/max
# over the rounds: time from the kill to the first step completed after recovery, split
# into phases, the steps lost (recomputed) and the wasted seconds (that time plus the
# recomputed steps at the run's median step time). Baton runs twice: with healthy ranks
# kept (the default: the surviving rank rejoins the next generation in its process) and
# with every rank restarted (workers' --rejoin_timeout=0s, the path before). torchrun runs
# with --monitor_interval=0.1 (today's default) and 5 (torch 1.13's). The last line is
#   ratio=<Baton median / torchrun's best median, kill -> first step>
#
# Usage: bench/recovery_vs_torchrun.sh [REPEATS=3]. Run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
PY=/usr/bin/python3
source bench/lib.sh
cluster_bench_setup
"$PY" bench/recovery_driver.py --coordinator="$BIN/coordinator/baton-coordinator" \
  --worker="$BIN/worker/baton-worker" --trainer="$BIN/worker/trainer/baton-trainer" \
  --baton="$BIN/client/baton" --data_dir="$TMP/mnist" --bench_dir="$PWD/bench" \
  --repeats="$REPEATS"
