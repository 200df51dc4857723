"""Checks deploy/grafana/baton.json offline, with Debian packages only.

  dashboard_check.py DASHBOARD.json exprs OUT.yml   # structure; write every PromQL
                                                    # expression as a recording rule
  dashboard_check.py DASHBOARD.json list JOB RANK   # print substituted expressions, one
                                                    # JSON string a line ("title\\texpr")

Structure: JSON parses; a current schemaVersion (>= 39); uid and title; template
variables `job` and `rank`; unique panel ids; every non-row panel has a datasource and at
least one target with a non-empty expr and a refId; gridPos within the 24-column grid and
no two panels overlapping. The rules file lets `promtool check rules` parse (and type
check) every expression with Prometheus's own parser; tests/e2e/prometheus_test.sh runs
the same expressions against a live Prometheus.
"""
import json
import sys

MIN_SCHEMA_VERSION = 39


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
        if not p.get("datasource"):
            errors.append("panel %r has no datasource" % p.get("title"))
        targets = p.get("targets") or []
        if not targets:
            errors.append("panel %r has no targets" % p.get("title"))
        for t in targets:
            if not t.get("expr", "").strip() or not t.get("refId"):
                errors.append("panel %r: a target without expr or refId" % p.get("title"))
    return errors


def expressions(dash, job, rank):
    for p in panels(dash):
        for t in p.get("targets", []):
            yield p["title"], substitute(t["expr"], job, rank)
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            # label_values(SELECTOR, label) runs SELECTOR as a series query.
            if q.startswith("label_values(") and "," in q:
                yield "variable " + v["name"], substitute(q[len("label_values("):q.rindex(",")], job, rank)


def main(path, mode, *args):
    dash = json.load(open(path))
    errors = check(dash)
    if errors:
        sys.exit("FAIL: " + "; ".join(errors))
    if mode == "exprs":
        rules = [{"record": "dashboard:expr_%d" % i, "expr": e}
                 for i, (_, e) in enumerate(expressions(dash, "j-000001", ".*"))]
        # JSON is YAML: no PyYAML needed.
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(args[0], "w"), indent=1)
        print("PASS: dashboard structure; %d expressions written" % len(rules))
    elif mode == "list":
        for title, e in expressions(dash, args[0], args[1]):
            print(json.dumps([title, e]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main(*sys.argv[1:])
