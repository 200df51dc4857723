#!/usr/bin/env bash
# Pipeline parallelism (trainer.pipeline, worker/trainer/pipeline/): the measured bubble of the
# executor vs the theory (S - 1) / (M + S - 1). pipeline_bench runs S stages of an MLP of
# equally heavy stages (square layers, WIDTH wide, two per stage) as threads over shared
# memory, one intra-op thread each, and reports each stage's time waiting for its peers over
# its step time; this script runs it for M = 1, 2, 4, 8 micro-batches with GPipe and 1F1B,
# REPEATS fresh processes each, and prints the median of the stages' mean.
#
# Usage: bench/pipeline.sh [REPEATS] [STEPS] [STAGES] [WIDTH] [ROWS]
# Needs STAGES free cores (on fewer, stages time-share and the bubble is not what is measured).
# Last line: ratio=<measured / theory, GPipe, M=4, medians>
# Memory per rank (parameters, peak RSS) at S=2 vs one rank: bench/pipeline_memory.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-10}
STAGES=${3:-2}
WIDTH=${4:-1024}
ROWS=${5:-64}
PY=${PY:-python3}

if ! build_log=$(bazel build //worker/trainer/pipeline/testing:pipeline_bench 2>&1); then
  echo "$build_log" | tail -30 >&2
  exit 1
fi
BENCH=$(bazel info bazel-bin 2>/dev/null)/worker/trainer/pipeline/testing/pipeline_bench
echo "pipeline bubble: S=$STAGES, MLP width $WIDTH, $ROWS rows per micro-batch, $STEPS steps" \
  "x $REPEATS repeats, $(nproc) cores"
printf '%-6s %3s  %8s  %8s  %8s  %8s\n' schedule M theory median min max
ratio=""
for schedule in gpipe 1f1b; do
  for m in 1 2 4 8; do
    values=()
    theory=""
    for ((r = 0; r < REPEATS; ++r)); do
      out=$("$BENCH" "$STAGES" "$m" "$schedule" "$STEPS" "$WIDTH" "$ROWS")
      values+=("$(echo "$out" | sed -n 's/.*measured=\([0-9.]*\).*/\1/p')")
      theory=$(echo "$out" | sed -n 's/^theory=\([0-9.]*\).*/\1/p')
    done
    line=$($PY -c 'import statistics,sys; t=float(sys.argv[1]); v=sorted(map(float,sys.argv[2:]));
print("%.3f %.3f %.3f %.3f %.3f" % (t, statistics.median(v), v[0], v[-1], statistics.median(v) / t))' \
      "$theory" "${values[@]}")
    read -r t med lo hi rel <<<"$line"
    printf '%-6s %3d  %8s  %8s  %8s  %8s\n' "$schedule" "$m" "$t" "$med" "$lo" "$hi"
    if [[ $schedule == gpipe && $m == 4 ]]; then ratio=$rel; fi
  done
done
echo "ratio=$ratio"
