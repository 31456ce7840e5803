#!/usr/bin/env python3
"""bench/report.py's own test: the verdict rule, the report and the record.

Results lines are made here, one program "t" with arms a and b at n = 1 and
8, FULL and NORMAL, in rounds whose ratios are chosen to land on each side
of a limit and inside its band; and the results files of a real run of
every program (bench/test/recorded/, a `make bench BENCH_ARGS=--quick`)
go through the whole report with the project's controls. Run by `make test`
(bench/test/report.mk), standard library only; the charts need gnuplot and
are checked when it is there.
"""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import report  # noqa: E402

RECORDED = os.path.join(HERE, "recorded")


def line(arm, n, sync, rnd, rate, rounds=3, errors=0, date="2026-12-07T00:00:00Z", cell=None, **m):
    return {"v": 1, "program": "t", "workload": "w", "arm": arm, "n": n, "n_of": "producers", "sync": sync,
            "cell": cell or {}, "round": rnd, "rounds": rounds, "rate": rate, "p50_ms": None,
            "p99_ms": m.pop("p99", None), "p999_ms": None, "cpu_us_op": None, "errors": errors, "sampled": False,
            "wall_s": 1.0, "m": m, "seconds": 1, "warmup": 0.25, "quick": False, "commit": "abc", "cpu": "Test CPU",
            "nproc": 2, "date": date}


CONTROL_HEAD = "id,program,what,metric,arm,baseline,where,op,limit\n"


class Rig:
    """A scratch directory with a results file, a controls file and a record."""

    def __init__(self, lines, controls, record=None):
        self.dir = tempfile.mkdtemp(prefix="lith-report-")
        self.results = os.path.join(self.dir, "results")
        os.mkdir(self.results)
        with open(os.path.join(self.results, "t-20261207-000000.jsonl"), "w") as f:
            for o in lines:
                f.write(json.dumps(o) + "\n")
        self.controls = os.path.join(self.dir, "controls.csv")
        with open(self.controls, "w") as f:
            f.write(CONTROL_HEAD + controls)
        self.record = os.path.join(self.dir, "verdicts.csv")
        if record is not None:
            with open(self.record, "w") as f:
                f.write(record)
        self.out = os.path.join(self.dir, "REPORT.md")

    def run(self, *extra):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = report.main([self.results, "--controls", self.controls, "--record", self.record, "--out", self.out,
                              *extra])
        self.stdout, self.stderr = out.getvalue(), err.getvalue()
        return rc

    def text(self):
        with open(self.out) as f:
            return f.read()

    def verdicts(self):
        """{control id: verdict} from the report's table."""
        out = {}
        for row in self.text().splitlines():
            cols = [c.strip() for c in row.split("|")]
            if len(cols) > 7 and cols[6].startswith("**"):
                out[cols[1]] = cols[6].strip("*")
        return out

    def close(self):
        shutil.rmtree(self.dir)


def pairs(ratios, n=8, sync="NORMAL", base=1000.0, **kw):
    """Arm a at ratios[i] × arm b in round i + 1."""
    out = []
    for i, r in enumerate(ratios, 1):
        out.append(line("b", n, sync, i, base, rounds=len(ratios), **kw))
        out.append(line("a", n, sync, i, base * r, rounds=len(ratios), **kw))
    return out


class VerdictRule(unittest.TestCase):
    def judge(self, ratios, op=">=", limit=2.0, **kw):
        rig = Rig(pairs(ratios, **kw), f"c,t,x,rate,a,arm:b,n=8,{op},{limit}\n")
        try:
            self.assertEqual(rig.run(), 0, rig.stderr)
            return rig.verdicts()["c"]
        finally:
            rig.close()

    def test_clearly_above_is_met(self):
        self.assertEqual(self.judge([2.5, 2.5, 2.5]), "met")

    def test_clearly_below_is_missed(self):
        self.assertEqual(self.judge([1.5, 1.5, 1.5]), "missed")

    def test_inside_the_band_above_the_limit_is_cannot_tell_never_met(self):
        # 2.15 ≥ 2 but inside 2 × (1 ± 0.10)
        self.assertEqual(self.judge([2.15, 2.15, 2.15]), "cannot tell")
        self.assertEqual(self.judge([2.15]), "cannot tell")

    def test_inside_the_band_below_the_limit_is_cannot_tell(self):
        self.assertEqual(self.judge([1.85, 1.85, 1.85]), "cannot tell")

    def test_the_band_edges(self):
        self.assertEqual(self.judge([2.2, 2.2, 2.2]), "met")  # exactly L (1 + 0.10)
        self.assertEqual(self.judge([1.8, 1.8, 1.8]), "missed")  # exactly L (1 − 0.10)

    def test_scatter_widens_the_band(self):
        # median 2.5 is 25 % over the limit, but the rounds span 1.5..3.5:
        # half-range 1.0 over 2.5 = 0.4, twice that a band of 80 %
        self.assertEqual(self.judge([1.5, 2.5, 3.5]), "cannot tell")
        self.assertEqual(self.judge([2.45, 2.5, 2.55]), "met")

    def test_at_most_limits(self):
        self.assertEqual(self.judge([0.5, 0.5, 0.5], op="<=", limit=1.0), "met")
        self.assertEqual(self.judge([0.95, 0.95, 0.95], op="<=", limit=1.0), "cannot tell")
        self.assertEqual(self.judge([1.5, 1.5, 1.5], op="<=", limit=1.0), "missed")

    def test_errors_miss_the_cell(self):
        self.assertEqual(self.judge([3.0, 3.0, 3.0], errors=1), "missed")

    def test_ratios_pair_rounds(self):
        # arm a's rounds are b's × 2.5 although b moves 10× between rounds
        out = []
        for i, base in enumerate((100.0, 1000.0, 10000.0), 1):
            out.append(line("b", 8, "NORMAL", i, base))
            out.append(line("a", 8, "NORMAL", i, base * 2.5))
        rig = Rig(out, "c,t,x,rate,a,arm:b,n=8,>=,2\n")
        try:
            rig.run()
            self.assertEqual(rig.verdicts()["c"], "met")
            self.assertIn("2.5×", rig.text())
        finally:
            rig.close()

    def test_a_control_over_cells(self):
        lines = pairs([3, 3, 3], n=1) + pairs([3, 3, 3], n=8)
        both_met = "c,t,x,rate,a,arm:b,n=1|8,>=,2\n"
        lines_mixed = pairs([3, 3, 3], n=1) + pairs([1, 1, 1], n=8)
        lines_cannot = pairs([3, 3, 3], n=1) + pairs([2.1, 2.1, 2.1], n=8)
        lines_missed = pairs([1, 1, 1], n=1) + pairs([1, 1, 1], n=8)
        for lines_, want in ((lines, "met"), (lines_mixed, "partial"), (lines_cannot, "cannot tell"),
                             (lines_missed, "missed")):
            rig = Rig(lines_, both_met)
            try:
                rig.run()
                self.assertEqual(rig.verdicts()["c"], want)
            finally:
                rig.close()

    def test_baselines_value_metric_and_cell(self):
        lines = [line("a", 8, "NORMAL", 1, 500.0, rounds=1, p99=4.0, bound=250.0),
                 line("a", 8, "NORMAL", 1, 400.0, rounds=1, cell={"mode": "X"}),
                 line("a", 8, "NORMAL", 1, 100.0, rounds=1, cell={"mode": "Y"})]
        controls = ("v,t,x,p99_ms,a,value:5,n=8,<=,1\n"  # 4 ms of 5: 0.8
                    "m,t,x,rate,a,metric:bound,n=8,>=,1.5\n"  # 500 over 250: 2
                    "k,t,x,rate,a,cell:mode=Y,mode=X,>=,3\n")  # 400 over 100: 4
        rig = Rig(lines, controls)
        try:
            self.assertEqual(rig.run(), 0, rig.stderr)
            self.assertEqual(rig.verdicts(), {"v": "met", "m": "met", "k": "met"})
        finally:
            rig.close()

    def test_not_run(self):
        rig = Rig(pairs([3]), "c,t,x,rate,a,arm:b,n=99,>=,2\nd,other,x,rate,a,arm:b,,>=,2\n")
        try:
            rig.run()
            self.assertEqual(rig.verdicts(), {"c": "not run", "d": "not run"})
        finally:
            rig.close()


class Attacks(unittest.TestCase):
    """What an attacker's hour found (2026-12-08): each once gave met, no drift, or ran a command."""

    def verdict(self, lines, controls):
        rig = Rig(lines, controls)
        try:
            rc = rig.run()
            return rc, (rig.verdicts() if rc == 0 else rig.stderr)
        finally:
            rig.close()

    def test_a_failed_cell_is_missed_not_absent(self):
        failed = [line("b", 2, "NORMAL", r, 100.0) for r in (1, 2, 3)]
        failed += [line("a", 2, "NORMAL", r, None, errors=7) for r in (1, 2, 3)]
        rc, v = self.verdict(pairs([3, 3, 3], n=1) + failed, "c,t,x,rate,a,arm:b,n=1|2,>=,2\n")
        self.assertEqual(v["c"], "partial")
        rc, v = self.verdict(failed, "c,t,x,rate,a,arm:b,n=2,>=,2\n")
        self.assertEqual(v["c"], "missed")

    def test_non_finite_and_duplicates_are_refused(self):
        lines = pairs([3, 3, 3])
        lines[1]["rate"] = float("nan")
        rc, err = self.verdict(lines, "c,t,x,rate,a,arm:b,,>=,2\n")
        self.assertEqual(rc, 2)
        rc, err = self.verdict(pairs([3, 3, 3]) + pairs([3]), "c,t,x,rate,a,arm:b,,>=,2\n")
        self.assertEqual(rc, 2)
        self.assertIn("twice", err)
        other = pairs([3, 3, 3])
        other[0]["date"] = "2026-12-09T00:00:00Z"
        rc, err = self.verdict(other, "c,t,x,rate,a,arm:b,,>=,2\n")
        self.assertIn("more than one run", err)

    def test_hostile_lines_are_refused_not_a_traceback(self):
        for bad in ({"arm": "x`touch /tmp/lith-pwned`"}, {"errors": -1}, {"errors": True}, {"cell": [1]},
                    {"round": "2"}, {"sync": 1}, {"program": "../../x"}, {"n": "64"}):
            lines = pairs([3])
            lines[1].update(bad)
            rc, err = self.verdict(lines, "c,t,x,rate,a,arm:b,,>=,2\n")
            self.assertEqual(rc, 2, bad)
            self.assertIn("results", "results " + err)
        self.assertFalse(os.path.exists("/tmp/lith-pwned"))

    def test_chart_text_runs_nothing(self):
        mark = os.path.join(tempfile.gettempdir(), f"lith-pwned-{os.getpid()}")
        rig = Rig(pairs([3, 3, 3], n=1) + pairs([3, 3, 3], n=8),
                  f"c`touch {mark}`,t,x,rate,a,arm:b,,>=,2\n")
        try:
            self.assertEqual(rig.run(), 0, rig.stderr)
            self.assertFalse(os.path.exists(mark))
        finally:
            rig.close()

    def test_the_exact_synchronous_baseline_first(self):
        lines = [line("c", 8, None, r, 100.0) for r in (1, 2, 3)]
        lines += [line("c", 8, "FULL", r, 400.0) for r in (1, 2, 3)]
        lines += [line("a", 8, "FULL", r, 200.0) for r in (1, 2, 3)]
        rc, v = self.verdict(lines, "y,t,x,rate,a,arm:c,,>=,1.5\n")
        self.assertEqual(v["y"], "missed")  # 200 over FULL's 400, not over the null line's 100

    def test_limits_above_zero(self):
        rc, err = self.verdict(pairs([3]), "c,t,x,rate,a,arm:b,,>=,-1\n")
        self.assertIn("above 0", err)
        rc, err = self.verdict(pairs([3]), "c,t,x,rate,a,value:-5,,<=,1\n")
        self.assertIn("above 0", err)

    def test_more_than_one_cpu_is_refused(self):
        other = [dict(o, program="u", cpu="Other CPU") for o in pairs([3])]
        rig = Rig(pairs([3]), "c,t,x,rate,a,arm:b,,>=,2\n")
        try:
            with open(os.path.join(rig.results, "u-20261207-000000.jsonl"), "w") as f:
                for o in other:
                    f.write(json.dumps(o) + "\n")
            self.assertEqual(rig.run(), 2)
            self.assertIn("more than one CPU model", rig.stderr)
        finally:
            rig.close()

    def test_band_edges_at_any_limit(self):
        for limit in (0.75, 3, 5):
            rc, v = self.verdict(pairs([limit * 1.1] * 3), f"c,t,x,rate,a,arm:b,,>=,{limit}\n")
            self.assertEqual(v["c"], "met", limit)
            rc, v = self.verdict(pairs([limit * 0.9] * 3), f"c,t,x,rate,a,arm:b,,>=,{limit}\n")
            self.assertEqual(v["c"], "missed", limit)


class Record(unittest.TestCase):
    def test_write_then_drift(self):
        rig = Rig(pairs([3, 3, 3]), "c,t,x,rate,a,arm:b,n=8,>=,2\n")
        try:
            self.assertEqual(rig.run("--write-record"), 0)
            with open(rig.record) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([(r["control"], r["cpu"], r["verdict"]) for r in rows], [("c", "Test CPU", "met")])
            # the same results again: as recorded, no drift
            self.assertEqual(rig.run("--check"), 0)
            self.assertIn("met (2026-12-07)", rig.text())
            # a newer run that misses: drift, and --check says so
            with open(os.path.join(rig.results, "t-20261208-000000.jsonl"), "w") as f:
                for o in pairs([1, 1, 1], date="2026-12-08T00:00:00Z"):
                    f.write(json.dumps(o) + "\n")
            self.assertEqual(rig.run(), 0)
            self.assertIn("**drift**: met", rig.text())
            self.assertEqual(rig.run("--check"), 1)
            self.assertIn("drift: c: recorded met on 2026-12-07, now missed", rig.stderr)
        finally:
            rig.close()

    def test_newest_file_per_program(self):
        rig = Rig(pairs([1, 1, 1]), "c,t,x,rate,a,arm:b,n=8,>=,2\n")
        try:
            with open(os.path.join(rig.results, "t-20261208-000000.jsonl"), "w") as f:
                for o in pairs([3, 3, 3], date="2026-12-08T00:00:00Z"):
                    f.write(json.dumps(o) + "\n")
            rig.run()
            self.assertEqual(rig.verdicts()["c"], "met")
            self.assertIn("t-20261208-000000.jsonl", rig.text())
            self.assertNotIn("t-20261207-000000.jsonl", rig.text())
        finally:
            rig.close()


class Refusals(unittest.TestCase):
    def refused(self, controls, lines=None, want=""):
        rig = Rig(lines if lines is not None else pairs([3]), controls)
        try:
            self.assertEqual(rig.run(), 2)
            self.assertIn(want, rig.stderr)
        finally:
            rig.close()

    def test_bad_controls(self):
        self.refused("c,t,x,rate,a,arm:b,n=8,>,2\n", want="op is >= or <=")
        self.refused("c,t,x,rate,a,arm:b,n=8,>=,two\n", want="is not a number")
        self.refused("c,t,x,rate,a,b,n=8,>=,2\n", want="baseline is")
        self.refused("c,t,x,speed,a,arm:b,n=8,>=,2\n", want="metric is one of")
        self.refused("c,t,x,rate,a,arm:b,n8,>=,2\n", want="where takes")
        self.refused("c,t,x,rate,a,arm:b,n=8,>=,2\nc,t,x,rate,a,arm:b,n=8,>=,2\n", want="c twice")

    def test_bad_results(self):
        rig = Rig([], "c,t,x,rate,a,arm:b,n=8,>=,2\n")
        try:
            with open(os.path.join(rig.results, "t-20261207-000000.jsonl"), "w") as f:
                f.write('{"program": "t"\n')
            self.assertEqual(rig.run(), 2)
            self.assertIn("not JSON", rig.stderr)
        finally:
            rig.close()


class Recorded(unittest.TestCase):
    """A real run's results file through the whole report, with the project's controls."""

    def test_report_of_a_recorded_run(self):
        files = sorted(os.listdir(RECORDED))
        self.assertTrue(files, "no recorded results")
        d = tempfile.mkdtemp(prefix="lith-report-")
        try:
            out = os.path.join(d, "REPORT.md")
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as err:
                rc = report.main([RECORDED, "--record", os.path.join(d, "none.csv"), "--out", out])
            self.assertEqual(rc, 0, err.getvalue())
            text = open(out).read()
            controls = report.read_controls(os.path.join(os.path.dirname(HERE), "controls.csv"))
            for c in controls:
                self.assertIn(f"| {c['id']} |", text)
            for f in files:
                self.assertIn(f, text)
            # every control of a recorded program has a verdict other than "not run"
            programs = {json.loads(open(os.path.join(RECORDED, f)).readline())["program"] for f in files}
            rig_verdicts = {}
            for row in text.splitlines():
                cols = [c.strip() for c in row.split("|")]
                if len(cols) > 7 and cols[6].startswith("**"):
                    rig_verdicts[cols[1]] = cols[6].strip("*")
            for c in controls:
                if c["program"] in programs:
                    self.assertNotEqual(rig_verdicts[c["id"]], "not run", c["id"])
            if shutil.which("gnuplot"):
                charts = os.listdir(os.path.join(d, "charts"))
                self.assertIn("controls.svg", charts)
                for name in charts:
                    with open(os.path.join(d, "charts", name)) as f:
                        head = f.read(400)
                    self.assertIn("<svg", head, name)
                    self.assertIn(f"](charts/{name})", text)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    r = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]))
    n, bad = r.testsRun, len(r.failures) + len(r.errors)
    print(f"[==========] {n} test(s) run.")
    print(f"[  PASSED  ] {n - bad} test(s).")
    if bad:
        print(f"[  FAILED  ] {bad} test(s), listed above.")
    sys.exit(1 if bad else 0)
