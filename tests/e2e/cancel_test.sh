#!/usr/bin/env bash
# `baton cancel` stops every process of a running job (checked by pid, grandchildren too).
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_coordinator
start_worker w1
start_worker w2
wait_for_workers 2

# Each rank starts a grandchild and waits; only a signal ends it. Its pid goes to a
# directory of its own: ranks are confined (Landlock), and cannot create files in $TMP,
# the parent of the workers' work dirs.
mkdir -p "$TMP/out"
cat >"$TMP/job.yaml" <<YAML
name: cancel-me
command:
  argv: ["/bin/sh", "-c", "sleep 1000 & echo child \$! > $TMP/out/child-\$RANK; wait"]
workers: {min: 2}
YAML
JOB=$("$BATON" submit "$TMP/job.yaml")
[[ $JOB == j-* ]] || fail "submit printed '$JOB'"
running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 60 running
wait_for 30 test -s "$TMP/out/child-0"
wait_for 30 test -s "$TMP/out/child-1"
PIDS=$(job_field "$JOB" '" ".join(str(r["pid"]) for r in d["ranks"])')
PIDS="$PIDS $(cut -d' ' -f2 "$TMP/out/child-0") $(cut -d' ' -f2 "$TMP/out/child-1")"
for pid in $PIDS; do alive "$pid" || fail "pid $pid is not running before cancel"; done

"$BATON" cancel "$JOB" >/dev/null
[[ $(job_state "$JOB") == JOB_STATE_CANCELLED ]] || fail "job is $(job_state "$JOB")"
for pid in $PIDS; do
  gone() { ! alive "$pid"; }
  wait_for 20 gone
done
# Cancelling again is a clear error, not a crash.
if "$BATON" cancel "$JOB" 2>"$TMP/again.err"; then fail "second cancel succeeded"; fi
grep -q "already finished" "$TMP/again.err" || { cat "$TMP/again.err"; fail "unclear error"; }
echo "PASS"
