#!/usr/bin/env bash
# How long a frozen rank (SIGSTOP) goes unnoticed, side by side: Baton with learned
# timeouts (the defaults), Baton with the fixed 30 s floor it had before, and torchrun
# (DDP over gloo) with a 30 s process-group timeout. See bench/hang_driver.py. The last line
#   ratio=<learned / fixed floor>  ratio_torchrun=<learned / torchrun>
#
# Usage: bench/hang_detection.sh [REPEATS=3]. Run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
PY=/usr/bin/python3
source bench/lib.sh
cluster_bench_setup
"$PY" bench/hang_driver.py --coordinator="$BIN/coordinator/baton-coordinator" \
  --worker="$BIN/worker/baton-worker" --trainer="$BIN/worker/trainer/baton-trainer" \
  --baton="$BIN/client/baton" --data_dir="$TMP/mnist" --bench_dir="$PWD/bench" \
  --repeats="$REPEATS"
