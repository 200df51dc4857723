#!/usr/bin/env bash
# Attacks (issue 26, 2.5 to 2.8) on what a tenant shares with the others:
#  2.5 a rank double-forks a daemon into a new session, then SIGKILLs its own shim, so
#      that nobody is left to end the daemon: it must die with the rank;
#  2.6 a tenant fills the queue: past --max_jobs_per_user unfinished jobs its submits are
#      refused, naming the limit;
#  2.7 a revoked token (its line removed, SIGHUP) keeps following a job with
#      `baton logs -f`: the stream must end;
#  2.8 a job's command line carries terminal escapes (clear the screen, retitle the
#      window): `baton describe` must not print them raw.
source "${TEST_SRCDIR}/baton/tests/security/lib.sh"

COORDINATOR_FLAGS=(--max_jobs_per_user=2)
start_coordinator
start_worker w1
start_worker w2
wait_for_workers 2

# 2.5
cat >"$TMP/escape.yaml" <<YAML
name: escape
command:
  argv: ["/bin/sh", "-c", "setsid sh -c 'exec sleep 1000 </dev/null >/dev/null 2>&1' & echo \$! >$TMP/escapee; sleep 0.5; kill -9 \$PPID; exec sleep 1000"]
workers: {min: 1, max: 1}
restart_policy: {max_user_restarts: 0, max_infra_restarts: 0}
YAML
: >"$TMP/escapee"  # A rank may write to existing files outside the work dirs only.
ESCAPE=$(submit_as alice "$TMP/escape.yaml")
wait_for 60 test -s "$TMP/escapee"
ESCAPEE=$(cat "$TMP/escapee")
wait_for 60 job_done "$ESCAPE"
_escapee_gone() { ! alive "$ESCAPEE"; }
wait_for 30 _escapee_gone
echo "2.5: the daemon $ESCAPEE ended with its rank ($(job_state "$ESCAPE"))"

# 2.6 (alice's first job has ended: two more fit, a third does not)
cat >"$TMP/sleeper.yaml" <<YAML
name: sleeper
command: {argv: ["/bin/sleep", "1000"]}
workers: {min: 1, max: 1}
YAML
S1=$(submit_as alice "$TMP/sleeper.yaml")
S2=$(submit_as alice "$TMP/sleeper.yaml")
rc=0
submit_as alice "$TMP/sleeper.yaml" >"$TMP/third.out" 2>&1 || rc=$?
cat "$TMP/third.out"
((rc != 0)) || fail "a third unfinished job was accepted"
grep -q -- "--max_jobs_per_user=2" "$TMP/third.out" || fail "the refusal does not name the limit"
submit_as bob "$TMP/sleeper.yaml" >/dev/null || fail "bob was refused because of alice's jobs"

# 2.7 bob follows alice's job; then bob's token is revoked.
_running() { [[ $(job_state "$S1") == JOB_STATE_RUNNING ]]; }
wait_for 60 _running
as bob logs "$S1" -f >"$TMP/follow.out" 2>"$TMP/follow.err" &
FOLLOW=$!
grep -v " bob " "$PKI/tokens" >"$TMP/tokens.new"
cp "$TMP/tokens.new" "$PKI/tokens"
kill -HUP "$COORDINATOR_PID"
_follow_ended() { ! kill -0 "$FOLLOW" 2>/dev/null; }
wait_for 30 _follow_ended
rc=0
wait "$FOLLOW" || rc=$?
cat "$TMP/follow.err"
((rc != 0)) || fail "the revoked token's follow ended with success"
grep -q "revoked\|not valid" "$TMP/follow.err" || fail "the follow did not say its token was revoked"

# 2.8
as alice cancel "$S2" >/dev/null
printf 'name: escapes\ncommand: {argv: ["/bin/echo", "\\e]0;pwned\\a\\e[2J"]}\nworkers: {min: 1, max: 1}\n' >"$TMP/escapes.yaml"
ESC_JOB=$(submit_as alice "$TMP/escapes.yaml")
as alice describe "$ESC_JOB" >"$TMP/describe.out"
grep -q 'pwned' "$TMP/describe.out" || fail "describe does not show the command"
if LC_ALL=C grep -q $'\x1b' "$TMP/describe.out"; then fail "describe printed a raw escape"; fi
grep -qF '^[]0;pwned^G^[[2J' "$TMP/describe.out" || fail "the escapes are not shown visibly"
echo "PASS"
