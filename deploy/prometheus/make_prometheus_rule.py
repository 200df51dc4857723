"""Writes the Prometheus Operator's PrometheusRule for Baton from alerts.yml.

alerts.yml is the one source of Baton's alert rules (promtool's unit tests and the e2e
test with a real Prometheus run on it); the PrometheusRule in
deploy/k8s/components/monitoring/ carries the same groups. After editing alerts.yml:
  /usr/bin/python3 deploy/prometheus/make_prometheus_rule.py \
      deploy/prometheus/alerts.yml > deploy/k8s/components/monitoring/prometheus-rule.yaml
//deploy:k8s_manifests_test fails while the two differ.
"""
import sys

import yaml

HEADER = """\
# GENERATED from deploy/prometheus/alerts.yml by deploy/prometheus/make_prometheus_rule.py:
# edit alerts.yml and regenerate (the command is in the script), never this file.
"""


def prometheus_rule(alerts_text):
    rules = yaml.safe_load(alerts_text)
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "baton"},
        "spec": {"groups": rules["groups"]},
    }
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_prometheus_rule.py ALERTS_YML > prometheus-rule.yaml")
    with open(sys.argv[1]) as f:
        sys.stdout.write(prometheus_rule(f.read()))
