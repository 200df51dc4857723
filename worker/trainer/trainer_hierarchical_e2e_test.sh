#!/usr/bin/env bash
# End-to-end test of the hierarchical CPU backend with real baton-trainer processes: 2
# "hosts" x 2 ranks on this machine, told apart by BATON_HOST_KEY.
#   1. --cpu_backend=hierarchical trains (loss falls) and ends with the weights of the same
#      job over flat Gloo, up to the order of floating-point additions.
#   2. A rank killed mid-run makes every other rank exit with kExitPeer (4), none hangs.
#   args: <make_mnist> <baton-trainer>
set -euo pipefail

source worker/trainer/testing/e2e_lib.sh "$@"

"$MAKE_MNIST" --out_dir=data --train_size=2000 --test_size=200 --seed=7 > /dev/null

PIDS=()
# start_gang NAME BACKEND FLAG...: ranks 0..3 in the background, ranks 0-1 on host "h0" and
# 2-3 on "h1"; rank r writes NAME.r.{jsonl,txt,err}.
start_gang() {
  local name=$1 backend=$2
  shift 2
  local port rank
  port=$(free_port)
  PIDS=()
  for rank in 0 1 2 3; do
    env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
      GROUP_RANK=$((rank / 2)) MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      BATON_JOB_ID=j-hier BATON_GENERATION=1 BATON_METRICS_FD=3 BATON_HOST_KEY=h$((rank / 2)) \
      timeout 120 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=16 --lr=0.05 \
      --momentum=0.9 --seed=3 --hidden=64,32 --threads=1 --rendezvous_timeout=60s \
      --cpu_backend="$backend" "$@" \
      3> "$name.$rank.jsonl" > "$name.$rank.txt" 2> "$name.$rank.err" &
    PIDS+=($!)
  done
}

# wait_gang NAME WANT_RC...: waits for the gang's ranks; rank r must exit WANT_RC[r] (a hung
# rank is ended by `timeout` with 124).
wait_gang() {
  local name=$1
  shift
  local want=("$@") rank rc
  for rank in 0 1 2 3; do
    rc=0
    wait "${PIDS[$rank]}" || rc=$?
    [[ $rc -eq ${want[$rank]} ]] ||
      { cat "$name.$rank.txt" "$name.$rank.err" >&2; fail "$name rank $rank exited $rc, want ${want[$rank]}"; }
  done
}

# ---- 1. Hierarchical trains like flat Gloo ------------------------------------------------
STEPS=(--max_steps=40 --log_every=10)
start_gang hier hierarchical "${STEPS[@]}" --checkpoint_dir=ckpt-hier
wait_gang hier 0 0 0 0
start_gang flat gloo "${STEPS[@]}" --checkpoint_dir=ckpt-flat
wait_gang flat 0 0 0 0
for rank in 0 1 2 3; do
  grep -q "^baton-trainer: rank $rank/4 .* on cpu (hierarchical(shm+gloo, 2 hosts))" "hier.$rank.txt" ||
    { cat "hier.$rank.txt" >&2; fail "rank $rank did not use the hierarchical backend"; }
  grep -q "^baton-trainer: rank $rank/4 .* on cpu (gloo)" "flat.$rank.txt" || fail "flat rank $rank not on gloo"
done

"$PY" - <<'PY' || fail "hierarchical and flat runs disagree"
import json, torch
for name in ("hier", "flat"):
    for rank in range(4):
        points = [json.loads(l) for l in open(f"{name}.{rank}.jsonl") if '"beat"' not in l]
        assert [p["step"] for p in points] == [10, 20, 30, 40], points
        assert points[-1]["loss"] < 0.8 * points[0]["loss"], (name, rank, points)
hier = torch.load("ckpt-hier/final.pt")
flat = torch.load("ckpt-flat/final.pt")
assert hier.keys() == flat.keys(), (hier.keys(), flat.keys())
diff = max((hier[k] - flat[k]).abs().max().item() for k in hier)
scale = max(flat[k].abs().max().item() for k in flat)
print(f"final weights after 40 steps: max |hierarchical - flat gloo| = {diff:.3g} "
      f"(largest weight {scale:.3g})")
assert diff < 1e-4, diff
PY

# ---- 2. A rank killed mid-run: every other rank exits 4 -----------------------------------
start_gang kill hierarchical --max_steps=1000000 --log_every=1 --collective_timeout=30s
# A metric line, not just a heartbeat (written from the start): the gang is training.
has_metric_line() { grep -q '"loss"' "$1" 2>/dev/null; }
for _ in $(seq 600); do has_metric_line kill.3.jsonl && break; sleep 0.1; done  # Poll, 60 s deadline.
has_metric_line kill.3.jsonl || fail "no metric line from rank 3"
# The trainers are the children of `timeout`.
kill -KILL "$(pgrep -P "${PIDS[3]}")"
wait_gang kill 4 4 4 137
for rank in 0 1 2; do
  tail -n 1 "kill.$rank.err" | grep -q '^baton-trainer: UNAVAILABLE: ' ||
    { cat "kill.$rank.err" >&2; fail "rank $rank's last line is not an UNAVAILABLE error"; }
done
grep -h '^baton-trainer: UNAVAILABLE' kill.*.err
echo PASS
