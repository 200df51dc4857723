# The hostile-tenant suite's helpers, on top of the end-to-end harness (tests/e2e/lib.sh):
# real daemons over TLS, real tokens. Tenants alice and bob hold `submitter` tokens, as any
# user of a shared cluster would; they have read Baton's source.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

"$CERTS" "$PKI" --user alice:submitter --user bob:submitter >/dev/null

# as USER CLI-ARGS...: runs the CLI with USER's token.
as() { local who=$1; shift; BATON_TOKEN=$(cat "$PKI/users/$who.token") "$BATON" "$@"; }

# submit_as USER YAML: submits and prints the job id.
submit_as() { as "$1" submit "$2"; }

# job_done JOB: true once JOB ended, whatever the outcome (for wait_for).
job_done() {
  local s
  s=$(job_state "$1")
  [[ $s == JOB_STATE_SUCCEEDED || $s == JOB_STATE_FAILED || $s == JOB_STATE_CANCELLED ]]
}

# daemon_metric DAEMON NAME_AND_LABELS: the value of one sample on the /metrics of DAEMON
# (coordinator, w1, ...), or "absent".
daemon_metric() {
  "$PY" - "$(cat "$TMP/$1.metrics_port")" "$2" <<'PY'
import sys, urllib.request
port, want = sys.argv[1], sys.argv[2]
for line in urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read().decode().splitlines():
    if line.startswith(want + " "):
        print(line.split()[-1]); break
else:
    print("absent")
PY
}

# coordinator_metric NAME_AND_LABELS: daemon_metric of the coordinator.
coordinator_metric() { daemon_metric coordinator "$1"; }
