#!/usr/bin/env bash
# baton-trainer --help: the usage on stdout and exit 1 (absl's --help), listing every flag of
# baton-trainer's own (the contract flags, defined from the table, and trainer_main.cc's
# tuning flags) with its help and default, as --helpfull does, without absl's.
#   args: <baton-trainer>
set -euo pipefail

TRAINER=$(realpath "$1")
cd "$(mktemp -d "${TEST_TMPDIR:-/tmp}/help.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }

for help in --help -help --helpfull; do
  rc=0
  "$TRAINER" "$help" > "out$help.txt" 2> "err$help.txt" || rc=$?
  [[ $rc -eq 1 ]] || { cat "err$help.txt" >&2; fail "$help exited $rc, not 1"; }
  grep -q "^baton-trainer: Baton's built-in data-parallel trainer" "out$help.txt" ||
    fail "$help printed no usage"
done
cmp out--help.txt out-help.txt || fail "-help and --help differ"
grep -qF -- '--batch_size (Samples per rank per micro-batch.); default: 64;' out--help.txt ||
  fail "--help lacks --batch_size"
grep -qF -- '--device (auto (CUDA if a GPU is visible), cpu or cuda.); default: "auto";' \
  out--help.txt || fail "--help lacks --device"
! grep -qF -- '--flagfile' out--help.txt || fail "--help lists absl's flags"
# baton-trainer's part of --helpfull (its files' sections to the end) is all of --help's.
ours() { sed -n '/^  Flags from worker\/trainer\//,$p' "$1"; }
[[ $(ours out--helpfull.txt | grep -c '^    --') -ge 59 ]] || fail "--helpfull lists too few flags"
diff <(ours out--helpfull.txt) <(ours out--help.txt) || fail "--help and --helpfull differ"
echo PASS
