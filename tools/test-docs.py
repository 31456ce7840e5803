#!/usr/bin/env python3
"""test-docs — run the shell examples of the documentation.

Usage: tools/test-docs.py [--bin DIR] [--path DIR]... [--src DIR]
                         [--prefix DIR] FILE.md...

Every fenced block opened with ```sh is an example a reader may paste, so
it is run, each block on its own:

  - in a new scratch directory (removed after), with bash -e -o pipefail,
    PATH starting with the built programs (lithd, lith, lith-node, kanban:
    their folders under --bin, default build/default), in a process group
    of its own that is killed when the block ends (servers it started in
    the background die with it, and the next block starts only once
    they are gone, so it can take their ports), at most TIMEOUT seconds,
    pip told never to ask a package index;
  - a line `#> TEXT` in the block is output the commands above it print:
    the block's whole stdout must be, line for line, the #> lines in
    order. In TEXT, `…` matches any run of characters (timings, ids,
    ports), and trailing blanks are ignored. A block without #> lines
    only has to succeed;
  - what a reader has besides the programs: $LITH is the source tree
    (--src: the reader's clone, whose files a block may read but must not
    write), and, with --prefix, lith as `make install PREFIX=DIR`
    installed it, found the way the README tells a reader to find it:
    DIR/bin on PATH, DIR/lib/pkgconfig on PKG_CONFIG_PATH, DIR/lib on
    LD_LIBRARY_PATH;
  - a block preceded by `<!-- test-docs: skip REASON -->` (the line just
    above its fence) is not run, and REASON is printed;
  - `<!-- test-docs: needs CMD... -->` runs it only if every CMD is on
    PATH (--path adds folders), else skips it saying which is missing;
  - other fences (```c, ```json, ```text, ```console, ...) are not run;
  - `<!-- test-docs: must-fail WHY -->` above a block turns it around: it
    passes when it fails (the runner's own test, tools/test/docs.md);
  - `<!-- test-docs: options CMD ARG... -->` above a Markdown table checks
    the table against what CMD ARG... (on PATH) prints: every option that
    begins one of its lines (the `--NAME`s before the first gap of two
    blanks, as in `  --db PATH   the database`) must be named in the
    table, and every `--NAME` the table names must be one of them. So an
    option can be neither missing from the reference nor stale in it
    (a must-fail line right above the mark turns it around).

Prints one line per block (with its seconds when 10 or more, and for a
failure the end of its output and of the *.log and *.out files it left),
"docs: N ran, N skipped, N failed" and
cmocka's closing lines (tools/run-tests.sh counts them); exits 1 if any
failed. Python's standard library only.
"""
import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT = 300  # a guard against a hang: CI machines run a block 2-3x slower than here
MARK = re.compile(r"^<!--\s*test-docs:\s*(skip|must-fail|needs|options)\s+(.*?)\s*-->\s*$")
OPTION = re.compile(r"(?<![-\w])--([a-z][a-z0-9-]*)")


def blocks(path):
    """(line, body, mark or None, its reason) of each ```sh block of path,
    and of each table marked `options` (its body: the table's lines)."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        m = MARK.match(lines[i])
        if m and m.group(1) == "options":
            start = i + 1
            table = []
            while start + len(table) < len(lines) and lines[start + len(table)].startswith("|"):
                table.append(lines[start + len(table)])
            above = MARK.match(lines[i - 1]) if i > 0 else None
            fails = above is not None and above.group(1) == "must-fail"
            out.append((start + 1, "\n".join(table), "options-must-fail" if fails else "options", m.group(2)))
            i = start + len(table)
            continue
        if fence.startswith("```") and fence != "```":
            lang = fence[3:].strip()
            start = i
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if lang == "sh":
                m = MARK.match(lines[start - 1]) if start > 0 else None
                out.append((start + 1, "\n".join(body) + "\n", m.group(1) if m else None, m.group(2) if m else ""))
        i += 1
    return out


def pattern(text):
    """A #> line as a regular expression: `…` is any run of characters."""
    parts = text.rstrip().split("…")
    return re.compile("^" + ".*".join(re.escape(p) for p in parts) + "$")


def compare(expected, stdout):
    """None if stdout is the expected lines, else what differs."""
    got = stdout.rstrip("\n").split("\n") if stdout.strip() else []
    got = [g.rstrip() for g in got]
    for k, want in enumerate(expected):
        if k >= len(got):
            return "line %d: expected %r, the output ended" % (k + 1, want)
        if not pattern(want).match(got[k]):
            return "line %d: expected %r, got %r" % (k + 1, want, got[k])
    if len(got) > len(expected):
        return "line %d: unexpected %r" % (len(expected) + 1, got[len(expected)])
    return None


def options_check(table, command, env):
    """None if the table names exactly the options command prints, else
    what differs."""
    if not table:
        return "no table right below the mark"
    try:
        p = subprocess.run(shlex.split(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot run %s: %s" % (command, e)
    printed = set()
    for l in p.stdout.split("\n"):
        if l.lstrip().startswith("--"):
            printed.update(OPTION.findall(re.split(r"\s{2,}", l.strip())[0]))
    if not printed:
        return "%s printed no options (exit %d)" % (command, p.returncode)
    named = set(OPTION.findall(table))
    why = []
    if printed - named:
        why.append("the table lacks %s" % ", ".join("--" + o for o in sorted(printed - named)))
    if named - printed:
        why.append("%s has no %s" % (command, ", ".join("--" + o for o in sorted(named - printed))))
    return "; ".join(why) or None


def environment(path_dirs, src, prefix):
    """What a block runs with: the programs on PATH, $LITH, the install."""
    env = dict(os.environ)
    if prefix:
        path_dirs = path_dirs + [os.path.join(prefix, "bin")]
        for var, sub in (("PKG_CONFIG_PATH", "lib/pkgconfig"), ("LD_LIBRARY_PATH", "lib")):
            env[var] = os.pathsep.join([os.path.join(prefix, sub)] + ([env[var]] if env.get(var) else []))
    env["PATH"] = os.pathsep.join(path_dirs + [env.get("PATH", "")])
    # The Python examples install the client from $LITH, which needs no
    # package index: never wait on one (a machine without network may
    # take long to say so).
    env.setdefault("PIP_NO_INDEX", "1")
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    if src:
        env["LITH"] = src
    return env


def run(body, env):
    """(exit status or 'timeout', stdout, stderr) of body in a scratch dir."""
    expected = [l.lstrip()[3:] if l.lstrip().startswith("#> ") else "" for l in body.split("\n")
                if l.lstrip().startswith("#>")]
    scratch = tempfile.mkdtemp(prefix="lith-docs-")
    # Output to files, not pipes: a server left in the background holds a
    # pipe open, and the block ends when its shell does.
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        try:
            p = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", body], cwd=scratch, env=env,
                                 stdout=fo, stderr=fe, text=True, start_new_session=True)
            try:
                status = p.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                status = "timeout"
            try:
                os.killpg(p.pid, signal.SIGKILL)  # whatever it left running
            except ProcessLookupError:
                pass
            p.wait()
            gone(p.pid)
            logs = scratch_logs(scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    return status, out, err, expected, logs


def gone(pgid, limit=30.0):
    """Wait until no live process of group pgid is left: SIGKILL is only
    sent when killpg returns, and a lithd of this block still listening
    (or dying in a slow fsync) would make the next block that uses its
    port fail to bind. Zombies count as gone: they hold no socket."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        left = False
        try:
            pids = [d for d in os.listdir("/proc") if d.isdigit()]
        except OSError:
            return  # no /proc: nothing to wait by
        for d in pids:
            try:
                with open("/proc/%s/stat" % d) as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()  # state ppid pgrp ...
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                left = True
                break
        if not left:
            return
        time.sleep(0.05)


def scratch_logs(scratch):
    """The last lines of the *.log and *.out files a block left, for the
    report of a failure: a server started in the background writes its
    error there, not to the block's output."""
    logs = []
    for name in sorted(os.listdir(scratch)):
        if name.endswith((".log", ".out")) and os.path.isfile(os.path.join(scratch, name)):
            with open(os.path.join(scratch, name), errors="replace") as f:
                text = f.read()
            if text.strip():
                logs.append((name, text))
    return logs


def main():
    ap = argparse.ArgumentParser(description="run the ```sh examples of the docs")
    ap.add_argument("--bin", default="build/default", help="the build directory")
    ap.add_argument("--path", action="append", default=[], help="another folder for PATH (repeatable)")
    ap.add_argument("--src", help="the source tree, $LITH in the blocks")
    ap.add_argument("--prefix", help="where lith is installed (make install PREFIX=)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    base = os.path.abspath(a.bin)
    path_dirs = [os.path.join(base, d) for d in ("tools/lithd", "tools/lith", "tools/lith-node", "examples/kanban")]
    path_dirs += [os.path.abspath(d) for d in a.path if os.path.isdir(d)]
    env = environment(path_dirs, a.src and os.path.abspath(a.src), a.prefix and os.path.abspath(a.prefix))
    search = env["PATH"]
    ran = skipped = failed = 0
    for f in a.files:
        for line, body, mark, reason in blocks(f):
            where = "%s:%d" % (f, line)
            if mark == "needs":
                missing = [c for c in reason.split() if shutil.which(c, path=search) is None]
                if missing:
                    mark, reason = "skip", "needs %s, not found on PATH" % ", ".join(missing)
            if mark == "skip":
                skipped += 1
                print("skip %s: %s" % (where, reason))
                continue
            ran += 1
            if mark in ("options", "options-must-fail"):
                why = options_check(body, reason, env)
                if mark == "options-must-fail":
                    why = "the table matched %s" % reason if why is None else None
                print("%s %s: the options of %s%s" % ("ok  " if why is None else "FAIL", where, reason,
                                                    "" if why is None else ": " + why))
                failed += why is not None
                continue
            t0 = time.monotonic()
            status, out, err, expected, logs = run(body, env)
            took = time.monotonic() - t0
            slow = " (%.0f s)" % took if took >= 10 else ""
            why = None
            if status != 0:
                why = "exit %s" % status
            elif expected:
                why = compare(expected, out)
            if mark == "must-fail":
                why = "it did not fail (%s)" % reason if why is None else None
            if why is None:
                print("ok   %s%s" % (where, slow))
                continue
            failed += 1
            print("FAIL %s: %s (%.1f s)" % (where, why, took))
            for name, text in [("stdout", out), ("stderr", err)] + logs:
                if text.strip():
                    print("  %s:\n%s" % (name, "".join("    " + l + "\n" for l in text.rstrip("\n").split("\n")[-20:])),
                          end="")
    print("docs: %d ran, %d skipped, %d failed" % (ran, skipped, failed))
    print("[  PASSED  ] %d test(s)." % (ran - failed))
    if failed:
        print("[  FAILED  ] %d test(s)." % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
