#!/usr/bin/env python3
"""bench/report.py — the benchmarks' report: verdicts and charts from results files.

Reads the results lines the programs wrote (bench/results.md: one JSON
object per run of an arm at a cell in a round), the controls
(bench/controls.csv) and the recorded verdicts (bench/verdicts.csv), and
writes bench/REPORT.md with the verdict table and SVG charts drawn by
gnuplot. Every number it prints comes from a results file it names.

The verdict rule (bench/results.md says why):
  per cell, the ratio of each round (arm ÷ baseline in the same round), R
  their median, s their half-range over R; the band is max(0.10, 2 s) of
  the limit. For "≥ L": met when R ≥ L (1 + band), missed when
  R ≤ L (1 − band), otherwise "cannot tell"; "≤ L" the other way round. A
  cell whose arm or baseline had errors is missed. A control: met when every
  cell is met, missed when every cell is missed, cannot tell when none is
  missed and some cannot tell, partial otherwise.

Standard library only; gnuplot (make deps-bench) for the charts, which are
left out, saying so, without it.
"""

import argparse
import csv
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import OrderedDict

BAND = 0.10  # the least band, a fraction of the limit
MET, MISSED, CANNOT, PARTIAL, NOTRUN = "met", "missed", "cannot tell", "partial", "not run"
STD = ("rate", "p50_ms", "p99_ms", "p999_ms", "cpu_us_op")


class ReportError(Exception):
    pass


# ---- results ------------------------------------------------------------------------


def read_results(paths):
    """The lines of every results file named (a directory: its *.jsonl), newest file per program."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.jsonl")))
        elif os.path.exists(p):
            files.append(p)
        else:
            raise ReportError(f"{p}: no such file or directory")
    newest = {}  # program -> (date, path, lines)
    for f in files:
        lines, seen = [], set()
        try:
            with open(f, encoding="utf-8") as fh:
                for k, line in enumerate(fh, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        o = json.loads(line, parse_constant=_no_constant)
                    except ValueError as e:
                        raise ReportError(f"{f}:{k}: not JSON: {e}")
                    why = check_line(o)
                    if why:
                        raise ReportError(f"{f}:{k}: {why}")
                    run = (o["arm"], cell_key(o), o["round"])
                    if run in seen:
                        raise ReportError(f"{f}:{k}: arm {o['arm']} round {o['round']} at this cell twice")
                    seen.add(run)
                    o["_file"] = f
                    lines.append(o)
        except UnicodeDecodeError as e:
            raise ReportError(f"{f}: not UTF-8: {e}")
        if not lines:
            continue
        prog, date = lines[0]["program"], lines[0]["date"]
        if any(o["program"] != prog for o in lines):
            raise ReportError(f"{f}: lines of more than one program")
        if any(o["date"] != date or o.get("cpu") != lines[0].get("cpu") for o in lines):
            raise ReportError(f"{f}: lines of more than one run (their date or cpu differ)")
        if prog not in newest or (date, f) > newest[prog][:2]:
            newest[prog] = (date, f, lines)
    return {prog: (f, lines) for prog, (_, f, lines) in newest.items()}


def _no_constant(name):
    raise ValueError(f"{name} is not a number a results line may hold")


def _num(v):
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def _scalar(v):
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


def check_line(o):
    """Why a results line is not one (bench/results.md), or None."""
    if not isinstance(o, dict):
        return "not an object"
    for key in ("program", "arm", "round", "date"):
        if key not in o:
            return f"no \"{key}\""
    if not isinstance(o["program"], str) or not re.fullmatch(r"[a-z0-9_]{1,32}", o["program"]):
        return "program is a name of [a-z0-9_]"
    if not isinstance(o["arm"], str) or not NAME.fullmatch(o["arm"]):
        return "arm is a name of [A-Za-z0-9_.+-]"
    if not isinstance(o["round"], int) or isinstance(o["round"], bool) or o["round"] < 1:
        return "round is a whole number from 1"
    if not isinstance(o["date"], str):
        return "date is a string"
    if o.get("n") is not None and (not isinstance(o["n"], int) or isinstance(o["n"], bool)):
        return "n is a whole number or null"
    if o.get("sync") not in (None, "FULL", "NORMAL"):
        return "sync is FULL, NORMAL or null"
    cell = o.get("cell")
    if cell is not None and (not isinstance(cell, dict) or not all(
            NAME.fullmatch(k) and _scalar(v) and NAME.fullmatch(str(v)) for k, v in cell.items())):
        return "cell maps names to names or whole numbers"
    e = o.get("errors", 0)
    if not isinstance(e, int) or isinstance(e, bool) or e < 0:
        return "errors is a whole number from 0"
    if not all(_num(o.get(k)) for k in STD):
        return f"{', '.join(STD)} are finite numbers or null"
    m = o.get("m")
    if m is not None and (not isinstance(m, dict) or not all(_num(v) for v in m.values())):
        return "m maps names to finite numbers or null"
    for key in ("cpu", "n_of", "commit"):
        if o.get(key) is not None and not isinstance(o[key], str):
            return f"{key} is a string"
    return None


def cell_key(o):
    """What identifies a cell, the arm left out: n, sync and the other dimensions."""
    return (o.get("n"), o.get("sync"), tuple(sorted((o.get("cell") or {}).items())))


def metric_of(o, name):
    if name.startswith("m."):
        v = (o.get("m") or {}).get(name[2:])
    else:
        v = o.get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def median(v):
    v = sorted(v)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


# ---- controls ---------------------------------------------------------------------------

FIELDS = ("id", "program", "what", "metric", "arm", "baseline", "where", "op", "limit")


def read_controls(path):
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and not r[0].startswith("#")]
    if not rows or tuple(rows[0]) != FIELDS:
        raise ReportError(f"{path}: the first line must be {','.join(FIELDS)}")
    seen = set()
    for k, r in enumerate(rows[1:], 2):
        if len(r) != len(FIELDS):
            raise ReportError(f"{path}:{k}: {len(r)} fields, want {len(FIELDS)}")
        c = dict(zip(FIELDS, (x.strip() for x in r)))
        if c["id"] in seen:
            raise ReportError(f"{path}:{k}: {c['id']} twice")
        seen.add(c["id"])
        if c["op"] not in (">=", "<="):
            raise ReportError(f"{path}:{k}: op is >= or <=, got {c['op']!r}")
        try:
            c["limit"] = float(c["limit"])
        except ValueError:
            raise ReportError(f"{path}:{k}: limit {c['limit']!r} is not a number")
        if not (math.isfinite(c["limit"]) and c["limit"] > 0):
            raise ReportError(f"{path}:{k}: limit is a number above 0 (a ratio), got {c['limit']}")
        m = re.fullmatch(r"(arm|cell|metric|value):(.+)", c["baseline"])
        if not m:
            raise ReportError(f"{path}:{k}: baseline is arm:NAME, cell:KEY=VALUE, metric:NAME or value:NUMBER")
        c["base_kind"], c["base"] = m.group(1), m.group(2)
        if c["base_kind"] == "cell":
            key, eq, val = c["base"].partition("=")
            if not eq or not val:
                raise ReportError(f"{path}:{k}: cell:KEY=VALUE, got {c['base']!r}")
            if key == "n" and not val.isdigit():
                raise ReportError(f"{path}:{k}: cell:n= takes a whole number, got {val!r}")
            c["base"] = (key, val)
        if c["base_kind"] == "value":
            try:
                c["base"] = float(c["base"])
            except ValueError:
                raise ReportError(f"{path}:{k}: value:{c['base']} is not a number")
            if not (math.isfinite(c["base"]) and c["base"] > 0):
                raise ReportError(f"{path}:{k}: value: is a number above 0, got {c['base']}")
        if not (c["metric"] in STD or c["metric"].startswith("m.")):
            raise ReportError(f"{path}:{k}: metric is one of {', '.join(STD)} or m.NAME")
        c["sel"] = {}
        for part in c["where"].split():
            key, eq, vals = part.partition("=")
            if not eq or not vals:
                raise ReportError(f"{path}:{k}: where takes KEY=V[|V...], got {part!r}")
            c["sel"][key] = vals.split("|")
        out.append(c)
    return out


def matches(o, sel):
    for key, vals in sel.items():
        if key == "n":
            v = o.get("n")
        elif key == "sync":
            v = o.get("sync")
        else:
            v = (o.get("cell") or {}).get(key)
        if v is None or str(v) not in vals:
            return False
    return True


def baseline_lines(lines, o, arm, change=None):
    """The baseline's lines at o's cell: arm's, at the same n (or none: an arm that does not vary
    in it) and sync (or none: an arm with no database; an exact match is preferred), its other
    dimensions a subset of o's; change (KEY, VALUE): o's own arm at the cell with KEY (n, sync or a
    cell key) set to VALUE."""
    cell = {k: str(v) for k, v in (o.get("cell") or {}).items()}
    n, sync = o.get("n"), o.get("sync")
    if change:
        key, val = change
        if key == "n":
            n = int(val)
        elif key == "sync":
            sync = val
        else:
            cell[key] = val
    found = [
        b
        for b in lines
        if b["arm"] == arm
        and (b.get("n") is None or b.get("n") == n)
        and (b.get("sync") is None or b.get("sync") == sync)
        and all(cell.get(k) == str(v) for k, v in (b.get("cell") or {}).items())
        and (not change or change[0] in ("n", "sync") or str((b.get("cell") or {}).get(change[0])) == change[1])
    ]
    exact = [b for b in found if b.get("sync") == sync and b.get("n") == n]
    return exact or found


def judge(op, limit, r, band):
    # a ratio exactly at an edge (0.825 over 0.75 × 1.1) counts as on it, whatever the floats say
    eps = 1e-9 * limit
    hi, lo = limit * (1 + band) - eps, limit * (1 - band) + eps
    if op == ">=":
        return MET if r >= hi else MISSED if r <= lo else CANNOT
    return MET if r <= lo else MISSED if r >= hi else CANNOT


def combine(verdicts):
    if not verdicts:
        return NOTRUN
    if all(v == MET for v in verdicts):
        return MET
    if all(v == MISSED for v in verdicts):
        return MISSED
    if MISSED not in verdicts:
        return CANNOT
    return PARTIAL


def evaluate(control, results):
    """The control's cells: [{label, ratio, band, verdict, rounds, errors, file}], and its verdict."""
    prog = control["program"]
    if prog not in results:
        return [], NOTRUN
    path, lines = results[prog]
    arm_lines = [o for o in lines if o["arm"] == control["arm"] and matches(o, control["sel"])]
    by_cell = OrderedDict()
    for o in arm_lines:
        by_cell.setdefault(cell_key(o), []).append(o)
    cells = []
    for key, rounds in by_cell.items():
        base_by_round = {}
        if control["base_kind"] == "arm":
            for b in baseline_lines(lines, rounds[0], control["base"]):
                base_by_round.setdefault(b["round"], b)
        elif control["base_kind"] == "cell":
            for b in baseline_lines(lines, rounds[0], control["arm"], control["base"]):
                base_by_round.setdefault(b["round"], b)
        ratios, errors = [], 0
        for o in sorted(rounds, key=lambda x: x["round"]):
            x = metric_of(o, control["metric"])
            errors += int(o.get("errors") or 0)
            if control["base_kind"] in ("arm", "cell"):
                b = base_by_round.get(o["round"])
                if b is None:
                    continue
                errors += int(b.get("errors") or 0)
                y = metric_of(b, control["metric"])
            elif control["base_kind"] == "metric":
                y = metric_of(o, "m." + control["base"] if control["base"] not in STD else control["base"])
            else:
                y = control["base"]
            if x is None or y is None or x <= 0 or y <= 0:
                continue  # a ratio of a value that is not above 0 says nothing
            ratios.append(x / y)
        label = cell_label(rounds[0])
        if not ratios:
            # a run that failed wrote its line with errors and no figure: missed, not absent
            cells.append({"label": label, "ratio": None, "band": None, "verdict": MISSED if errors else NOTRUN,
                          "rounds": 0, "errors": errors, "file": path})
            continue
        r = median(ratios)
        s = (max(ratios) - min(ratios)) / 2 / abs(r) if len(ratios) > 1 and r else 0.0
        band = max(BAND, 2 * s)
        v = MISSED if errors else judge(control["op"], control["limit"], r, band)
        cells.append({"label": label, "ratio": r, "band": band, "verdict": v, "rounds": len(ratios),
                      "errors": errors, "file": path})
    return cells, combine([c["verdict"] for c in cells if c["verdict"] != NOTRUN])


def cell_label(o):
    parts = []
    if o.get("n") is not None:
        parts.append(f"{o['n']} {o.get('n_of') or 'n'}")
    if o.get("sync"):
        parts.append(o["sync"])
    parts += [f"{k}={v}" for k, v in sorted((o.get("cell") or {}).items())]
    return " ".join(parts) or "—"


# ---- the record ---------------------------------------------------------------------------

RECORD_FIELDS = ("control", "cpu", "verdict", "ratios", "date", "commit")


def read_record(path):
    rec = {}
    if not os.path.exists(path):
        return rec
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return rec
    if tuple(rows[0]) != RECORD_FIELDS:
        raise ReportError(f"{path}: the first line must be {','.join(RECORD_FIELDS)}")
    for r in rows[1:]:
        if len(r) == len(RECORD_FIELDS):
            d = dict(zip(RECORD_FIELDS, r))
            rec[(d["control"], d["cpu"])] = d
    return rec


def write_record(path, rec):
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(RECORD_FIELDS)
        for key in sorted(rec):
            w.writerow([rec[key][f] for f in RECORD_FIELDS])


def cellmd(s):
    """Text for a Markdown table's cell: a bar would end it."""
    return str(s).replace("|", "\\|").replace("\n", " ")


def fmt_ratio(r):
    if r is None:
        return "–"
    return f"{r:.3g}×" if abs(r) < 100 else f"{r:.0f}×"


def fmt_num(v):
    if v is None:
        return "–"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


# ---- charts --------------------------------------------------------------------------------


def x_axis(lines):
    """What the charts put on x: the clients (n), or else the cell key with the most numeric values
    (bench/growth's database size); None when neither has two values."""
    if any(o.get("n") is not None for o in lines):
        return "n"
    vals = {}
    for o in lines:
        for k, v in (o.get("cell") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                vals.setdefault(k, set()).add(v)
    best = max(vals, key=lambda k: len(vals[k]), default=None)
    return best if best is not None and len(vals[best]) >= 2 else None


def x_of(o, xkey):
    return o.get("n") if xkey == "n" else (o.get("cell") or {}).get(xkey)


def series(lines, metric, xkey):
    """{sync: {series name: {x: [values over rounds]}}}, and {sync: {x: errors}}. A series is an arm
    at the other cell keys; where some series are curves, a lone point (bench/growth's settings at
    its largest size) is left out, and a name keeps only the keys that differ between series. An
    arm with no synchronous (no database of its own) is drawn in every panel."""
    def rest(o):
        return tuple(sorted((k, v) for k, v in (o.get("cell") or {}).items() if k != xkey))

    xs = {}
    for o in lines:
        if x_of(o, xkey) is not None:
            xs.setdefault((o["arm"], rest(o)), set()).add(x_of(o, xkey))
    curves = any(len(v) > 1 for v in xs.values())
    kept = {g for g, v in xs.items() if len(v) > 1 or not curves}
    seen = {}
    for _, r in kept:
        for k, v in r:
            seen.setdefault(k, set()).add(v)
    varying = {k for k, v in seen.items() if len(v) > 1}
    syncs = sorted({o.get("sync") for o in lines if o.get("sync")}) or ["—"]
    out, errs = OrderedDict(), OrderedDict()
    for o in lines:
        x = x_of(o, xkey)
        if x is None or (o["arm"], rest(o)) not in kept:
            continue
        v = metric_of(o, metric)
        extra = " ".join(f"{k}={c}" for k, c in rest(o) if k in varying)
        name = o["arm"] + (" " + extra if extra else "")
        for sync in [o["sync"]] if o.get("sync") else syncs:
            out.setdefault(sync, OrderedDict()).setdefault(name, {}).setdefault(x, [])
            if v is not None:
                out[sync][name][x].append(v)
            e = errs.setdefault(sync, {})
            e[x] = e.get(x, 0) + int(o.get("errors") or 0)
    return out, errs


def gp_quote(s):
    """A gnuplot string that is only text: single quotes (no backquote substitution, no escapes),
    a quote doubled, control characters dropped."""
    s = "".join(ch for ch in str(s) if ch >= " " and ch != "\x7f")
    return "'" + s.replace("'", "''") + "'"


# Twelve colours told apart in print and by most colour-blind readers; past
# twelve series the lines are dashed.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22", "#000000", "#aec7e8")


def chart_program(prog, lines, metric, what, ylabel, path):
    """Metric against clients (or the size, x_axis), one panel per synchronous, a line per arm.
    The script, or None."""
    xkey = x_axis(lines)
    if xkey is None:
        return None
    xname = next((o.get("n_of") for o in lines if o.get("n_of")), "clients") if xkey == "n" else xkey
    title = f"{prog}: {what} against {xname} (median; bars: the rounds' range)"
    data, errs = series(lines, metric, xkey)
    if not data or not any(v for s in data.values() for a in s.values() for v in a.values()):
        return None
    panels = sorted(data, key=lambda s: {"FULL": 0, "NORMAL": 1}.get(s, 2))
    names = []  # one colour per series in every panel
    for sync in panels:
        names += [n for n in data[sync] if n not in names]
    ns = sorted({n for s in data.values() for a in s.values() for n in a})
    logx = len(ns) > 2 and ns[0] > 0 and ns[-1] / ns[0] >= 10
    sc = [
        f"set terminal svg size {480 * len(panels)},{340 + 16 * ((len(names) + 1) // 2)} dynamic noenhanced "
        "font 'sans,11' background rgb 'white'",
        f"set output {gp_quote(path)}",
        "set key below font 'sans,9' samplen 2 maxcols 2",
        "set grid",
        "set yrange [0:*]",
        f"set ylabel {gp_quote(ylabel)}",
        f"set xlabel {gp_quote(xname)}",
    ]
    if logx:
        sc.append("set logscale x")
    sc.append(f"set multiplot layout 1,{len(panels)} title {gp_quote(title)}")
    for sync in panels:
        sc.append(f"set title {gp_quote('synchronous=' + sync if sync != '—' else '')}")
        e = errs.get(sync, {})
        clean = [n for n in ns if e.get(n, 0) == 0]
        sc.append("unset object")
        # The error-free region: the clients counts up to the first with an error, shaded.
        first_bad = next((n for n in ns if e.get(n, 0) > 0), None)
        top = max((n for n in clean if first_bad is None or n < first_bad), default=None)
        if top is not None:
            lo_x = ns[0] / 1.3 if logx else ns[0] - 0.5
            hi_x = top * 1.3 if logx else top + 0.5
            sc.append(f"set object 1 rect from {lo_x},graph 0 to {hi_x},graph 1 behind "
                      "fc rgb '#e8f5e9' fs solid 1.0 noborder")
            sc.append(f"set label 1 'error-free' at {lo_x},graph 0.97 left font 'sans,8' tc rgb '#2e7d32'")
        else:
            sc.append("unset label 1")
        if logx:
            sc.append(f"set xrange [{ns[0] / 1.3}:{ns[-1] * 1.3}]")
        else:
            sc.append(f"set xrange [{ns[0] - 0.5}:{ns[-1] + 0.5}]")
        plots = []
        for name in names:
            if name not in data[sync]:
                continue
            pts = data[sync][name]
            block = f"$d{len(plots)}"
            sc.append(f"{block} << EOD")
            for n in sorted(pts):
                v = pts[n]
                if v:
                    sc.append(f"{n} {median(v)} {min(v)} {max(v)}")
            sc.append("EOD")
            k = names.index(name)
            plots.append(f"{block} using 1:2:3:4 with yerrorlines lw 1.5 pt 7 ps 0.6 "
                         f"lc rgb '{PALETTE[k % len(PALETTE)]}' dt {1 + k // len(PALETTE)} title {gp_quote(name)}")
        bad = [n for n in ns if e.get(n, 0) > 0]
        if bad:
            sc.append("$bad << EOD")
            sc += [f"{n} 0" for n in bad]
            sc.append("EOD")
            plots.append("$bad using 1:2 with points pt 2 ps 1.5 lc rgb 'red' title 'errors'")
        sc.append("plot " + ", ".join(plots))
    sc.append("unset multiplot")
    return "\n".join(sc) + "\n"


def chart_controls(rows, path):
    """Every control cell's ratio over its limit (above 1 is better), the band around 1."""
    pts = []
    for c, cells, _ in rows:
        for x in cells:
            if x["ratio"] is None or x["ratio"] <= 0:
                continue
            q = x["ratio"] / c["limit"] if c["op"] == ">=" else c["limit"] / x["ratio"]
            pts.append((f"{c['id']} {x['label']}", q, x["band"], x["verdict"]))
    if not pts:
        return None
    h = max(300, 18 * len(pts) + 80)
    color = {MET: "#2e7d32", MISSED: "#c62828", CANNOT: "#f9a825", PARTIAL: "#ef6c00"}
    sc = [
        f"set terminal svg size 900,{h} dynamic noenhanced font 'sans,10' background rgb 'white'",
        f"set output {gp_quote(path)}",
        "set title 'Every control: its ratio over its limit (right of 1 is better; shaded: the band)'",
        "set logscale x",
        "set grid x",
        "unset key",
        f"set yrange [-1:{len(pts)}]",
        "set ytics (" + ", ".join(f"{gp_quote(p[0])} {i}" for i, p in enumerate(pts)) + ") font 'sans,8'",
        "set xlabel 'ratio ÷ limit'",
        "set arrow from 1,graph 0 to 1,graph 1 nohead lc rgb 'black' lw 1.5",
        "set xtics (0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32)",
    ]
    lo = min(min(p[1] for p in pts), 0.5)
    hi = max(max(p[1] for p in pts), 2)
    sc.append(f"set xrange [{lo / 1.2}:{hi * 1.2}]")
    sc.append("$c << EOD")
    for i, p in enumerate(pts):
        sc.append(f"{p[1]} {i} {1 - p[2]} {1 + p[2]} {int(color.get(p[3], '#777777')[1:], 16)}")
    sc.append("EOD")
    sc.append("plot $c using 3:2:($4-$3):(0) with vectors nohead lw 6 lc rgb '#dddddd', "
              "$c using 1:2:5 with points pt 7 ps 1 lc rgb variable")
    return "\n".join(sc) + "\n"


def draw(script, path, notes):
    gp = shutil.which("gnuplot")
    if not gp:
        notes.append(f"{os.path.basename(path)}: not drawn: no gnuplot (make deps-bench)")
        return False
    p = subprocess.run([gp], input=script, text=True, capture_output=True)
    if p.returncode != 0 or not os.path.exists(path):
        notes.append(f"{os.path.basename(path)}: gnuplot failed: {p.stderr.strip()[:300]}")
        return False
    return True


# ---- the report ------------------------------------------------------------------------------


def build(args):
    results = read_results(args.results)
    controls = read_controls(args.controls)
    record = read_record(args.record)
    rows = []
    for c in controls:
        cells, verdict = evaluate(c, results)
        rows.append((c, cells, verdict))

    cpus = sorted({(o.get("cpu") or "unknown").strip() for _, lines in results.values() for o in lines[:1]})
    if len(cpus) > 1:
        # verdicts are per CPU model: a report over two would record and check against neither
        raise ReportError("results of more than one CPU model (" + " / ".join(cpus) + "): report them apart")
    cpu = cpus[0] if cpus else "unknown"
    drift = []
    out_dir = os.path.dirname(os.path.abspath(args.out))
    chart_dir = args.charts
    os.makedirs(chart_dir, exist_ok=True)
    rel = lambda p: os.path.relpath(p, out_dir)  # noqa: E731
    notes = []

    md = ["# lith's benchmarks: the report", ""]
    md.append("Made by `make bench-report` (bench/report.py) from the results files below; the controls "
              "are bench/controls.csv, the verdict rule and the format bench/results.md. Do not edit: "
              "run it again.")
    md.append("")
    md.append(f"CPU: {cpu}.")
    md.append("")
    md.append("| program | results file | commit | date | rounds × seconds |")
    md.append("|---|---|---|---|---|")
    for prog in sorted(results):
        path, lines = results[prog]
        o = lines[0]
        md.append(f"| {prog} | [{os.path.basename(path)}]({rel(path)}) | {o.get('commit', '?')} | "
                  f"{o['date']} | {o.get('rounds', '?')} × {fmt_num(o.get('seconds'))} s"
                  f"{' (quick)' if o.get('quick') else ''} |")
    md.append("")

    counts = OrderedDict((v, 0) for v in (MET, CANNOT, PARTIAL, MISSED, NOTRUN))
    for _, _, v in rows:
        counts[v] += 1
    md.append("## Verdicts")
    md.append("")
    md.append(", ".join(f"{n} {v}" for v, n in counts.items()) + f" of {len(rows)} controls.")
    md.append("")
    md.append("| control | what | judged against | limit | ratio (band) per cell | verdict | recorded |")
    md.append("|---|---|---|---|---|---|---|")
    new_record = dict(record)
    for c, cells, verdict in rows:
        if c["base_kind"] == "arm":
            base = f"arm {c['base']}"
        elif c["base_kind"] == "cell":
            base = f"{c['arm']} at {c['base'][0]}={c['base'][1]}"
        elif c["base_kind"] == "metric":
            base = c["base"]
        else:
            base = fmt_num(c["base"])
        per = "<br>".join(
            f"{x['label']}: {fmt_ratio(x['ratio'])}"
            + (f" (±{x['band'] * 100:.0f}%, {x['rounds']} round{'s' if x['rounds'] != 1 else ''})"
               if x["band"] is not None else "")
            + (f" {x['errors']} errors" if x["errors"] else "")
            + f" {x['verdict']}"
            for x in cells
        ) or "not run"
        rk = (c["id"], cpu)
        old = record.get(rk)
        if old is None:
            was = "none for this CPU"
        elif old["verdict"] == verdict:
            was = f"{old['verdict']} ({old['date'][:10]})"
        else:
            was = f"**drift**: {old['verdict']} ({old['date'][:10]})"
            drift.append(f"{c['id']}: recorded {old['verdict']} on {old['date'][:10]}, now {verdict}")
        lim = ("≥ " if c["op"] == ">=" else "≤ ") + f"{c['limit']:g}"
        md.append(f"| {cellmd(c['id'])} | {cellmd(c['what'])} | {cellmd(base)} | {lim} | {cellmd(per)} | "
                  f"**{verdict}** | {cellmd(was)} |")
        if verdict != NOTRUN:
            first = next(iter(results[c["program"]][1]))
            new_record[rk] = {"control": c["id"], "cpu": cpu, "verdict": verdict,
                              "ratios": " ".join(f"{x['ratio']:.4g}" for x in cells if x["ratio"] is not None),
                              "date": first["date"], "commit": first.get("commit", "?")}
    md.append("")
    md.append("The band is max(10 %, twice the rounds' half-range) of the limit: a ratio inside it is "
              "*cannot tell*, never *met* (bench/results.md).")
    md.append("")
    if drift:
        md.append("### Drift against the record (bench/verdicts.csv, this CPU)")
        md.append("")
        md += [f"- {d}" for d in drift]
        md.append("")

    md.append("## Charts")
    md.append("")
    svg = os.path.join(chart_dir, "controls.svg")
    sc = chart_controls(rows, svg)
    if sc and draw(sc, svg, notes):
        md.append(f"![every control's ratio over its limit]({rel(svg)})")
        md.append("")
    for prog in sorted(results):
        path, lines = results[prog]
        for metric, ylabel, what in (("rate", "operations/s", "throughput"), ("p99_ms", "p99, ms", "p99")):
            svgp = os.path.join(chart_dir, f"{prog}-{what}.svg")
            sc = chart_program(prog, lines, metric, what, ylabel, svgp)
            if sc and draw(sc, svgp, notes):
                md.append(f"### {prog}: {what}")
                md.append("")
                md.append(f"![{prog} {what}]({rel(svgp)})")
                md.append("")
    if notes:
        md.append("Not drawn:")
        md.append("")
        md += [f"- {n}" for n in notes]
        md.append("")
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(md))
    return rows, drift, new_record


def save(paths, into):
    """The newest results file of each program, copied into `into`; older files of those programs removed."""
    results = read_results(paths)
    os.makedirs(into, exist_ok=True)
    for prog, (path, _) in results.items():
        dst = os.path.join(into, os.path.basename(path))
        if os.path.abspath(path) == os.path.abspath(dst):
            continue
        for old in glob.glob(os.path.join(into, "*.jsonl")):
            with open(old, encoding="utf-8") as fh:
                first = fh.readline()
            try:
                if json.loads(first).get("program") == prog:
                    os.remove(old)
            except ValueError:
                pass
        shutil.copyfile(path, dst)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="the benchmarks' report: verdicts and charts")
    ap.add_argument("results", nargs="*",
                    help="results files or directories, the newest file per program (default bench/results, "
                    "or bench/record, the recorded run, when bench/results has none)")
    ap.add_argument("--controls", default=os.path.join(here, "controls.csv"))
    ap.add_argument("--record", default=os.path.join(here, "verdicts.csv"))
    ap.add_argument("--out", default=os.path.join(here, "REPORT.md"))
    ap.add_argument("--charts", default=None, help="where the SVGs go (default: charts/ beside --out)")
    ap.add_argument("--write-record", action="store_true", help="record this run's verdicts for its CPU")
    ap.add_argument("--check", action="store_true", help="exit 1 when a verdict drifted from the record")
    ap.add_argument("--save", metavar="DIR", help="copy the newest results file of each program into DIR "
                    "(replacing that program's file there) and report from DIR: the recorded run")
    args = ap.parse_args(argv)
    if not args.results:
        fresh = os.path.join(os.path.dirname(here), "bench", "results")
        args.results = [fresh if glob.glob(os.path.join(fresh, "*.jsonl")) else os.path.join(here, "record")]
    if args.charts is None:
        args.charts = os.path.join(os.path.dirname(os.path.abspath(args.out)), "charts")
    try:
        if args.save:
            save(args.results, args.save)
            args.results = [args.save]
        rows, drift, new_record = build(args)
    except (ReportError, OSError) as e:
        print(f"bench/report: {e}", file=sys.stderr)
        return 2
    print(f"bench/report: {args.out}: " + ", ".join(f"{c['id']} {v}" for c, _, v in rows))
    if args.write_record:
        write_record(args.record, new_record)
        print(f"bench/report: recorded in {args.record}")
    if drift:
        for d in drift:
            print(f"bench/report: drift: {d}", file=sys.stderr)
        if args.check:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
