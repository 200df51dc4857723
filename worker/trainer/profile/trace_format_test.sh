#!/usr/bin/env bash
# The trace ChromeTraceJson writes (names with quotes, control characters and invalid
# UTF-8 included) is valid Trace Event Format JSON; and the checker refuses what it must.
set -euo pipefail
cd "${TEST_SRCDIR}/baton/worker/trainer/profile"
T=$TEST_TMPDIR
./trace_sample >"$T/trace.json"
/usr/bin/python3 trace_format_check.py "$T/trace.json"
# Both ranks' collective spans are on one time axis: rank 1's bucket overlaps rank 0's.
/usr/bin/python3 - "$T/trace.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X" and e["cat"] == "comm"]
(a, b) = sorted(ev, key=lambda e: e["pid"])
assert a["pid"] == 0 and b["pid"] == 1, ev
assert a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"], ev
assert a["args"]["bytes"] == 1 << 20, a
PY
bad() {  # bad NAME JSON EXPECTED: the checker must refuse JSON with EXPECTED in its output
  printf '%s' "$2" >"$T/$1.json"
  if /usr/bin/python3 trace_format_check.py "$T/$1.json" >"$T/$1.out"; then
    echo "FAIL: the checker accepted $1: $2" >&2; exit 1
  fi
  grep -qF "$3" "$T/$1.out" || { cat "$T/$1.out"; echo "FAIL: $1: no '$3'" >&2; exit 1; }
}
bad not_object '[]' "not an object with a traceEvents list"
bad bad_ph '{"traceEvents":[{"name":"x","ph":"Q","pid":0,"tid":0}]}' "ph 'Q' is not X or M"
bad no_dur '{"traceEvents":[{"name":"x","ph":"X","ts":1,"pid":0,"tid":0}]}' "dur is not a number"
bad neg_dur '{"traceEvents":[{"name":"x","ph":"X","ts":1,"dur":-1,"pid":0,"tid":0}]}' "negative dur"
bad str_pid '{"traceEvents":[{"name":"x","ph":"X","ts":1,"dur":1,"pid":"0","tid":0}]}' "pid is not an integer"
bad meta '{"traceEvents":[{"name":"process_name","ph":"M","pid":0,"tid":0,"args":{}}]}' "needs args.name"
bad nan '{"traceEvents":[{"name":"x","ph":"X","ts":NaN,"dur":1,"pid":0,"tid":0}]}' "not strict JSON"
bad trailing '{"traceEvents":[],}' "Expecting"
echo PASS
