"""Checks a file against the Trace Event Format (JSON object form) as Chrome's trace viewer
and Perfetto read it, for the events Baton writes: complete events ("X") and metadata
("M").

    trace_format_check.py TRACE.json

Rules: the file is strict JSON (no NaN, no trailing commas); a top-level object with a
"traceEvents" list and an optional "displayTimeUnit" of "ms" or "ns"; every event an object
with a string "name", "ph" one of X/M, integer "pid" and "tid"; X events: numeric "ts" and
"dur" >= 0 (microseconds), optional string "cat", optional object "args"; M events:
name process_name/thread_name with a string args.name, or process_sort_index/
thread_sort_index with an integer args.sort_index. Exit 0 and "PASS ..." if valid, else 1
with one line per problem.
"""
import json
import sys

META = {"process_name": ("name", str), "thread_name": ("name", str),
        "process_sort_index": ("sort_index", int), "thread_sort_index": ("sort_index", int)}


def problems(doc):
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    out = []
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        out.append("displayTimeUnit %r is not ms or ns" % doc["displayTimeUnit"])
    for i, e in enumerate(doc["traceEvents"]):
        where = "traceEvents[%d]" % i
        if not isinstance(e, dict):
            out.append("%s: not an object" % where)
            continue
        if not isinstance(e.get("name"), str):
            out.append("%s: no string name" % where)
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int) or isinstance(e.get(key), bool):
                out.append("%s: %s is not an integer" % (where, key))
        ph = e.get("ph")
        if ph == "X":
            for key in ("ts", "dur"):
                v = e.get(key)
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    out.append("%s: %s is not a number" % (where, key))
            if isinstance(e.get("dur"), (int, float)) and e["dur"] < 0:
                out.append("%s: negative dur" % where)
            if "cat" in e and not isinstance(e["cat"], str):
                out.append("%s: cat is not a string" % where)
            if "args" in e and not isinstance(e["args"], dict):
                out.append("%s: args is not an object" % where)
        elif ph == "M":
            want = META.get(e.get("name"))
            args = e.get("args")
            if want is None:
                out.append("%s: unknown metadata event %r" % (where, e.get("name")))
            elif not isinstance(args, dict) or not isinstance(args.get(want[0]), want[1]):
                out.append("%s: %s needs args.%s" % (where, e.get("name"), want[0]))
        else:
            out.append("%s: ph %r is not X or M" % (where, ph))
    return out


def main(path):
    def no_constants(name):
        raise ValueError("not strict JSON: %s" % name)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_constant=no_constants)
    except (ValueError, UnicodeDecodeError) as e:
        print("%s: %s" % (path, e))
        return 1
    found = problems(doc)
    for p in found:
        print("%s: %s" % (path, p))
    if found:
        return 1
    print("PASS: %s: %d events" % (path, len(doc["traceEvents"])))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
