#!/usr/bin/env python3
"""The peak RSS of a client reading one large answer, from a fake lithd.

    python3 clients/answer-rss.py [--mb 300] [--chunked] [--client python|node]
                                  [--src DIR] [--limit BYTES]

Serves one /v1/query answer of about MB megabytes (rows of 1000-character
text cells, Content-Length or --chunked) from this process, and runs the
client in a child process (python: DIR/lith, default clients/python/src;
node: DIR/lith.js, default clients/node) that calls query() once with a
max_answer_bytes / maxAnswerBytes of --limit (default 1 GiB, above the
answer). Prints the child's peak RSS (VmHWM of /proc/self/status: Linux)
after importing the client only, and after the call. --src points at another copy of the client (an older
commit's, for a before/after).
"""
import argparse
import http.server
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))

# VmHWM, the peak RSS of this process's memory since exec (getrusage's
# ru_maxrss would count the parent's, inherited through fork).
PY = r"""
import re, sys
sys.path.insert(0, sys.argv[1])
import lith
hwm = lambda: int(re.search(r"VmHWM:\s*(\d+)", open("/proc/self/status").read()).group(1))
base = hwm()
c = lith.Client(sys.argv[2], timeout=300)
if hasattr(c, "max_answer_bytes"):
    c.max_answer_bytes = int(sys.argv[3])
r = c.query("SELECT big")
print(base, hwm(), len(r[0]["rows"]))
"""

NODE = r"""
import fs from "node:fs";
const { Client } = await import(process.argv[1] + "/lith.js");
const hwm = () => Number(/VmHWM:\s*(\d+)/.exec(fs.readFileSync("/proc/self/status", "utf8"))[1]);
const base = hwm();
const c = new Client(process.argv[2], { timeout: 300000, maxAnswerBytes: Number(process.argv[3]) });
const r = await c.query("SELECT big");
console.log(base, hwm(), r[0].rows.length);
"""


def body_of(mb):
    cell = b'["' + b"x" * 1000 + b'"]'
    n = mb * 1000 * 1000 // (len(cell) + 1)
    return b'{"results":[{"changes":0,"last_insert_rowid":0,"columns":["v"],"rows":[' + \
        b",".join([cell] * n) + b"]}]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--chunked", action="store_true")
    ap.add_argument("--client", choices=["python", "node"], default="python")
    ap.add_argument("--src")
    ap.add_argument("--limit", type=int, default=1 << 30)
    a = ap.parse_args()
    body = body_of(a.mb)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if a.chunked:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                view = memoryview(body)
                for i in range(0, len(body), 1 << 20):
                    piece = view[i:i + (1 << 20)]
                    self.wfile.write(b"%x\r\n" % len(piece))
                    self.wfile.write(piece)
                    self.wfile.write(b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    if a.client == "python":
        cmd = [sys.executable, "-c", PY, a.src or os.path.join(HERE, "python", "src"), url, str(a.limit)]
    else:
        src = os.path.abspath(a.src or os.path.join(HERE, "node"))
        cmd = ["node", "--input-type=module", "-e", NODE, "--", src, url, str(a.limit)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"the client failed (exit {run.returncode}):\n{run.stderr}")
    out = run.stdout.split()
    srv.shutdown()
    base, peak, rows = int(out[0]), int(out[1]), int(out[2])
    print(f"{a.client} {a.src or 'this tree'}: answer {len(body) / 1e6:.0f} MB "
          f"({'chunked' if a.chunked else 'Content-Length'}, {rows} rows): "
          f"peak RSS {base / 1024:.0f} MiB after import, {peak / 1024:.0f} MiB after query()")


if __name__ == "__main__":
    main()
