#!/usr/bin/env bash
# Fuzzing campaigns: builds every fuzz target (tagged fuzz_target; tools/fuzz/fuzz.bzl)
# with --config=fuzz (clang-14, libFuzzer, ASan + UBSan) and runs each for MINUTES minutes
# on a scratch copy of its committed seed corpus, so the committed corpus never grows by
# itself. Prints per target: executions, corpus size (seeds -> end), crashes.
#
# Usage: tools/fuzz.sh MINUTES [//pkg:target ...]     (default: every fuzz target)
#   BATON_FUZZ_DIR=DIR   where scratch corpora, crash inputs and logs go (default: a new
#                        directory under $TMPDIR or /tmp); kept after the run.
#   BATON_FUZZ_JOBS=N    targets fuzzed at once (default 1).
# Exit status: 1 if any target crashed. A crash input is DIR/<target>/crash-*; reproduce it
# with `bazel-bin/<pkg>/<target> FILE` after `bazel build --config=fuzz`, then commit it to
# the target's fuzz_corpus/ as regression-<what> with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:?usage: tools/fuzz.sh MINUTES [//pkg:target ...]}
[[ $minutes =~ ^[0-9]+$ ]] || { echo "fuzz.sh: MINUTES must be a whole number" >&2; exit 2; }
shift
if ! command -v clang-14 >/dev/null ||
  ! compgen -G '/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a' >/dev/null; then
  echo "fuzz.sh: needs clang-14 and libFuzzer: apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 2
fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(bazel query --noshow_progress 'attr(tags, "\bfuzz_target\b", tests(//...))')
fi
bazel build --config=fuzz "${targets[@]}"
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)
out=${BATON_FUZZ_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/baton-fuzz.XXXXXX")}
mkdir -p "$out"

# Runs one target: copies its seeds to $out/<name>/corpus, fuzzes, writes its summary line.
fuzz_one() {
  local target=$1 pkg=${1#//} name=${1##*:}
  pkg=${pkg%%:*}
  local dir="$out/$name"
  mkdir -p "$dir/corpus"
  bazel query --noshow_progress "labels(srcs, ${target}_corpus)" 2>/dev/null |
    sed -e 's|^//||' -e 's|:|/|' | xargs -r cp -t "$dir/corpus"
  local seeds
  seeds=$(find "$dir/corpus" -type f | wc -l)
  # -close_fd_mask=3: the targets' own logging is dropped; libFuzzer's reports are not.
  "$bin/$pkg/$name" "$dir/corpus" -max_total_time=$((minutes * 60)) -timeout=30 \
    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$dir/" >"$dir/log" 2>&1 || true
  local execs crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  crashes=$(find "$dir" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  printf '%-50s %12s %7s -> %-7s %s\n' "$target" "${execs:-?}" "$seeds" \
    "$(find "$dir/corpus" -type f | wc -l)" "$crashes" >"$dir/summary"
}

printf 'fuzzing %d targets for %d minute(s) each in %s\n' "${#targets[@]}" "$minutes" "$out"
jobs=${BATON_FUZZ_JOBS:-1}
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  fuzz_one "$target" &
done
wait

printf '%-50s %12s %18s %s\n' target executions "corpus (seeds->)" crashes
failed=0
for target in "${targets[@]}"; do
  cat "$out/${target##*:}/summary"
  if [[ $(awk '{print $NF}' "$out/${target##*:}/summary") != 0 ]]; then
    failed=1
    echo "  crash: $(ls "$out/${target##*:}"/{crash,leak,timeout,oom}-* 2>/dev/null | head -1)"
  fi
done
exit $failed
