#!/usr/bin/env bash
# Attack (issue 26, 2.1): a tenant's command job reads the worker's TLS private key,
# certificate or CA (their paths are in the worker's command line, which every rank can
# read in /proc), to connect as that worker and receive other users' StartAssignments
# with their env values. Two layouts: the quickstart's (every PKI file in one directory
# outside the work dir) and the Kubernetes one (a Secret mount: tls.key a symlink into a
# timestamped directory). The files must be unreadable (and undeletable) for every rank.
source "${TEST_SRCDIR}/baton/tests/security/lib.sh"

start_coordinator
start_worker w1  # quickstart layout: $PKI/workers/w1.{crt,key}, $PKI/ca.crt
# w2: the layout of a Kubernetes Secret mounted at tls/.
worker_tls w2
SECRET=$TMP/k8s/tls
mkdir -p "$SECRET/..2026_12_04_00_00_00.1"
cp "$PKI/workers/w2.crt" "$SECRET/..2026_12_04_00_00_00.1/tls.crt"
cp "$PKI/workers/w2.key" "$SECRET/..2026_12_04_00_00_00.1/tls.key"
cp "$PKI/ca.crt" "$SECRET/..2026_12_04_00_00_00.1/ca.crt"
ln -s ..2026_12_04_00_00_00.1 "$SECRET/..data"
for f in tls.crt tls.key ca.crt; do ln -s "..data/$f" "$SECRET/$f"; done
"$WORKER_BIN" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/w2" --slots=1 \
  --ca="$SECRET/ca.crt" --tls_cert="$SECRET/tls.crt" --tls_key="$SECRET/tls.key" \
  --allowed_paths="$TMP" --trainer="$TRAINER_BIN" --metrics_listen=127.0.0.1:0 2>>"$TMP/w2.log" &
WORKER_PIDS[w2]=$!
wait_for_workers 2

# The attacker's script: find its own worker daemon (an ancestor: on a cluster it is the
# only one on the host), take the paths from its command line, try to read each file and
# to delete the key.
cat >"$TMP/steal.sh" <<'SH'
pid=$$
while [ "$pid" -gt 1 ]; do
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^--tls_key=' && break
  pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status")
done
p=/proc/$pid
for flag in tls_key tls_cert ca; do
  f=$(tr '\0' '\n' <"$p/cmdline" | sed -n "s/^--$flag=//p")
  [ -n "$f" ] || continue
  if head -c 64 "$f" >/dev/null 2>&1; then echo "STOLEN $flag $f"; else echo "refused $flag $f"; fi
done
k=$(tr '\0' '\n' <"$p/cmdline" | sed -n "s/^--tls_key=//p")
rm -f "$k" 2>/dev/null && [ ! -e "$k" ] && echo "DELETED $k"
cat "$k" 2>/dev/null | grep -q "PRIVATE KEY" && echo "STOLEN key content"
echo "attack done"
SH
cat >"$TMP/steal.yaml" <<YAML
name: steal
command: {argv: ["/bin/sh", "$TMP/steal.sh"]}
workers: {min: 2, max: 2}
YAML
JOB=$(submit_as alice "$TMP/steal.yaml")
wait_for 60 job_done "$JOB"
as alice logs "$JOB" >"$TMP/steal.out"
cat "$TMP/steal.out"
[[ $(grep -c "attack done" "$TMP/steal.out") -eq 2 ]] || fail "the attack did not run on both workers"
# Each rank found its worker's three files and was refused each.
[[ $(grep -c "refused " "$TMP/steal.out") -eq 6 ]] || fail "expected six credential reads refused"
! grep -q "STOLEN\|DELETED" "$TMP/steal.out" || fail "a rank reached the worker's credentials"
for f in "$PKI/workers/w1.key" "$SECRET/tls.key"; do
  grep -q "PRIVATE KEY" "$f" || fail "$f is gone or changed"
done
echo "PASS"
