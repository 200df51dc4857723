#!/usr/bin/env bash
# Observability against a real Prometheus server (Debian's `prometheus`): a coordinator and
# two workers (metrics on OS-chosen ports) train a short baton-trainer job while
# Prometheus scrapes all three every second with deploy/prometheus/alerts.yml loaded.
# Asserts:
#   - `promtool check metrics` passes on each daemon's live /metrics during the job;
#   - each rank's baton_trainer_steps_total in Prometheus equals the steps the trainer
#     reported (Job.result.steps), and so does its step-time histogram's _count;
#   - the job's state series changed: running was 1 during the job, succeeded is 1 after;
#   - after the job ended, `baton describe` shows the goodput and the restart count that
#     Prometheus has for it (baton_coordinator_job_goodput_ratio within 1e-6 in -o json, and
#     the text view prints that value; baton_coordinator_job_restarts_total exactly);
#   - every PromQL expression of deploy/grafana/baton.json's panels and variables (variables
#     substituted with the real job and rank) returns data over the job's time range (GPU
#     panels excepted on CPU-only runs); the job trains in fp16 (dynamic loss scaling, on
#     CPU too) so the loss-scale panel has data;
#   - every annotation query of the dashboard (restarts, resizes: events a healthy run does
#     not have) evaluates, and every metric it reads exists in Prometheus;
#   - every alert rule is loaded and evaluates with health "ok", every metric an alert
#     reads exists in Prometheus (so no rule watches a misspelt or missing series), and no
#     alert fires during a healthy run.
# The coordinator runs with a queue file (one queue, everyone's default) so that the
# dashboard's queue panels have series.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

command -v prometheus >/dev/null || fail "prometheus is required (apt-get install prometheus)"
command -v promtool >/dev/null || fail "promtool is required (apt-get install prometheus)"
DEPLOY=$RUNFILES/deploy
cat >"$TMP/queues.yaml" <<EOF
default_queue: everyone
queues:
  - {name: everyone, quota: {slots: 2}, users: ["*"]}
EOF
COORDINATOR_FLAGS=(--queue_file="$TMP/queues.yaml")
start_two_worker_cluster
wait_for 30 test -s "$TMP/coordinator.metrics_port"
wait_for 30 test -s "$TMP/w1.metrics_port"
wait_for 30 test -s "$TMP/w2.metrics_port"
C_METRICS=127.0.0.1:$(cat "$TMP/coordinator.metrics_port")
W1_METRICS=127.0.0.1:$(cat "$TMP/w1.metrics_port")
W2_METRICS=127.0.0.1:$(cat "$TMP/w2.metrics_port")

# Prometheus with the production rules, scraping every second.
cp "$DEPLOY/prometheus/alerts.yml" "$TMP/alerts.yml"
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: baton-coordinator
    static_configs: [{targets: ["$C_METRICS"]}]
  - job_name: baton-worker
    static_configs: [{targets: ["$W1_METRICS", "$W2_METRICS"]}]
EOF
promtool check config "$TMP/prometheus.yml" >/dev/null

# Prometheus cannot report an OS-chosen port: take a free one from the OS and retry if it
# was taken in between.
start_prometheus() {
  local attempt
  for attempt in 1 2 3; do
    PROM_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    PROM=http://127.0.0.1:$PROM_PORT
    prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom-data-$attempt" \
      --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn 2>>"$TMP/prometheus.log" &
    PROM_PID=$!
    EXTRA_PIDS+=("$PROM_PID")
    local deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)) && alive "$PROM_PID"; do
      curl -sf "$PROM/-/ready" >/dev/null 2>&1 && return 0
      sleep 0.1
    done
    kill "$PROM_PID" 2>/dev/null || true
    wait "$PROM_PID" 2>/dev/null || true
  done
  fail "prometheus did not become ready"
}
start_prometheus

# prom_query EXPR [PY_EXPR]: instant query; prints PY_EXPR over the JSON answer (as d).
prom_query() {
  curl -sf --data-urlencode "query=$1" "$PROM/api/v1/query" | json_get "${2:-d}"
}
# prom_range EXPR START: range query from START to now, 1 s resolution; prints the
# number of series with at least one sample.
prom_range() {
  curl -sf --data-urlencode "query=$1" --data-urlencode "start=$2" \
    --data-urlencode "end=$(date +%s.%N)" --data-urlencode "step=1" \
    "$PROM/api/v1/query_range" | json_get 'sum(1 for r in d["data"]["result"] if r["values"])'
}

# All three targets up before the job starts (the first samples come ~5 s after start).
targets_up() { [[ $(prom_query 'sum(up)' 'd["data"]["result"][0]["value"][1] if d["data"]["result"] else 0') == 3 ]]; }
wait_for 60 targets_up
START=$(date +%s)

"$BATON" submit "$EXAMPLES/quickstart.yaml" --set trainer.data_dir="$TMP/mnist" \
  --set checkpoint_dir="$TMP/ckpt" --set budget.max_steps=800 --set trainer.precision=fp16 \
  >"$TMP/submit.out" 2>&1 \
  || { cat "$TMP/submit.out"; fail "submit failed"; }
JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
echo "job $JOB"

# During the job: every daemon's live /metrics passes promtool's parser and linter, the
# workers' once they export training series.
# (Scrapes are read whole before grep: `curl | grep -q` under pipefail fails whenever grep
# matches and exits while curl is still writing, as it did in CI.)
scrape() { curl -sf "http://$1/metrics"; }
has_training_series() { grep -q "^baton_trainer_steps_total{" <<<"$(scrape "$1")"; }
wait_for 120 has_training_series "$W1_METRICS"
wait_for 60 has_training_series "$W2_METRICS"
[[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] || fail "job $JOB is $(job_state "$JOB"), expected RUNNING"
for target in "$C_METRICS" "$W1_METRICS" "$W2_METRICS"; do
  curl -sf "http://$target/metrics" >"$TMP/scrape.txt" || fail "cannot scrape $target"
  promtool check metrics <"$TMP/scrape.txt" || { cat "$TMP/scrape.txt"; fail "promtool check metrics failed for $target"; }
done
grep -Eq "^baton_coordinator_job_state\{job_id=\"$JOB\",state=\"running\"\} 1(\.0*)?$" <<<"$(scrape "$C_METRICS")" \
  || fail "coordinator does not export $JOB as running"

job_done() { [[ $(job_state "$JOB") == JOB_STATE_SUCCEEDED ]]; }
wait_for 240 job_done
STEPS=$(job_field "$JOB" 'int(d["result"]["steps"])')
[[ $STEPS == 800 ]] || fail "the trainer reported $STEPS steps, expected 800"

# Every rank's counter and histogram in Prometheus equal the reported steps.
per_rank() { prom_query "$1" 'sorted((r["metric"]["rank"], float(r["value"][1])) for r in d["data"]["result"])'; }
steps_match() {
  [[ $(per_rank "baton_trainer_steps_total{job_id=\"$JOB\"}") == "[('0', $STEPS.0), ('1', $STEPS.0)]" ]]
}
deadline=$((SECONDS + 30))
until steps_match; do
  ((SECONDS < deadline)) || fail "steps in Prometheus: $(per_rank "baton_trainer_steps_total{job_id=\"$JOB\"}"), trainer: $STEPS"
  sleep 0.2
done
[[ $(per_rank "baton_trainer_step_seconds_count{job_id=\"$JOB\"}") == "[('0', $STEPS.0), ('1', $STEPS.0)]" ]] \
  || fail "step-time histogram counts: $(per_rank "baton_trainer_step_seconds_count{job_id=\"$JOB\"}")"
phase_sum=$(prom_query "sum(baton_trainer_step_phase_seconds_sum{job_id=\"$JOB\", phase=\"forward\"})" 'float(d["data"]["result"][0]["value"][1])')
"$PY" -c "import sys; sys.exit(0 if $phase_sum > 0 else 1)" || fail "no forward time observed ($phase_sum)"

# The job's state series changed: running at some point during the job, succeeded now.
state_now() { prom_query "baton_coordinator_job_state{job_id=\"$JOB\", state=\"$1\"}" 'd["data"]["result"][0]["value"][1] if d["data"]["result"] else "none"'; }
succeeded_now() { [[ $(state_now succeeded) == 1 && $(state_now running) == 0 ]]; }
wait_for 30 succeeded_now
[[ $(prom_range "baton_coordinator_job_state{job_id=\"$JOB\", state=\"running\"} == 1" "$START") == 1 ]] \
  || fail "Prometheus never saw $JOB running"

# describe and the metrics agree once the job ended. The succeeded state above came from a
# scrape after the end, and so did these samples: goodput is frozen at the end time.
prom_goodput=$(prom_query "baton_coordinator_job_goodput_ratio{job_id=\"$JOB\"}" 'repr(float(d["data"]["result"][0]["value"][1]))')
prom_restarts=$(prom_query "baton_coordinator_job_restarts_total{job_id=\"$JOB\"}" 'int(float(d["data"]["result"][0]["value"][1]))')
"$BATON" describe "$JOB" -o json >"$TMP/describe.json"
"$BATON" describe "$JOB" >"$TMP/describe.txt"
"$PY" - "$TMP/describe.json" "$TMP/describe.txt" "$prom_goodput" "$prom_restarts" <<'PY' || fail "describe and Prometheus disagree"
import json, re, sys
job = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
prom_goodput, prom_restarts = float(sys.argv[3]), int(sys.argv[4])
goodput = job.get("result", {}).get("goodput", 0.0)
r = job.get("restarts", {})
restarts = r.get("infra", 0) + r.get("user", 0) + r.get("stall", 0)
errors = []
if not 0 < prom_goodput <= 1:
    errors.append("goodput in Prometheus %r is not in (0, 1]" % prom_goodput)
if abs(goodput - prom_goodput) > 1e-6:
    errors.append("goodput: describe -o json %r, Prometheus %r" % (goodput, prom_goodput))
m = re.search(r"^Goodput:\s+([0-9.]+)%$", text, re.M)
if not m or m.group(1) != "%.1f" % (100 * goodput):
    errors.append("describe prints %r for goodput %r" % (m and m.group(0), goodput))
if restarts != prom_restarts:
    errors.append("restarts: describe -o json %d, Prometheus %d" % (restarts, prom_restarts))
m = re.search(r"^Restarts:\s+(\d+)$", text, re.M)
if not m or int(m.group(1)) != prom_restarts:
    errors.append("describe prints %r, Prometheus %d restarts" % (m and m.group(0), prom_restarts))
if errors:
    sys.exit("; ".join(errors))
print("describe: goodput %.6f, %d restarts, as in Prometheus" % (goodput, restarts))
PY

# Every dashboard panel and variable expression returns data over the job's time range.
# Annotation queries mark restarts and resizes, which this run has none of: each must
# evaluate, and every metric it reads must have series (so none reads a misspelt or
# missing metric).
# metrics_exist EXPR: prints the baton_ metrics EXPR reads that have no series.
metrics_exist() {
  local metric
  for metric in $(grep -oE '\bbaton_[a-z_]+' <<<"$1" | sort -u); do
    [[ $(prom_query "count(last_over_time({__name__=\"$metric\"}[15m]))" 'len(d["data"]["result"])') == 1 ]] \
      || echo "$metric"
  done
}
n=0
annotations=0
while IFS= read -r line; do
  kind=$(json_get 'd[0]' <<<"$line")
  title=$(json_get 'd[1]' <<<"$line")
  expr=$(json_get 'd[2]' <<<"$line")
  [[ $title == "GPU memory (CUDA only)" ]] && continue  # CPU-only run: no CUDA allocator.
  series=$(prom_range "$expr" "$START") || fail "dashboard $kind '$title': query failed: $expr"
  if [[ $kind == annotation ]]; then
    missing=$(metrics_exist "$expr")
    [[ -z $missing ]] || fail "dashboard annotation '$title' reads metrics with no series: $missing"
    annotations=$((annotations + 1))
    continue
  fi
  ((series > 0)) || fail "dashboard $kind '$title' returned no data: $expr"
  n=$((n + 1))
done < <("$PY" "$DEPLOY/grafana/dashboard_check.py" "$DEPLOY/grafana/baton.json" list "$JOB" '.*')
((n >= 25)) || fail "only $n dashboard expressions checked"
((annotations >= 2)) || fail "only $annotations dashboard annotations checked"
echo "dashboard: $n expressions returned data, $annotations annotation queries evaluated"

# Alert rules: all loaded, evaluated without error; every metric they read exists.
curl -sf "$PROM/api/v1/rules" >"$TMP/rules.json" || fail "cannot read /api/v1/rules"
"$PY" - "$TMP/alerts.yml" "$TMP/rules.json" "$PROM" <<'PY' || fail "alert rules check failed"
import json, re, sys, urllib.parse, urllib.request
alerts_yml, rules_json, prom = sys.argv[1:4]
loaded = {r["name"]: r for g in json.load(open(rules_json))["data"]["groups"] for r in g["rules"]}
want = re.findall(r"^\s+- alert: (\w+)", open(alerts_yml).read(), re.M)
assert len(want) == 13, want
errors = []
for name in want:
    r = loaded.get(name)
    if r is None:
        errors.append(name + " not loaded")
    elif r["health"] != "ok" or r.get("lastError"):
        errors.append("%s health %s: %s" % (name, r["health"], r.get("lastError")))
    elif r["state"] == "firing":
        errors.append(name + " fires during a healthy run")
    else:
        for metric in sorted(set(re.findall(r"\b(baton_[a-z_]+|up)\b", r["query"]))):
            q = 'count(last_over_time({__name__="%s"}[15m]))' % metric
            url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
            if not json.load(urllib.request.urlopen(url))["data"]["result"]:
                errors.append("%s reads %s, which has no series" % (name, metric))
if errors:
    sys.exit("; ".join(errors))
print("alerts: %d rules loaded, healthy, reading existing metrics" % len(want))
PY
echo "PASS"
