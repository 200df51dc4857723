# A cluster of separate "hosts" on this machine, for multi-host tests. Source it after
# tests/e2e/lib.sh; it needs root.
#
# Host i (0..N-1) is its own network namespace, mount namespace (private /dev/shm and /tmp,
# so shared memory cannot cross hosts, as on real machines) and UTS namespace (hostname
# "<cluster>-h<i>"), joined by a veth pair (eth0 inside the host) to a bridge in a hub
# namespace. Host i has the address 198.18.0.<i+1>/24 (198.18.0.0/15 is reserved for network
# testing; nothing here ever reaches a real network). Each host is held by an anchor process;
# `on HOST CMD...` runs a command inside it. Partitions are nftables drop rules inside the
# hosts (`cut`, `heal`) or a link taken down (`link_down`, `link_up`).
#
# Everything is torn down on exit, also on failure (lib.sh runs CLEANUP_HOOKS): every
# process in a host's namespace is killed and the namespaces are deleted, which removes the
# links. Names are unique per cluster, so tests can run in parallel. A test killed with
# SIGKILL cannot clean up: the next cluster_create removes clusters whose test is gone
# (their owner's pid is kept in $CLUSTER_REGISTRY).

CLUSTER_REGISTRY=/run/baton-test-clusters
declare -A WORKER_HOST=()  # worker name -> host index
CLUSTER=
CLUSTER_HOSTS=0
declare -a HOST_NS=() HOST_ANCHOR=() HOST_ADDR=()

# cluster_create N: N hosts, every link up, no rule.
cluster_create() {
  local n=$1 i
  ((EUID == 0)) || fail "multi-host tests need root (network and mount namespaces)"
  command -v nft >/dev/null || fail "nft not found: apt-get install nftables"
  # 4 hex digits: interface names stay within 15 characters ("bt1a2bp10").
  CLUSTER=bt$(printf '%04x' $((RANDOM ^ ($$ & 0xffff))))
  CLUSTER_HOSTS=$n
  _remove_orphan_clusters
  mkdir -p "$CLUSTER_REGISTRY"
  echo "$$" >"$CLUSTER_REGISTRY/$CLUSTER"
  CLEANUP_HOOKS+=(cluster_destroy)
  # Bazel stops a test that ran out of time with SIGTERM: clean up then too.
  trap 'exit 143' TERM
  trap 'exit 130' INT
  ip netns add "$CLUSTER-hub"
  ip -n "$CLUSTER-hub" link add br0 type bridge
  ip -n "$CLUSTER-hub" link set br0 up
  for ((i = 0; i < n; i++)); do
    HOST_NS[i]=$CLUSTER-h$i
    HOST_ADDR[i]=198.18.0.$((i + 1))
    ip netns add "${HOST_NS[i]}"
    ip link add "${CLUSTER}h$i" type veth peer name "${CLUSTER}p$i"
    ip link set "${CLUSTER}h$i" netns "${HOST_NS[i]}"
    ip -n "${HOST_NS[i]}" link set "${CLUSTER}h$i" name eth0
    ip link set "${CLUSTER}p$i" netns "$CLUSTER-hub"
    ip -n "$CLUSTER-hub" link set "${CLUSTER}p$i" master br0
    ip -n "$CLUSTER-hub" link set "${CLUSTER}p$i" up
    ip -n "${HOST_NS[i]}" addr add "${HOST_ADDR[i]}/24" dev eth0
    ip -n "${HOST_NS[i]}" link set eth0 up
    ip -n "${HOST_NS[i]}" link set lo up
    # The anchor: a process that holds the host's mount and UTS namespaces.
    ip netns exec "${HOST_NS[i]}" unshare --mount --uts --propagation private sh -c \
      "mount -t tmpfs -o size=1g tmpfs /dev/shm && mount -t tmpfs -o size=1g tmpfs /tmp &&
       hostname ${HOST_NS[i]} && exec sleep 100000" &
    HOST_ANCHOR[i]=$!
    disown "${HOST_ANCHOR[i]}"  # no job notices when it is killed
  done
  for ((i = 0; i < n; i++)); do
    _anchored() { [[ $(readlink "/proc/${HOST_ANCHOR[$1]}/ns/mnt") != $(readlink /proc/self/ns/mnt) ]] \
      && [[ $(cat "/proc/${HOST_ANCHOR[$1]}/comm") == sleep ]]; }
    wait_for 10 _anchored "$i"
  done
  echo "cluster $CLUSTER: $n hosts, ${HOST_ADDR[*]}" >&2
}

# on HOST CMD...: runs CMD inside host HOST (its network, mount and UTS namespaces).
on() {
  local h=$1
  shift
  nsenter -t "${HOST_ANCHOR[h]}" --net --mount --uts --wd="$PWD" -- "$@"
}

# Daemons: `(on_exec HOST CMD...) &` leaves CMD's own pid in $! (the subshell becomes it).
on_exec() {
  local h=$1
  shift
  exec nsenter -t "${HOST_ANCHOR[h]}" --net --mount --uts --wd="$PWD" -- "$@"
}

# host_pids HOST: every process in the host's network namespace.
host_pids() { ip netns pids "${HOST_NS[$1]}" 2>/dev/null; }

# kill_host HOST: SIGKILL every process of the host but its anchor (the machine stays up,
# its daemons die: a crashed host that comes back with the same disks).
kill_host() {
  local pid
  for pid in $(host_pids "$1"); do
    [[ $pid == "${HOST_ANCHOR[$1]}" ]] || kill -KILL "$pid" 2>/dev/null || true
  done
}

# cut A B: drops every packet between hosts A and B, both ways (rules inside both hosts).
cut() {
  _cut_one "$1" "$2"
  _cut_one "$2" "$1"
}
_cut_one() {
  local t=cut_$2
  on "$1" nft -f - <<NFT
table inet $t {
  chain input { type filter hook input priority 0; ip saddr ${HOST_ADDR[$2]} drop; }
  chain output { type filter hook output priority 0; ip daddr ${HOST_ADDR[$2]} drop; }
}
NFT
}

# heal A B: removes what `cut A B` added.
heal() {
  on "$1" nft delete table inet "cut_$2"
  on "$2" nft delete table inet "cut_$1"
}

# isolate HOST / rejoin HOST: cut / heal HOST from every other host.
isolate() {
  local i
  for ((i = 0; i < CLUSTER_HOSTS; i++)); do ((i == $1)) || cut "$1" "$i"; done
}
rejoin() {
  local i
  for ((i = 0; i < CLUSTER_HOSTS; i++)); do ((i == $1)) || heal "$1" "$i"; done
}

# link_down HOST / link_up HOST: the host's network cable, pulled and plugged back.
link_down() { ip -n "$CLUSTER-hub" link set "${CLUSTER}p$1" down; }
link_up() { ip -n "$CLUSTER-hub" link set "${CLUSTER}p$1" up; }

cluster_destroy() {
  [[ -n $CLUSTER ]] || return 0
  local i pid
  for ((i = 0; i < CLUSTER_HOSTS; i++)); do
    for pid in $(host_pids "$i"); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ((i = 0; i < CLUSTER_HOSTS; i++)); do
    wait "${HOST_ANCHOR[i]}" 2>/dev/null || true
    # Processes that were exiting when listed: wait until the namespace is empty.
    local deadline=$((SECONDS + 10))
    while [[ -n $(host_pids "$i") ]] && ((SECONDS < deadline)); do
      for pid in $(host_pids "$i"); do kill -KILL "$pid" 2>/dev/null || true; done
      sleep 0.05
    done
    ip netns del "${HOST_NS[i]}" 2>/dev/null || true
  done
  ip netns del "$CLUSTER-hub" 2>/dev/null || true
  rm -f "$CLUSTER_REGISTRY/$CLUSTER"
  CLUSTER=
}

# Deletes the namespaces of clusters whose test process no longer exists.
_remove_orphan_clusters() {
  local f name ns pid
  for f in "$CLUSTER_REGISTRY"/*; do
    [[ -f $f ]] || continue
    name=${f##*/}
    kill -0 "$(cat "$f")" 2>/dev/null && continue
    for ns in $(ip netns list | awk '{print $1}' | grep "^$name-"); do
      for pid in $(ip netns pids "$ns"); do kill -KILL "$pid" 2>/dev/null || true; done
    done
    for ns in $(ip netns list | awk '{print $1}' | grep "^$name-"); do
      ip netns del "$ns" 2>/dev/null || true
    done
    rm -f "$f"
  done
}

# ---- Baton on the cluster: the coordinator on host 0, workers on the others -----------

# The CLI runs on host 0, next to the coordinator (the test's own namespace reaches no host).
BATON_BIN=$BATON
baton_on_host0() { on 0 "$BATON_BIN" "$@"; }
BATON=baton_on_host0

# The runfiles' source files (the examples) are links into the checkout, which no host can
# read when the checkout is under /tmp (private on every host): the hosts use a copy under
# $TMP, which they share (tests whose data has them).
if [[ -d $EXAMPLES ]]; then
  cp -rL "$EXAMPLES" "$TMP/examples"
  EXAMPLES=$TMP/examples
fi

# cluster_start_coordinator [PORT [FLAG...]]: the coordinator on host 0 (port 0: the OS
# picks; give the old port to restart it). Extra flags follow lib.sh's defaults.
cluster_start_coordinator() {
  local port=${1:-0}
  shift || true
  [[ $TMP != /tmp/* ]] || fail "TMP ($TMP) is under /tmp, which every host has privately"
  rm -f "$TMP/port" "$TMP/coordinator.metrics_port"
  # The coordinator's certificate names host 0's address, which workers and the CLI dial.
  if ! grep -qx "${HOST_ADDR[0]}" "$PKI/coordinator.san" 2>/dev/null; then
    rm -f "$PKI/coordinator.crt"
    "$CERTS" "$PKI" --coordinator-san "DNS:localhost,IP:127.0.0.1,IP:${HOST_ADDR[0]}" >/dev/null ||
      fail "tools/certs.sh could not issue the coordinator's certificate"
    echo "${HOST_ADDR[0]}" >"$PKI/coordinator.san"
  fi
  (on_exec 0 "$COORDINATOR_BIN" --listen="${HOST_ADDR[0]}:$port" --port_file="$TMP/port" \
    "${COORDINATOR_TLS[@]}" --metrics_listen=127.0.0.1:0 --metrics_port_file="$TMP/coordinator.metrics_port" \
    --state_dir="$TMP/state" --stop_grace=2s --reattach_timeout=20s "$@" \
    2>>"$TMP/coordinator.log") &
  COORDINATOR_PID=$!
  wait_for 30 test -s "$TMP/port"
  COORDINATOR_PORT=$(cat "$TMP/port")
  export BATON_COORDINATOR=${HOST_ADDR[0]}:$COORDINATOR_PORT
}

# cluster_start_worker NAME HOST SLOTS [FLAG...]: a worker daemon on HOST with its own work
# dir ($TMP/NAME) and nothing told about addresses: it finds its own.
cluster_start_worker() {
  local name=$1 host=$2 slots=$3
  shift 3
  rm -f "$TMP/$name.metrics_port"
  worker_tls "$name"
  (on_exec "$host" "$WORKER_BIN" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/$name" \
    "${WORKER_TLS[@]}" --allowed_paths="$TMP,$EXAMPLES" --slots="$slots" --trainer="$TRAINER_BIN" \
    --metrics_listen=127.0.0.1:0 \
    --metrics_port_file="$TMP/$name.metrics_port" "$@" 2>>"$TMP/$name.log") &
  WORKER_PIDS[$name]=$!
  WORKER_HOST[$name]=$host
}

# scrape HOST PORT_FILE: the /metrics text of the daemon on HOST whose metrics port is in
# PORT_FILE (its metrics listen on the host's loopback).
scrape() {
  on "$1" "$PY" -c "import sys, urllib.request
print(urllib.request.urlopen('http://127.0.0.1:%s/metrics' % sys.argv[1], timeout=10).read().decode())" \
    "$(cat "$2")"
}

# host_of_rank JOB RANK: the host index of the worker running RANK of the job's generation.
host_of_rank() {
  local name
  name=$(worker_name_of "$1" "$2")
  echo "${WORKER_HOST[$name]}"
}

# submit_until_checkpoint YAML: submits the job (JOB is its id) and waits for its first
# checkpoint in $TMP/ckpt.
submit_until_checkpoint() {
  JOB=$("$BATON" submit "$1")
  _has_checkpoint() { compgen -G "$TMP/ckpt/ckpt-*.pt" >/dev/null; }
  wait_for 120 _has_checkpoint
}

# watch_stale JOB GEN PID: in the background until PID is gone, checks the split-brain rule:
# PID (a process of generation GEN) is never alive once the job has moved past GEN. Each
# round reads the generation first, then whether PID lives: a live PID after a newer
# generation was seen is an overlap, written to $TMP/overlap. `expect_no_overlap` waits for
# the watcher and fails the test on one.
watch_stale() {
  local job=$1 gen=$2 pid=$3
  rm -f "$TMP/overlap"
  (
    while alive "$pid"; do
      now_gen=$(job_field "$job" 'd["generation"]' 2>/dev/null) || continue
      if ((now_gen > gen)) && alive "$pid"; then
        echo "process $pid of generation $gen alive while the job runs generation $now_gen" \
          >>"$TMP/overlap"
      fi
    done
  ) &
  WATCHER_PID=$!
}
expect_no_overlap() {
  local deadline=$((SECONDS + 60))
  while alive "$WATCHER_PID" && ((SECONDS < deadline)); do sleep 0.05; done
  alive "$WATCHER_PID" && fail "the stale process never ended"
  [[ ! -s $TMP/overlap ]] || fail "two generations ran at once: $(cat "$TMP/overlap")"
}

# checkpoints_fenced DIR JOB GEN: every checkpoint of generation GEN or older in DIR was
# written before generation GEN+1's rendezvous began (none came from a stale process), and
# the newer generations' files are intact.
checkpoints_fenced() {
  "$BATON" describe "$2" -o json >"$TMP/fenced.json"
  "$PY" - "$1" "$TMP/fenced.json" "$3" <<'PY' || fail "a stale generation wrote a checkpoint"
import glob, json, os, re, sys
from datetime import datetime, timezone
ckpt_dir, job, gen = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
f = [f for f in job["restarts"]["failures"] if int(f["generation"]) == gen][0]
t = f["rendezvous_time"].rstrip("Z")
whole, _, frac = t.partition(".")
started = (datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp()
           + float("0." + (frac or "0")))
files = glob.glob(os.path.join(ckpt_dir, "ckpt-*.pt"))
assert files, "no checkpoints in %s" % ckpt_dir
late = []
for path in files:
    m = re.search(r"-g(\d+)\.pt$", path)
    g = int(m.group(1)) if m else 0
    if g <= gen and os.stat(path).st_mtime > started:
        late.append((os.path.basename(path), os.stat(path).st_mtime - started))
assert not late, "written by generation <= %d after generation %d started: %s" % (gen, gen + 1, late)
print("%d checkpoints; none of generation <= %d written after generation %d started"
      % (len(files), gen, gen + 1))
PY
}
