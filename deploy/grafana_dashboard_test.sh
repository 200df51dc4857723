#!/usr/bin/env bash
# Checks deploy/grafana/baton.json offline:
#   - against Grafana's dashboard schema (grafana/schema_check.js: a JSON Schema generated
#     from @grafana/schema's types into $TEST_TMPDIR, then ajv), with the Node validators
#     tools/install_deps.sh installs from tools/node/package.json into /opt/baton-node-tools
#     ($BATON_NODE_TOOLS overrides);
#   - structure and policy (grafana/dashboard_check.py: units, stat thresholds, no raw
#     counters, annotations);
#   - every PromQL expression of its panels, annotations and variables parsed by
#     Prometheus's own parser (`promtool check rules` over them written as recording rules).
# Then the checks themselves: each dashboard in grafana/testdata/ breaks one rule and must
# be rejected with the message expected below; testdata/ok_minimal.json, which the broken
# ones are made from, must pass.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
command -v promtool >/dev/null || { echo "FAIL: promtool is required (apt-get install prometheus)" >&2; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is required (tools/install_deps.sh)" >&2; exit 1; }
export NODE_PATH=${BATON_NODE_TOOLS:-/opt/baton-node-tools}/node_modules
[[ -d $NODE_PATH/@grafana/schema ]] || { echo "FAIL: no @grafana/schema in $NODE_PATH (tools/install_deps.sh)" >&2; exit 1; }
G=deploy/grafana
SCHEMA=$TEST_TMPDIR/dashboard.schema.json

node "$G/schema_check.js" generate "$SCHEMA"

# check DASHBOARD: every check; prints their output, fails on the first that fails.
check() {
  node "$G/schema_check.js" validate "$SCHEMA" "$1" &&
    /usr/bin/python3 "$G/dashboard_check.py" "$1" exprs "$TEST_TMPDIR/dashboard_rules.yml" &&
    promtool check rules "$TEST_TMPDIR/dashboard_rules.yml"
}

check "$G/baton.json"
check "$G/testdata/ok_minimal.json" >/dev/null || { echo "FAIL: testdata/ok_minimal.json was rejected" >&2; exit 1; }

# expect_rejected FILE MESSAGE: the checks reject testdata/FILE with output containing MESSAGE.
failures=0
expect_rejected() {
  local out
  if out=$(check "$G/testdata/$1" 2>&1); then
    echo "FAIL: testdata/$1 passed the checks; expected: $2" >&2
    failures=$((failures + 1))
  elif [[ $out != *"$2"* ]]; then
    printf 'FAIL: testdata/%s rejected, but not with "%s":\n%s\n' "$1" "$2" "$out" >&2
    failures=$((failures + 1))
  else
    echo "rejected as expected: testdata/$1: $2"
  fi
}
expect_rejected schema_bad_types.json '/graphTooltip: must be equal to one of the allowed values'
expect_rejected schema_bad_types.json '/panels/1/gridPos/w: must be number'
expect_rejected schema_misspelt_keys.json '/panels/1/fieldConfig: must NOT have additional properties {"additionalProperty":"defualts"}'
expect_rejected schema_misspelt_keys.json '/annotations/list/1: must NOT have additional properties {"additionalProperty":"titelFormat"}'
expect_rejected policy_no_unit.json "panel 'Restarts' has no unit"
expect_rejected policy_unknown_unit.json "panel 'Restarts': unknown unit 'sec'"
expect_rejected policy_stat_no_thresholds.json "panel 'Coordinator up': a stat panel needs thresholds"
expect_rejected policy_raw_counter.json "plots the raw counter baton_coordinator_recovery_duration_seconds_sum"
expect_rejected policy_raw_counter_total.json "plots the raw counter baton_coordinator_job_restarts_total"
expect_rejected policy_no_annotations.json "no Prometheus annotation queries"
((failures == 0)) || exit 1
echo "PASS"
