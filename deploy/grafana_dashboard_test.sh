#!/usr/bin/env bash
# Checks deploy/grafana/baton.json: structure (dashboard_check.py) and every PromQL
# expression of its panels and variables parsed by Prometheus's own parser
# (`promtool check rules` over the expressions written as recording rules).
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
command -v promtool >/dev/null || { echo "FAIL: promtool is required (apt-get install prometheus)" >&2; exit 1; }
/usr/bin/python3 deploy/grafana/dashboard_check.py deploy/grafana/baton.json exprs "$TEST_TMPDIR/dashboard_rules.yml"
promtool check rules "$TEST_TMPDIR/dashboard_rules.yml"
echo "PASS"
