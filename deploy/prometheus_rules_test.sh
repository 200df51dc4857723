#!/usr/bin/env bash
# Checks deploy/prometheus with the real promtool (Debian's `prometheus` package):
# the scrape config and the rules are valid, the rule unit tests pass, and the scrape
# targets match the metrics ports of the Kubernetes manifests in deploy/k8s. Every alert
# has a runbook_url `docs/RUNBOOK.md#<alert name in lower case>` whose anchor is a heading
# of docs/RUNBOOK.md (and the check rejects broken examples of both).
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

/usr/bin/python3 - deploy/prometheus/alerts.yml docs/RUNBOOK.md <<'PY'
import re
import sys
import yaml

RUNBOOK = "docs/RUNBOOK.md"


def anchor(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_errors(rules, runbook):
    anchors = {anchor(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", runbook, re.M)}
    errors = []
    for r in rules:
        if "alert" not in r:
            continue
        want = "%s#%s" % (RUNBOOK, r["alert"].lower())
        url = r.get("annotations", {}).get("runbook_url")
        if url is None:
            errors.append("%s has no runbook_url annotation" % r["alert"])
        elif url != want:
            errors.append("%s: runbook_url %r, want %r" % (r["alert"], url, want))
        elif url.split("#", 1)[1] not in anchors:
            errors.append("%s: %s has no heading with anchor #%s"
                          % (r["alert"], RUNBOOK, url.split("#", 1)[1]))
    return errors


rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"]]
runbook = open(sys.argv[2]).read()
errors = runbook_errors(rules, runbook)
if not [r for r in rules if "alert" in r]:
    errors.append("no alerts in %s" % sys.argv[1])

# The check itself: an alert without runbook_url, one pointing elsewhere, and one whose
# section is missing must each be reported.
broken = [{"alert": "NoUrl", "annotations": {}},
          {"alert": "WrongUrl", "annotations": {"runbook_url": "https://example.com/x"}},
          {"alert": "NoSection", "annotations": {"runbook_url": RUNBOOK + "#nosection"}}]
got = runbook_errors(broken, runbook)
for name in ("NoUrl", "WrongUrl", "NoSection"):
    if not any(e.startswith(name) for e in got):
        errors.append("the runbook check missed the broken alert %s: %s" % (name, got))
if anchor("StragglerRank") != "stragglerrank" or anchor("Submit -> it, now!") != "submit---it-now":
    errors.append("anchor() does not follow GitHub's rules")
if errors:
    sys.exit("FAIL: " + "; ".join(errors))
print("PASS: every alert's runbook_url names a section of %s" % RUNBOOK)
PY
