#!/usr/bin/env bash
# GPU check for the native trainer, run on a machine with one NVIDIA GPU, CUDA, NCCL and a
# pip torch 2.x (no Bazel, no Debian packages). It:
#   1. builds baton-trainer with CMake (tools/gpu/CMakeLists.txt) against that torch's
#      LibTorch; Abseil/stb/Gloo headers and Abseil's libraries come from .gpu_deps/
#      (make it here with tools/gpu/prepare_deps.sh and carry it to the machine);
#   2. trains the GPT model on one GPU through the NCCL backend (world size 1) in fp32,
#      bf16 and fp16, and checks that the loss falls and that bf16/fp16 end near fp32;
#   3. runs the same model, data and optimiser in eager PyTorch (tools/gpu/gpt_eager.py)
#      in the same invocation and prints tokens/s of both, their ratio and the model FLOP
#      utilisation (6 x parameters + 12 x layers x context x width FLOPs per token, against
#      the H200's measured ~790 TFLOP/s dense bf16);
#   4. trains the bf16 GPT with --activation_checkpointing=blocks and =none and reports the
#      CUDA caching allocator's peak memory of each (metric lines' mem_peak_bytes) and
#      their ratio; checks checkpointing lowers the peak and ends at the same loss;
#   5. trains the bf16 GPT at world size 2 (two processes, NCCL) with --zero_stage 0, 2 and
#      2 + --zero_offload_optimizer, and reports each rank's CUDA peak and the ratio to
#      stage 0; checks stage 2 lowers the peak and ends at stage 0's loss. With one GPU
#      both ranks share it (LOCAL_RANK modulo the GPUs): if NCCL refuses two ranks on one
#      device, the step says so and is skipped, not failed.
# Usage: tools/gpu_check.sh [STEPS=60]. Writes logs to $OUT (default /tmp/gpu_check). The
# last line is `ratio=<baton / eager tokens/s, bf16>`; exit status 1 if a check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
WARMUP=10
OUT=${OUT:-/tmp/gpu_check}
DEPS=${BATON_DEPS_DIR:-$PWD/.gpu_deps}
BUILD=/tmp/baton-gpu-build
PY=${PYTHON:-python3}
PEAK_FLOPS=790e12
GPT=(--context_length=1024 --gpt_layers=12 --gpt_heads=12 --gpt_width=768 --vocab_size=32768
     --batch_size=16 --lr=3e-4)
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
failures=0
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi; }

echo "== machine"
nvidia-smi -L || { echo "no GPU"; exit 1; }
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))' || exit 1
TORCH_CMAKE=$($PY -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_DIR=$($PY -c 'import torch, os; print(os.path.dirname(torch.__file__))')
NCCL_INC=$($PY -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null || true)
[[ -f $NCCL_INC/nccl.h ]] || NCCL_INC=$(dirname "$(find / -name nccl.h -path '*include*' 2>/dev/null | head -1)")
[[ -d $DEPS/lib ]] || { echo "missing $DEPS (run tools/gpu/prepare_deps.sh where Debian's packages are)"; exit 1; }
# Newer LibTorch headers need C++20.
STD=17
echo '#include <ATen/ATen.h>' > /tmp/baton-probe.cc
g++ -std=c++17 -isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include" \
  -fsyntax-only /tmp/baton-probe.cc 2>/dev/null || STD=20

echo "== build (C++$STD, nccl.h from $NCCL_INC)"
start=$SECONDS
cmake -S tools/gpu -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_CMAKE" \
  -DBATON_DEPS_DIR="$DEPS" -DBATON_CXX_STANDARD=$STD -DCMAKE_CXX_FLAGS="-isystem $NCCL_INC" \
  > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -m 30 -B2 -A8 "error" "$OUT/build.log"; exit 1; }
echo "built in $((SECONDS - start)) s"
TRAINER=$BUILD/baton-trainer
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run_baton PRECISION: trains, prints "tokens_per_sec first_loss last_loss" (rate: median
# over the metric windows after the warmup).
run_baton() {
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$(free_port) BATON_METRICS_FD=3 timeout 600 "$TRAINER" --device=cuda \
    --model=gpt --dataset=synthetic --synthetic_samples=8192 "${GPT[@]}" --optimizer=adamw \
    --weight_decay=0 --max_steps="$STEPS" --log_every=5 --loader_threads=4 --precision="$1" \
    3> "$OUT/baton-$1.jsonl" > "$OUT/baton-$1.txt" 2>&1 || { tail -5 "$OUT/baton-$1.txt" >&2; echo "0 nan nan"; return; }
  grep -q "on cuda:0 (nccl)" "$OUT/baton-$1.txt" || echo "warning: not on the NCCL backend" >&2
  $PY - "$OUT/baton-$1.jsonl" "$WARMUP" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and '"beat"' not in l]
rates = [r["tokens_per_sec"] for r in rows if r["step"] > int(sys.argv[2])]
print(statistics.median(rates), rows[0]["loss"], rows[-1]["loss"])
PY
}
# run_ac MODE: bf16 GPT with --activation_checkpointing=MODE; prints "peak_MiB last_loss"
# (peak: the largest mem_peak_bytes of the metric lines).
run_ac() {
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$(free_port) BATON_METRICS_FD=3 timeout 600 "$TRAINER" --device=cuda \
    --model=gpt --dataset=synthetic --synthetic_samples=8192 "${GPT[@]}" --optimizer=adamw \
    --weight_decay=0 --max_steps=20 --log_every=5 --loader_threads=4 --precision=bf16 \
    --activation_checkpointing="$1" 3> "$OUT/ac-$1.jsonl" > "$OUT/ac-$1.txt" 2>&1 \
    || { tail -5 "$OUT/ac-$1.txt" >&2; echo "nan nan"; return; }
  $PY -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip() and "beat" not in l]; print(max(r.get("mem_peak_bytes", float("nan")) for r in rows) / 2**20, rows[-1]["loss"])' "$OUT/ac-$1.jsonl"
}
# run_zero NAME WORLD FLAGS...: bf16 GPT on WORLD ranks with FLAGS; prints "peak_MiB
# last_loss" (peak: the largest mem_peak_bytes of any rank's metric lines), or "skip
# <reason>" when NCCL refuses ranks sharing a GPU.
run_zero() {
  local name=$1 world=$2 port r pids=()
  shift 2
  port=$(free_port)
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port BATON_METRICS_FD=3 timeout 600 "$TRAINER" --device=cuda \
      --model=gpt --dataset=synthetic --synthetic_samples=8192 "${GPT[@]}" --optimizer=adamw \
      --weight_decay=0 --max_steps=20 --log_every=5 --loader_threads=4 --precision=bf16 "$@" \
      3> "$OUT/zero-$name-$r.jsonl" > "$OUT/zero-$name-$r.txt" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  if ((failed)); then
    if grep -qi "duplicate gpu" "$OUT"/zero-"$name"-*.txt; then
      echo "skip NCCL refuses two ranks on one GPU (needs $world GPUs)"
    else
      tail -5 "$OUT/zero-$name-0.txt" >&2
      echo "nan nan"
    fi
    return
  fi
  $PY - "$OUT" "$name" "$world" <<'PY'
import json, sys
out, name, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
peak, loss = 0.0, None
for r in range(world):
    rows = [json.loads(l) for l in open(f"{out}/zero-{name}-{r}.jsonl") if l.strip() and '"beat"' not in l]
    peak = max(peak, max(row.get("mem_peak_bytes", float("nan")) for row in rows) / 2**20)
    if r == 0:
        loss = rows[-1]["loss"]
print(peak, loss)
PY
}
run_eager() {
  timeout 600 $PY tools/gpu/gpt_eager.py --precision="$1" "${GPT[@]}" --steps="$STEPS" \
    --warmup="$WARMUP" > "$OUT/eager-$1.json" 2> "$OUT/eager-$1.err" || { tail -5 "$OUT/eager-$1.err" >&2; echo "0 nan nan 0"; return; }
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["tokens_per_sec"], d["first_loss"], d["last_loss"], d["params"])' "$OUT/eager-$1.json"
}

declare -A B E
for p in fp32 bf16 fp16; do
  echo "== $p"
  B[$p]=$(run_baton $p)
  E[$p]=$(run_eager $p)
  echo "baton-trainer: tokens/s first_loss last_loss = ${B[$p]}"
  echo "eager PyTorch: tokens/s first_loss last_loss params = ${E[$p]}"
done

echo "== checks and figures"
report() {
  $PY - "$@" <<'PY'
import sys
prec, peak, layers, ctx, width = sys.argv[1], float(sys.argv[2]), *map(int, sys.argv[3:6])
b = list(map(float, sys.argv[6:9])); e = list(map(float, sys.argv[9:13])); fp32_last = float(sys.argv[13])
flops_per_token = 6 * e[3] + 12 * layers * ctx * width
ratio = b[0] / e[0] if e[0] else float("nan")
print(f"{prec}: baton {b[0]:.0f} tokens/s, eager {e[0]:.0f} tokens/s, ratio {ratio:.2f}, "
      f"MFU baton {b[0] * flops_per_token / peak:.1%} eager {e[0] * flops_per_token / peak:.1%}; "
      f"loss {b[1]:.3f} -> {b[2]:.3f} (fp32 run ends at {fp32_last:.3f})")
PY
}
fp32_last=$(echo "${B[fp32]}" | awk '{print $3}')
for p in fp32 bf16 fp16; do
  read -r rate first last <<< "${B[$p]}"
  report $p $PEAK_FLOPS 12 1024 768 ${B[$p]} ${E[$p]} "$fp32_last"
  check "$p: the loss falls" "$PY -c 'import sys; sys.exit(not (float(\"$last\") < 0.8 * float(\"$first\")))'"
  check "$p: ends within 10% of fp32" "$PY -c 'import sys; sys.exit(not (abs(float(\"$last\") - float(\"$fp32_last\")) <= 0.1 * float(\"$fp32_last\") + 0.05))'"
done
echo "== activation checkpointing (bf16 GPT, CUDA peak memory)"
read -r ac_peak ac_loss <<< "$(run_ac blocks)"
read -r plain_peak plain_loss <<< "$(run_ac none)"
echo "peak MiB: blocks $ac_peak, none $plain_peak; ratio $($PY -c "print('%.2f' % ($ac_peak / $plain_peak))" 2>/dev/null)"
check "activation checkpointing lowers the CUDA peak" "$PY -c 'import sys; sys.exit(not float(\"$ac_peak\") < float(\"$plain_peak\"))'"
check "activation checkpointing ends at the same loss (bf16: within 1%)" "$PY -c 'import sys; sys.exit(not abs(float(\"$ac_loss\") - float(\"$plain_loss\")) <= 0.01 * abs(float(\"$plain_loss\")))'"
echo "== ZeRO (bf16 GPT, world size 2, CUDA peak memory per rank)"
read -r z0_peak z0_loss <<< "$(run_zero stage0 2 --zero_stage=0)"
if [[ $z0_peak == skip ]]; then
  echo "ZeRO check skipped: $z0_loss"
else
  read -r z2_peak z2_loss <<< "$(run_zero stage2 2 --zero_stage=2)"
  read -r zo_peak zo_loss <<< "$(run_zero offload 2 --zero_stage=2 --zero_offload_optimizer=true)"
  echo "peak MiB per rank: stage 0 $z0_peak, stage 2 $z2_peak, stage 2 + offload $zo_peak;" \
    "ratios to stage 0: $($PY -c "print('%.2f %.2f' % ($z2_peak / $z0_peak, $zo_peak / $z0_peak))" 2>/dev/null)"
  check "ZeRO stage 2 lowers the CUDA peak per rank" "$PY -c 'import sys; sys.exit(not float(\"$z2_peak\") < float(\"$z0_peak\"))'"
  check "offloading lowers it further" "$PY -c 'import sys; sys.exit(not float(\"$zo_peak\") < float(\"$z2_peak\"))'"
  check "ZeRO stage 2 ends at stage 0's loss (bf16: within 1%)" "$PY -c 'import sys; sys.exit(not abs(float(\"$z2_loss\") - float(\"$z0_loss\")) <= 0.01 * abs(float(\"$z0_loss\")))'"
fi
bf16_ratio=$($PY -c "b=float('${B[bf16]}'.split()[0]); e=float('${E[bf16]}'.split()[0]); print('%.2f' % (b / e if e else float('nan')))")
check "bf16: baton-trainer >= 1.0x eager PyTorch tokens/s" "$PY -c 'import sys; sys.exit(not float(\"$bf16_ratio\") >= 1.0)'"
echo "failed checks: $failures"
echo "ratio=$bf16_ratio"
((failures == 0))
