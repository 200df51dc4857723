#!/usr/bin/env bash
# Charts control-plane benchmark results: Baton's coordinator against the TCPStore baseline.
#
#   bench/control_plane/plot.sh RESULTS_FILE OUT.png
#
# RESULTS_FILE holds lines of either kind (other lines, e.g. run.sh's progress, are skipped):
#   result workers=N key=value ...     bench/control_plane/load_generator (Baton)
#   tcpstore clients=N key=value ...   bench/control_plane/tcpstore_baseline.py
# Several lines per N are repeats: each point is the median over them, with min/max as
# error bars. Non-numeric values are ignored; points whose median is <= 0 are left out
# (the axes are logarithmic). One PNG, 2x2 panels, N on a log x axis, log y:
#   (a) Baton submit_to_running_s (and submit_to_last_start_s) vs TCPStore rendezvous_s
#   (b) steady CPU s/s: coord_cpu_per_s vs server_cpu_per_s
#   (c) RSS MiB: coord_rss_mib vs server_rss_mib
#   (d) whichever of PANEL_D_KEYS are present (Baton keys; TCPStore connect_s beside
#       Baton's register_s)
# Needs /usr/bin/gnuplot (pngcairo terminal, else png) and /usr/bin/python3 (stdlib only).
# Exit 0 iff OUT.png was written.
set -euo pipefail

PANEL_D_KEYS=${PANEL_D_KEYS:-"register_s finish_to_end_s detect_s restart_s watch_latency_p99_ms store_commits_per_s"}
GNUPLOT=${GNUPLOT:-/usr/bin/gnuplot}
PYTHON=${PYTHON:-/usr/bin/python3}

die() { echo "plot.sh: $*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 RESULTS_FILE OUT.png"
results=$1 out=$2
[[ -f $results && -r $results ]] || die "results file '$results' is not a readable file"
[[ $out == *.png ]] || die "output '$out' must end in .png"
out_dir=$(dirname -- "$out")
[[ -d $out_dir && -w $out_dir ]] || die "output directory '$out_dir' is not writable"
[[ -x $GNUPLOT ]] || die "gnuplot not found at $GNUPLOT (apt-get install gnuplot-nox)"
[[ -x $PYTHON ]] || die "python3 not found at $PYTHON"

if timeout 10 "$GNUPLOT" -e 'set terminal' 2>&1 | grep -qw pngcairo; then
  terminal="pngcairo size 1400,1000 font 'DejaVu Sans,10'"
else
  terminal="png size 1400,1000"
fi

TMP=$(mktemp -d -t baton-plot.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Medians per (series, N) into $TMP/*.dat, and the gnuplot script on stdout.
timeout 60 "$PYTHON" - "$results" "$TMP" "$terminal" "$TMP/out.png" "$PANEL_D_KEYS" \
  >"$TMP/plot.gp" <<'PYEOF'
import collections, math, statistics, sys

results, tmp, terminal, out, panel_d = sys.argv[1:6]
KINDS = {"result": "workers", "tcpstore": "clients"}  # Line kind -> key of N.

samples = collections.defaultdict(lambda: collections.defaultdict(list))  # (kind,key)->N->[v]
used = skipped = 0
with open(results) as f:
    for lineno, line in enumerate(f, 1):
        fields = line.split()
        if not fields or fields[0] not in KINDS:
            skipped += 1
            continue
        kind = fields[0]
        n_key = KINDS[kind]
        kv = {}
        for field in fields[1:]:
            if "=" not in field:
                sys.exit(f"plot.sh: {results}:{lineno}: '{field}' is not key=value")
            k, v = field.split("=", 1)
            kv[k] = v
        try:
            n = int(kv[n_key])
            if n <= 0:
                raise ValueError
        except (KeyError, ValueError):
            sys.exit(f"plot.sh: {results}:{lineno}: '{kind}' line needs {n_key}=N with N > 0")
        for k, v in kv.items():
            try:
                x = float(v)
            except ValueError:
                continue  # e.g. ended=SUCCEEDED
            if k != n_key and math.isfinite(x):
                samples[(kind, k)][n].append(x)
        used += 1
if not used:
    sys.exit(f"plot.sh: {results} has no 'result workers=N ...' or 'tcpstore clients=N ...' lines")
print(f"plot.sh: {used} result lines, {skipped} other lines skipped", file=sys.stderr)

all_n = sorted({n for per_n in samples.values() for n in per_n})
xlo, xhi = all_n[0] / 1.5, all_n[-1] * 1.5
# Tics at the measured N, unless there are too many to label.
xtics = f"set xtics ({', '.join(map(str, all_n))})" if len(all_n) <= 12 else "set xtics auto"


ys = []  # The current panel's plotted values, for its y range.


def series(kind, key, title, style):
    """Writes one series' medians; returns its plot clause, or None if nothing to plot."""
    rows = []
    for n, vals in sorted(samples.get((kind, key), {}).items()):
        med = statistics.median(vals)
        if med <= 0:
            continue
        lo = min(vals) if min(vals) > 0 else med  # A log axis has no room for <= 0.
        rows.append(f"{n} {med:.6g} {lo:.6g} {max(vals):.6g} {len(vals)}")
        ys.extend((lo, max(vals)))
    if not rows:
        return None
    path = f"{tmp}/{kind}-{key}.dat"
    with open(path, "w") as f:
        f.write("# N median min max count\n" + "\n".join(rows) + "\n")
    return f"'{path}' using 1:2:3:4 with yerrorlines {style} title '{title}'"


def yrange():
    """Whole decades around the panel's values, so every panel has labelled tics."""
    lo = 10 ** math.floor(math.log10(min(ys)))
    hi = 10 ** math.ceil(math.log10(max(ys)))
    return f"set yrange [{lo:g}:{hi if hi > lo else hi * 10:g}]"


KEY = "set key top left box opaque font ',9'"
BATON = "lw 2 pt 7 ps 1.2"
TCP = "lw 2 dt 2 pt 5 ps 1.2"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]

panels = [
    ("(a) submit -> RUNNING vs rendezvous", "seconds", [
        ("result", "submit_to_running_s", "Baton submit -> RUNNING", BATON),
        ("result", "submit_to_last_start_s", "Baton submit -> last StartAssignment", BATON),
        ("tcpstore", "rendezvous_s", "TCPStore rendezvous", TCP)]),
    ("(b) steady-state server CPU", "CPU seconds per second", [
        ("result", "coord_cpu_per_s", "Baton coordinator", BATON),
        ("tcpstore", "server_cpu_per_s", "TCPStore server", TCP)]),
    ("(c) server RSS", "MiB", [
        ("result", "coord_rss_mib", "Baton coordinator", BATON),
        ("tcpstore", "server_rss_mib", "TCPStore server (incl. torch)", TCP)]),
    ("(d) other figures", "value (unit in name: _s, _ms, _per_s)",
     [("result", k, f"Baton {k}", BATON) for k in panel_d.split()] +
     [("tcpstore", "connect_s", "TCPStore connect_s", TCP)]),
]

gp = [f"set terminal {terminal}", "set termoption noenhanced", f"set output '{out}'",
      "set multiplot layout 2,2 title 'Control plane at scale: Baton coordinator vs "
      "c10d TCPStore (median of repeats, min/max bars)'",
      "set grid xtics ytics mxtics mytics lc rgb '#dddddd'",
      KEY, "set bars small"]
for title, ylabel, specs in panels:
    clauses, ys[:] = [], []
    for kind, key, label, style in specs:
        c = series(kind, key, label,
                   f"{style} lc rgb '{COLORS[len(clauses) % len(COLORS)]}'")
        if c:
            clauses.append(c)
    gp += [f"set title '{title}'", "set xlabel 'N (workers / clients)'",
           f"set ylabel '{ylabel}'"]
    if clauses:
        gp += ["set logscale xy", f"set xrange [{xlo:g}:{xhi:g}]", yrange(), xtics,
               "set border; set tics", "plot " + ", \\\n     ".join(clauses)]
    else:
        gp += ["unset logscale", "set xrange [0:1]", "set yrange [0:1]",
               "set label 1 'no data' at graph 0.5,0.5 center", "unset border; unset tics",
               "unset key; unset xlabel; unset ylabel", "plot -1 notitle", "unset label 1",
               KEY]
gp.append("unset multiplot")
print("\n".join(gp))
PYEOF

timeout 60 "$GNUPLOT" "$TMP/plot.gp" 2>"$TMP/gnuplot.err" || {
  cat "$TMP/gnuplot.err" >&2
  die "gnuplot failed (errors above)"
}
# gnuplot warns (e.g. about skipped points) without failing; pass that on.
[[ -s $TMP/gnuplot.err ]] && sed 's/^/plot.sh: gnuplot: /' "$TMP/gnuplot.err" >&2
[[ -s $TMP/out.png ]] || die "gnuplot wrote no PNG"
mv -f -- "$TMP/out.png" "$out" || die "cannot write '$out'"
echo "plot.sh: wrote $out" >&2
