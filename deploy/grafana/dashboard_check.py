"""Checks deploy/grafana/baton.json offline, with Debian packages only.

  dashboard_check.py DASHBOARD.json exprs OUT.yml   # structure; write every PromQL
                                                    # expression as a recording rule
  dashboard_check.py DASHBOARD.json list JOB RANK   # print substituted expressions, one
                                                    # JSON array a line: [kind, title, expr],
                                                    # kind panel, annotation or variable

Structure: JSON parses; a current schemaVersion (>= 39); uid and title; a `datasource`
template variable of type datasource (Prometheus) and the variables `job` and `rank`;
unique panel ids; every non-row panel has a datasource and at least one target with a
non-empty expr and a refId; gridPos within the 24-column grid and no two panels
overlapping. (deploy/grafana/schema_check.js checks the JSON against Grafana's schema.)

Policy, what a reader of the dashboard relies on:
  - every timeseries and stat panel has a unit (fieldConfig.defaults.unit), one of
    Grafana's unit ids in UNITS or a custom count:/suffix:/prefix:/si: unit;
  - every stat panel has thresholds (a base step whose value is null, then ascending);
  - no panel or annotation plots a raw counter: a counter series (`*_total`, or a
    histogram's `_sum`, `_count`, `_bucket`) must sit directly inside one of COUNTER_FUNCS,
    since its raw value is a cumulative count since the process started;
  - at least one Prometheus annotation query (restarts, resizes) besides the built-in one.

The rules file lets `promtool check rules` parse (and type check) every expression of
panels, annotations and variables with Prometheus's own parser;
tests/e2e/prometheus_test.sh runs the same expressions against a live Prometheus.
"""
import json
import re
import sys

MIN_SCHEMA_VERSION = 39

# Grafana unit ids the dashboard may use (grafana-data's valueFormats); extend as needed.
UNITS = {"none", "short", "percent", "percentunit", "s", "ms", "us", "ns", "bytes",
         "decbytes", "Bps", "binBps", "bps", "reqps", "ops", "hertz", "dateTimeAsIso"}
CUSTOM_UNIT = re.compile(r"^(count|suffix|prefix|si):.+$")
# Functions whose argument may be a counter's raw series.
COUNTER_FUNCS = {"rate", "irate", "increase", "changes", "resets"}
COUNTER_SERIES = re.compile(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*(_total|_sum|_count|_bucket)\b")
STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def substitute(expr, job, rank):
    """Grafana's variables and macros, replaced as Grafana would at query time."""
    for macro in ("$__rate_interval", "$__interval", "$__range"):
        expr = expr.replace(macro, "1m")
    return expr.replace("$job", job).replace("$rank", rank)


def panels(dash):
    for p in dash["panels"]:
        yield p
        for sub in p.get("panels", []):
            yield sub


def raw_counters(expr):
    """Counter series of `expr` not directly inside one of COUNTER_FUNCS: the innermost
    call or parenthesis around each counter selector must be such a function."""
    # Blank string literals (label values) out, keeping offsets.
    code = STRING_LITERAL.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', expr)
    enclosing = []  # per open "(": the identifier right before it, or ""
    raw = []
    i = 0
    while i < len(code):
        c = code[i]
        if c == "(":
            name = re.search(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*$", code[:i])
            enclosing.append(name.group(1) if name else "")
        elif c == ")":
            if enclosing:
                enclosing.pop()
        elif c == "{" or c == "[":
            # Label matchers and range durations hold no series.
            i = code.index("}" if c == "{" else "]", i)
        else:
            m = COUNTER_SERIES.match(code, i)
            if m and (i == 0 or not re.match(r"[a-zA-Z0-9_:]", code[i - 1])):
                if not enclosing or enclosing[-1] not in COUNTER_FUNCS:
                    raw.append(m.group())
                i = m.end()
                continue
        i += 1
    return raw


def unit_ok(unit):
    return unit in UNITS or bool(CUSTOM_UNIT.match(unit or ""))


def check_policy(dash):
    errors = []
    for p in panels(dash):
        title = p.get("title")
        defaults = p.get("fieldConfig", {}).get("defaults", {})
        if p["type"] in ("timeseries", "stat"):
            if not defaults.get("unit"):
                errors.append("panel %r has no unit (fieldConfig.defaults.unit)" % title)
            elif not unit_ok(defaults["unit"]):
                errors.append("panel %r: unknown unit %r" % (title, defaults["unit"]))
        if p["type"] == "stat":
            steps = defaults.get("thresholds", {}).get("steps") or []
            values = [s.get("value") for s in steps[1:]]
            if not steps or steps[0].get("value") is not None:
                errors.append("panel %r: a stat panel needs thresholds starting with a base "
                              "step (value null)" % title)
            elif None in values or values != sorted(values):
                errors.append("panel %r: threshold steps must ascend" % title)
        for t in p.get("targets") or []:
            for counter in raw_counters(t.get("expr", "")):
                errors.append("panel %r plots the raw counter %s: wrap it in one of %s"
                              % (title, counter, ", ".join(sorted(COUNTER_FUNCS))))
    queries = annotation_queries(dash)
    if not queries:
        errors.append("no Prometheus annotation queries (restarts, resizes)")
    for a in queries:
        for counter in raw_counters(a.get("expr", "")):
            errors.append("annotation %r marks the raw counter %s" % (a.get("name"), counter))
    return errors


def annotation_queries(dash):
    """The annotation queries with a PromQL expression (not the built-in one)."""
    return [a for a in dash.get("annotations", {}).get("list", [])
            if not a.get("builtIn") and a.get("expr", "").strip()]


def check(dash):
    errors = []
    if dash.get("schemaVersion", 0) < MIN_SCHEMA_VERSION:
        errors.append("schemaVersion %s < %d" % (dash.get("schemaVersion"), MIN_SCHEMA_VERSION))
    for key in ("uid", "title"):
        if not dash.get(key):
            errors.append("no %s" % key)
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    for name in ("job", "rank"):
        if name not in variables:
            errors.append("no template variable %s" % name)
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append("no template variable datasource of type datasource (prometheus)")
    for a in dash.get("annotations", {}).get("list", []):
        if not a.get("builtIn") and a.get("datasource", {}).get("uid") != "${datasource}":
            errors.append("annotation %r does not use ${datasource}" % a.get("name"))
    ids = [p.get("id") for p in panels(dash)]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append("panel ids missing or not unique: %s" % ids)
    cells = {}
    for p in panels(dash):
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")):
            errors.append("panel %r: gridPos needs integer x, y, w, h" % p.get("title"))
            continue
        if g["x"] < 0 or g["w"] <= 0 or g["x"] + g["w"] > 24:
            errors.append("panel %r: gridPos outside the 24-column grid" % p.get("title"))
        for cx in range(g["x"], g["x"] + g["w"]):
            for cy in range(g["y"], g["y"] + g["h"]):
                if (cx, cy) in cells:
                    errors.append("panels %r and %r overlap" % (cells[(cx, cy)], p.get("title")))
                    break
                cells[(cx, cy)] = p.get("title")
            else:
                continue
            break
        if p["type"] == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errors.append("panel %r does not use the datasource ${datasource}" % p.get("title"))
        targets = p.get("targets") or []
        if not targets:
            errors.append("panel %r has no targets" % p.get("title"))
        for t in targets:
            if not t.get("expr", "").strip() or not t.get("refId"):
                errors.append("panel %r: a target without expr or refId" % p.get("title"))
    return errors + check_policy(dash)


def expressions(dash, job, rank):
    """(kind, title, expression) of every panel target, annotation and query variable."""
    for p in panels(dash):
        for t in p.get("targets", []):
            yield "panel", p["title"], substitute(t["expr"], job, rank)
    for a in annotation_queries(dash):
        yield "annotation", a["name"], substitute(a["expr"], job, rank)
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            # label_values(SELECTOR, label) runs SELECTOR as a series query.
            if q.startswith("label_values(") and "," in q:
                yield "variable", v["name"], substitute(q[len("label_values("):q.rindex(",")], job, rank)


def main(path, mode, *args):
    dash = json.load(open(path))
    errors = check(dash)
    if errors:
        sys.exit("FAIL: " + "; ".join(errors))
    if mode == "exprs":
        rules = [{"record": "dashboard:expr_%d" % i, "expr": e}
                 for i, (_, _, e) in enumerate(expressions(dash, "j-000001", ".*"))]
        # JSON is YAML: no PyYAML needed.
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(args[0], "w"), indent=1)
        print("PASS: dashboard structure; %d expressions written" % len(rules))
    elif mode == "list":
        for kind, title, e in expressions(dash, args[0], args[1]):
            print(json.dumps([kind, title, e]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main(*sys.argv[1:])
