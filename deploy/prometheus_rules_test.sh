#!/usr/bin/env bash
# Checks deploy/prometheus with the real promtool (Debian's `prometheus` package):
# the scrape config and the rules are valid, the rule unit tests pass, and the scrape
# targets match the metrics ports of the Kubernetes manifests in deploy/k8s.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
command -v promtool >/dev/null || { echo "FAIL: promtool is required (apt-get install prometheus)" >&2; exit 1; }
dir=$TEST_TMPDIR/prometheus
cp -rL deploy/prometheus "$dir"  # rule_files paths are relative to the config
promtool check config "$dir/prometheus.yml"
promtool check rules "$dir/alerts.yml"
(cd "$dir" && promtool test rules alerts_test.yml)

/usr/bin/python3 - "$dir/prometheus.yml" deploy/k8s/base/coordinator.yaml deploy/k8s/base/worker.yaml <<'PY'
import sys
import yaml

config = yaml.safe_load(open(sys.argv[1]))
docs = [d for path in sys.argv[2:] for d in yaml.safe_load_all(open(path)) if d]
objs = {(d["kind"], d["metadata"]["name"]): d for d in docs}
errors = []

def metrics_port(kind, name):
    c = objs[(kind, name)]["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    listen = [a.split("=", 1)[1] for a in c["args"] if a.startswith("--metrics_listen=")]
    if not listen or not listen[0].endswith(":%d" % ports.get("metrics", -1)):
        errors.append("%s: --metrics_listen %s does not match container port metrics %s"
                      % (name, listen, ports.get("metrics")))
    return ports.get("metrics")

def service_port(name):
    return {p["name"]: p["port"] for p in objs[("Service", name)]["spec"]["ports"]}.get("metrics")

jobs = {j["job_name"]: j for j in config["scrape_configs"]}
coord_port = metrics_port("StatefulSet", "baton-coordinator")
want = "baton-coordinator.baton.svc:%s" % service_port("baton-coordinator")
got = jobs["baton-coordinator"]["static_configs"][0]["targets"]
if got != [want] or service_port("baton-coordinator") != coord_port:
    errors.append("coordinator target %s, want [%s] (container port %s)" % (got, want, coord_port))
worker_port = metrics_port("StatefulSet", "baton-worker")
dns = jobs["baton-worker"]["dns_sd_configs"][0]
if objs[("Service", "baton-worker")]["spec"].get("clusterIP") != "None":
    errors.append("Service baton-worker must be headless (one DNS record per pod)")
if dns["names"] != ["baton-worker.baton.svc"] or dns["port"] != worker_port:
    errors.append("worker discovery %s:%s, want baton-worker.baton.svc:%s"
                  % (dns["names"], dns["port"], worker_port))
if errors:
    sys.exit("FAIL: " + "; ".join(errors))
print("PASS: scrape targets match the manifests' metrics ports")
PY
