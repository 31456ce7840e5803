"""The Python client against a real lithd.

LITHD names the lithd binary (make test passes the one it just built);
without it the tests are skipped. Each lithd the tests start runs in a
temporary directory on a free port and a Unix socket, and is stopped with
SIGTERM at the end.
"""
import json
import os
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import lith  # noqa: E402

LITHD = os.environ.get("LITHD")
TOKEN = "s3cret-token-for-tests"
# One INSERT that runs about a second here (longer under sanitizers): it
# holds the writer while other requests find the queue full.
SLOW = ("INSERT INTO kv(k, v) SELECT 'slow-' || hex(randomblob(8)), count(*) FROM (WITH RECURSIVE c(i) AS "
        "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 4000000) SELECT i FROM c)")
COMMANDS = """-- name: put
-- Store v under k.
INSERT INTO kv(k, v) VALUES (:k, :v) RETURNING k, v;

-- name: get
SELECT k, v FROM kv WHERE k = :k;
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lithd:
    """A lithd in its own directory; stop() sends SIGTERM and waits;
    kill() SIGKILLs it and start() starts it again on the same database,
    port and socket (test_retry.py)."""

    def __init__(self, *args, token=None, certs=None):
        """certs: a directory of test-certs.sh's files: serve https."""
        self.dir = tempfile.mkdtemp(prefix="lith-py-")
        self.port = free_port()
        self.sock = os.path.join(self.dir, "lithd.sock")
        self.backups = os.path.join(self.dir, "backups")
        os.mkdir(self.backups)
        with open(os.path.join(self.dir, "commands.sql"), "w") as f:
            f.write(COMMANDS)
        with open(os.path.join(self.dir, "schema.sql"), "w") as f:
            f.write("CREATE TABLE kv(k TEXT PRIMARY KEY, v);\n")
        cmd = [LITHD, "--db", os.path.join(self.dir, "t.db"), "--listen", f"127.0.0.1:{self.port}",
               "--unix", self.sock, "--schema", "schema.sql", "--commands", "commands.sql",
               "--backup-dir", self.backups, *args]
        if token:
            with open(os.path.join(self.dir, "token"), "w") as f:
                f.write(token + "\n")
            os.chmod(os.path.join(self.dir, "token"), 0o600)
            cmd += ["--token-file", "token"]
        if certs:
            cmd += ["--tls-cert", os.path.join(certs, "cert.pem"), "--tls-key", os.path.join(certs, "key.pem")]
        self.cmd, self.token = cmd, token
        self.url = f"{'https' if certs else 'http'}://127.0.0.1:{self.port}"
        self.ca = os.path.join(certs, "ca.pem") if certs else None
        self.log = open(os.path.join(self.dir, "lithd.log"), "wb")
        self.start()

    def start(self):
        """Start lithd (again) and wait until it answers."""
        self.proc = subprocess.Popen(self.cmd, cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        with lith.Client(self.url, token=self.token, timeout=2, max_retries=0, ca_file=self.ca) as probe:
            while True:
                try:
                    probe.health()
                    break
                except lith.ConnectionFailed:
                    if self.proc.poll() is not None or time.time() > deadline:
                        out = self.output()
                        try:
                            self.stop()
                        except RuntimeError:
                            pass
                        raise RuntimeError("lithd did not start: " + out)
                    time.sleep(0.05)
        while not os.path.exists(self.sock):
            time.sleep(0.05)

    def kill(self):
        """SIGKILL: no drain, no checkpoint, the socket file left behind."""
        self.proc.kill()
        self.proc.wait()

    def output(self):
        with open(os.path.join(self.dir, "lithd.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        """SIGTERM; lithd must exit 0 (a crash or a sanitizer's report fails the suite)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        out = self.output()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.proc.returncode != 0:
            raise RuntimeError(f"lithd exited {self.proc.returncode}:\n{out}")


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Lithd(token=TOKEN)
        cls.db = lith.Client(cls.server.url, token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.db.close()
        cls.server.stop()

    def setUp(self):
        self.db.do("DELETE FROM kv")

    def test_body_over_max_body_is_refused_not_lost(self):
        # lithd answers 413 before it read the body and closes: the client,
        # still sending, reads that answer (nothing ran), never an AnswerLost
        for _ in range(3):
            with self.assertRaises(lith.TooLarge) as cm:
                self.db.do(("INSERT INTO kv VALUES ('big', ?)", ["x" * (9 << 20)]))
            self.assertEqual(cm.exception.status, 413)
        self.assertEqual(self.db.query("SELECT count(*) FROM kv")[0]["rows"], [[0]])

    def test_do_and_query(self):
        r = self.db.do([("INSERT INTO kv VALUES (?, ?)", ["a", 1]),
                        ("INSERT INTO kv VALUES (:k, :v) RETURNING rowid", {":k": "b", ":v": "two"})])
        self.assertEqual(len(r), 2)
        self.assertEqual(r[0]["changes"], 1)
        self.assertEqual(r[1]["columns"], ["rowid"])
        self.assertEqual(r[1]["rows"], [[r[1]["last_insert_rowid"]]])
        q = self.db.query("SELECT k, v FROM kv ORDER BY k")
        self.assertEqual(q[0]["columns"], ["k", "v"])
        self.assertEqual(q[0]["rows"], [["a", 1], ["b", "two"]])
        # several statements, one snapshot; {"sql", "params"} dicts as lithd has them
        q = self.db.query([{"sql": "SELECT count(*) FROM kv"}, ("SELECT v FROM kv WHERE k = ?", ["a"])])
        self.assertEqual([x["rows"] for x in q], [[[2]], [[1]]])

    def test_values_round_trip(self):
        values = [None, 0, -1, 2**63 - 1, -2**63, 2**53 + 1, 0.1, 1e300, "", "é\u0000x", b"", b"\x00\xff",
                  True]
        for i, v in enumerate(values):
            self.db.do(("INSERT INTO kv VALUES (?, ?)", [str(i), v]))
        rows = self.db.query("SELECT v, typeof(v) FROM kv ORDER BY CAST(k AS INTEGER)")[0]["rows"]
        self.assertEqual([r[0] for r in rows], [1 if v is True else v for v in values])
        self.assertIs(type(rows[3][0]), int)
        self.assertEqual(rows[3][1], "integer")
        self.assertEqual(rows[11][0], b"\x00\xff")

    def test_big_integers_exact(self):
        r = self.db.do([("INSERT INTO kv VALUES ('max', ?)", [2**63 - 1]),
                        ("INSERT INTO kv VALUES ('min', ?)", [-2**63]),
                        "SELECT v + 0 FROM kv WHERE k = 'max'",
                        "SELECT 9223372036854775807 = (SELECT v FROM kv WHERE k = 'max')"])
        self.assertEqual(r[2]["rows"], [[9223372036854775807]])
        self.assertEqual(r[3]["rows"], [[1]])
        got = self.db.query("SELECT k, v FROM kv ORDER BY v", rows="objects")[0]["rows"]
        self.assertEqual(got, [{"k": "min", "v": -9223372036854775808}, {"k": "max", "v": 9223372036854775807}])
        # one past the range is lithd's 400, never a rounded real
        with self.assertRaises(lith.BadRequest) as cm:
            self.db.do(("SELECT ?", [2**63]))
        self.assertIn("too big integer", cm.exception.message)

    def test_rows_as_objects_and_types(self):
        self.db.do(("INSERT INTO kv VALUES (?, ?)", ["a", b"\x01"]))
        q = self.db.query("SELECT k, v, length(k) AS n FROM kv", rows="objects", types=True)[0]
        self.assertEqual(q["rows"], [{"k": "a", "v": b"\x01", "n": 1}])
        self.assertEqual(q["types"], ["TEXT", None, None])
        # a client whose default is objects; a call may ask for arrays
        objs = lith.Client(self.server.url, token=TOKEN, rows="objects")
        self.addCleanup(objs.close)
        self.assertEqual(objs.query("SELECT k FROM kv")[0]["rows"], [{"k": "a"}])
        self.assertEqual(objs.query("SELECT k FROM kv", rows="arrays")[0]["rows"], [["a"]])
        self.assertNotIn("types", objs.query("SELECT k FROM kv")[0])
        # two columns named alike cannot be one object: lithd refuses (400)
        with self.assertRaises(lith.BadRequest) as cm:
            objs.query("SELECT k, v AS k FROM kv")
        self.assertIn('both named "k"', cm.exception.message)
        self.assertEqual(cm.exception.statement, 0)
        objs.close()
        with self.assertRaises(ValueError):
            lith.Client(self.server.url, rows="dicts")

    def test_command(self):
        r = self.db.command("put", {"k": "n", "v": 2**63 - 1})
        self.assertEqual(r[0]["rows"], [["n", 2**63 - 1]])
        r = self.db.command("get", {":k": "n"}, rows="objects")
        self.assertEqual(r[0]["rows"], [{"k": "n", "v": 2**63 - 1}])
        names = [c["name"] for c in self.db.commands()]
        self.assertEqual(names, ["put", "get"])
        with self.assertRaises(lith.NotFound) as cm:
            self.db.command("nope", {})
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(lith.BadRequest):
            self.db.command("put", {"k": "x"})
        with self.assertRaises(lith.ConstraintError):
            self.db.command("put", {"k": "n", "v": 1})

    def test_batch(self):
        out = self.db.batch([[("INSERT INTO kv VALUES (?, 1)", ["x"])],
                             [("INSERT INTO kv VALUES (?, 2)", ["x"])],
                             ["SELECT count(*) AS n FROM kv"]], rows="objects")
        self.assertEqual(out[0][0]["changes"], 1)
        self.assertIsInstance(out[1], lith.ConstraintError)
        self.assertEqual((out[1].status, out[1].code, out[1].statement), (409, "constraint", 0))
        self.assertEqual(out[2][0]["rows"], [{"n": 1}])
        # a request lithd refuses as a whole raises
        with self.assertRaises(lith.BadRequest):
            self.db.batch([])

    def test_errors(self):
        with self.assertRaises(lith.ConstraintError) as cm:
            self.db.do([("INSERT INTO kv VALUES ('a', 1)"), ("INSERT INTO kv VALUES ('a', 2)")])
        e = cm.exception
        self.assertIsInstance(e, lith.Conflict)
        self.assertIsInstance(e, lith.LithError)
        self.assertEqual((e.status, e.code, e.statement), (409, "constraint", 1))
        self.assertIn("UNIQUE constraint failed", e.message)
        self.assertIn("409 constraint", str(e))
        # the command was undone whole
        self.assertEqual(self.db.query("SELECT count(*) FROM kv")[0]["rows"], [[0]])
        with self.assertRaises(lith.BadRequest) as cm:
            self.db.do("SELEC 1")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(lith.Forbidden) as cm:
            self.db.query("DELETE FROM kv")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "not_a_query"))
        with self.assertRaises(lith.Forbidden):
            self.db.do("ATTACH 'x.db' AS x")
        with self.assertRaises(TypeError):
            self.db.do([42])

    def test_auth(self):
        for token in (None, "wrong"):
            c = lith.Client(self.server.url, token=token)
            with self.assertRaises(lith.Unauthorized) as cm:
                c.query("SELECT 1")
            self.assertEqual(cm.exception.status, 401)
            c.close()

    def test_unix_socket(self):
        path = self.server.sock
        for c in (lith.Client(unix_socket=path, token=TOKEN), lith.Client(path, token=TOKEN),
                  lith.Client("http+unix://" + urllib.parse.quote(path, safe=""), token=TOKEN)):
            c.do(("INSERT OR REPLACE INTO kv VALUES ('u', ?)", [2**62]))
            self.assertEqual(c.query("SELECT v FROM kv WHERE k = 'u'")[0]["rows"], [[2**62]])
            self.assertTrue(c.health()["ok"])
            c.close()

    def test_connection_failures(self):
        # (retried first by default: test_retry.py)
        c = lith.Client(f"http://127.0.0.1:{free_port()}", timeout=2, max_retries=0)
        with self.assertRaises(lith.ConnectionFailed) as cm:
            c.stats()
        self.assertEqual(cm.exception.code, "connection")
        self.assertIsNone(cm.exception.status)
        with self.assertRaises(lith.ConnectionFailed):
            lith.Client(unix_socket=os.path.join(self.server.dir, "no.sock"), max_retries=0).stats()
        with self.assertRaises(ValueError):
            lith.Client("ftp://x")

    def test_keep_alive_and_threads(self):
        # one Client from many threads, each with its own connection
        errors = []

        def work(n):
            try:
                for i in range(20):
                    self.db.do(("INSERT INTO kv VALUES (?, ?)", [f"{n}-{i}", i]))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.db.close()
        self.assertEqual(errors, [])
        self.assertEqual(self.db.query("SELECT count(*) FROM kv")[0]["rows"], [[80]])

    def test_stats(self):
        self.db.do("SELECT 1")
        s = self.db.stats()
        self.assertIsInstance(s, dict)
        self.assertGreater(s["commands"], 0)

    def test_backup(self):
        self.db.do(("INSERT INTO kv VALUES ('kept', ?)", [2**63 - 1]))
        # into lithd's --backup-dir
        answer = self.db.backup_to_server("copy.db")
        self.assertTrue(os.path.exists(os.path.join(self.server.backups, "copy.db")), answer)
        with self.assertRaises(lith.Conflict):
            self.db.backup_to_server("copy.db")  # never replaced
        # downloaded: GET /v1/backup, where this lithd has it
        dest = os.path.join(self.server.dir, "download.db")
        try:
            size = self.db.backup(dest)
        except lith.LithError as e:
            self.assertEqual(e.status, 405, e)  # a lithd without the download
            self.assertFalse(os.path.exists(dest))
            self.assertEqual([n for n in os.listdir(self.server.dir) if n.endswith(".part")], [])
            return
        self.assertEqual(size, os.path.getsize(dest))
        self.assertEqual([n for n in os.listdir(self.server.dir) if n.endswith(".part")], [])
        with sqlite3.connect(dest) as conn:
            self.assertEqual(conn.execute("SELECT v FROM kv WHERE k = 'kept'").fetchone(), (2**63 - 1,))
        sql = os.path.join(self.server.dir, "dump.sql")
        self.db.backup(sql, format="sql")
        with open(sql) as f:
            self.assertIn("9223372036854775807", f.read())


CERTS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test-certs.sh")


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
@unittest.skipUnless(shutil.which("openssl"), "openssl (for the test certificates) is not installed")
class TlsTest(unittest.TestCase):
    """https to a lithd with --tls-cert, its certificate signed by a CA of
    the test's own."""

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="lith-py-certs-")
        subprocess.run(["sh", CERTS_SH, cls.certs], check=True)
        cls.ca = os.path.join(cls.certs, "ca.pem")
        cls.server = Lithd(certs=cls.certs)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.certs, ignore_errors=True)

    def with_env(self, name, value):
        old = os.environ.get(name)
        os.environ[name] = value
        self.addCleanup(lambda: os.environ.__setitem__(name, old) if old is not None else os.environ.pop(name))

    def test_ca_file(self):
        self.assertTrue(self.server.url.startswith("https://"))
        with lith.Client(self.server.url, ca_file=self.ca) as db:
            db.do(("INSERT INTO kv VALUES (?, ?) ON CONFLICT DO UPDATE SET v = excluded.v", ["tls", 1]))
            self.assertEqual(db.query("SELECT v FROM kv WHERE k = 'tls'")[0]["rows"], [[1]])
            self.assertEqual(db.health(), {"ok": True})
            path = os.path.join(self.certs, "copy.db")
            self.assertGreater(db.backup(path), 0)
            with sqlite3.connect(path) as c:
                self.assertEqual(c.execute("SELECT v FROM kv WHERE k = 'tls'").fetchone(), (1,))

    def test_ssl_cert_file(self):
        self.with_env("SSL_CERT_FILE", self.ca)
        with lith.Client(self.server.url.replace("127.0.0.1", "localhost")) as db:
            self.assertEqual(db.query("SELECT 1")[0]["rows"], [[1]])

    def test_unknown_ca_refused(self):
        # the system's CAs (this machine may name its bundle in SSL_CERT_FILE)
        self.with_env("SSL_CERT_FILE", "/nonexistent-ca-file")
        with lith.Client(self.server.url, max_retries=0) as db:
            with self.assertRaises(lith.ConnectionFailed) as cm:
                db.do("INSERT INTO kv VALUES ('never', 1)")
            self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))
        with lith.Client(self.server.url, ca_file=self.ca) as db:
            self.assertEqual(db.query("SELECT count(*) FROM kv WHERE k = 'never'")[0]["rows"], [[0]])

    def test_ca_file_needs_https(self):
        with self.assertRaises(ValueError):
            lith.Client("http://127.0.0.1:1", ca_file=self.ca)
        with self.assertRaises(FileNotFoundError):
            lith.Client(self.server.url, ca_file=os.path.join(self.certs, "missing.pem"))


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class RetryTest(unittest.TestCase):
    """Real 503s: a queue of one, no waiting for room, a slow command."""

    @classmethod
    def setUpClass(cls):
        cls.server = Lithd("--max-queue", "1", "--max-batch", "1", "--queue-wait-ms", "0",
                           "--max-run-ms", "120000")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def slow(self, i):
        with lith.Client(self.server.url, timeout=120, max_retries=0) as c:
            return c.do(SLOW)

    def background(self, fn, n):
        """fn(i) in n threads; returns (threads, results: i -> value or LithError)."""
        results = {}

        def run(i):
            try:
                results[i] = fn(i)
            except lith.LithError as e:
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        return threads, results

    def test_503_raised_without_retries_and_retried_with(self):
        url = self.server.url
        once = lith.Client(url, timeout=120, max_retries=0)
        # the slow command holds the writer...
        slow, slow_done = self.background(self.slow, 1)
        time.sleep(0.3)
        # ...one write waits in the queue's one place, the others are refused at once
        fast, out = self.background(lambda i: once.do(("INSERT INTO kv VALUES (?, 1)", [f"fast-{i}"])), 4)
        deadline = time.monotonic() + 30
        while sum(isinstance(v, lith.LithError) for v in out.values()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = [v for v in out.values() if isinstance(v, lith.LithError)]
        self.assertEqual(slow_done, {}, "the slow command ended too soon for the test")
        self.assertEqual(len(refused), 3, out)
        for e in refused:
            self.assertIsInstance(e, lith.QueueFull)
            self.assertIsInstance(e, lith.Unavailable)
            self.assertEqual((e.status, e.code, e.retry_after), (503, "queue_full", 1.0))

        # bounded: lithd's Retry-After of 1 s does not fit in 0.5 s of waiting
        retries = []
        bounded = lith.Client(url, max_retries=5, max_retry_wait=0.5, timeout=120,
                              on_retry=lambda n, wait, e: retries.append((n, wait, e.code)))
        t0 = time.monotonic()
        with self.assertRaises(lith.QueueFull):
            bounded.do("INSERT INTO kv VALUES ('bounded', 1)")
        self.assertLess(time.monotonic() - t0, 0.9)
        self.assertEqual(retries, [])

        # retried: every write gets in once the writer is free, after
        # waiting what lithd asked
        retrying = lith.Client(url, max_retries=1000, max_retry_wait=600, timeout=120,
                               on_retry=lambda n, wait, e: retries.append((n, wait, e.code)))
        writers, results = self.background(
            lambda i: retrying.do(("INSERT INTO kv VALUES (?, 1)", [f"retried-{i}"])), 4)
        for t in slow + fast + writers:
            t.join()
        self.assertEqual(slow_done[0][0]["changes"], 1)
        self.assertTrue(all(isinstance(r, list) for r in results.values()), results)
        self.assertTrue(retries, "no 503 was retried")
        self.assertTrue(all(wait == 1.0 and code == "queue_full" for _, wait, code in retries), retries)
        count = retrying.query("SELECT count(*) FROM kv WHERE k LIKE 'retried-%'")[0]["rows"]
        self.assertEqual(count, [[4]])
        self.assertEqual(retrying.query("SELECT count(*) FROM kv WHERE k = 'bounded'")[0]["rows"], [[0]])

        # /v1/batch: a command the full queue refused is sent again alone
        slow, slow_done = self.background(self.slow, 1)
        time.sleep(0.3)
        out = retrying.batch([[("INSERT INTO kv VALUES (?, 1)", [f"b-{i}"])] for i in range(3)])
        slow[0].join()
        self.assertEqual(slow_done[0][0]["changes"], 1)
        self.assertTrue(all(isinstance(r, list) and r[0]["changes"] == 1 for r in out), out)
        self.assertEqual(retrying.query("SELECT count(*) FROM kv WHERE k LIKE 'b-%'")[0]["rows"], [[3]])
        for c in (once, bounded, retrying):
            c.close()


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class TwoDatabasesTest(unittest.TestCase):
    """db="NAME" against a lithd serving more than one (its t.db is "main",
    beside --db a=a.db --db b=b.db): the data lands in the named file only."""

    @classmethod
    def setUpClass(cls):
        cls.server = Lithd("--db", "a=a.db", "--db", "b=b.db")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def file_rows(self, name):
        conn = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.server.dir, name), uri=True)
        try:
            return conn.execute("SELECT k, v FROM kv ORDER BY k").fetchall()
        finally:
            conn.close()

    def test_each_call_reaches_the_named_database(self):
        url = self.server.url
        with lith.Client(url, db="a") as a, lith.Client(url, db="b") as b:
            a.do(("INSERT INTO kv VALUES (?, ?)", ["k", "in-a"]))
            b.command("put", {"k": "k", "v": "in-b"})
            out = b.batch([[("INSERT INTO kv VALUES (?, ?)", ["batch", "b-batch"])]])
            self.assertEqual(out[0][0]["changes"], 1)
            self.assertEqual(a.query("SELECT k, v FROM kv ORDER BY k")[0]["rows"], [["k", "in-a"]])
            self.assertEqual(b.query("SELECT k, v FROM kv ORDER BY k")[0]["rows"],
                             [["batch", "b-batch"], ["k", "in-b"]])
            self.assertEqual(self.file_rows("a.db"), [("k", "in-a")])
            self.assertEqual(self.file_rows("b.db"), [("batch", "b-batch"), ("k", "in-b")])
            self.assertEqual(self.file_rows("t.db"), [])
            self.assertEqual([c["name"] for c in b.commands()], ["put", "get"])
            self.assertIn("commands", b.stats())
            copy = os.path.join(self.server.dir, "b-copy.db")
            self.assertGreater(b.backup(copy), 0)
            conn = sqlite3.connect(copy)
            self.assertEqual(conn.execute("SELECT count(*) FROM kv").fetchone()[0], 2)
            conn.close()
            a.backup_to_server("snap-a.db")
            conn = sqlite3.connect(os.path.join(self.server.backups, "snap-a.db"))
            self.assertEqual(conn.execute("SELECT v FROM kv").fetchall(), [("in-a",)])
            conn.close()
            self.assertEqual(a.health(), {"ok": True})
        with lith.Client(url, db="c") as c, self.assertRaises(lith.NotFound) as e:
            c.do("SELECT 1")
        self.assertIn('no database "c" here', str(e.exception))
        with lith.Client(url) as c, self.assertRaises(lith.NotFound) as e:
            c.do("SELECT 1")
        self.assertIn("none is the default", str(e.exception))


class _Recorder:
    """An HTTP server on a free port that answers every request with
    `body` (200) and records its method and path: what the client sends,
    without a lithd."""

    def __init__(self, body=b'{"results": [], "commands": []}'):
        import http.server

        recorder = self
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                recorder.requests.append((self.command, self.path))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class DbOptionTest(unittest.TestCase):
    """db="NAME": the routes it sends to, and the names it refuses (no lithd needed)."""

    def test_every_call_goes_to_the_named_database(self):
        rec = _Recorder()
        try:
            with tempfile.TemporaryDirectory() as d, lith.Client(rec.url + "/pre/", db="a_B-9") as c:
                c.do("SELECT 1")
                c.query("SELECT 1")
                c.command("my cmd", {"k": 1})
                c.batch([["SELECT 1"]])
                c.stats()
                c.commands()
                c.backup_to_server("snap.db")
                c.backup(os.path.join(d, "copy.db"))
                c.backup(os.path.join(d, "copy.sql"), format="sql")
                c.health()
                c.query("SELECT 1", rows="objects")
            self.assertEqual(rec.requests, [
                ("POST", "/pre/v1/db/a_B-9/do"),
                ("POST", "/pre/v1/db/a_B-9/query"),
                ("POST", "/pre/v1/db/a_B-9/commands/my%20cmd"),
                ("POST", "/pre/v1/db/a_B-9/batch"),
                ("GET", "/pre/v1/db/a_B-9/stats"),
                ("GET", "/pre/v1/db/a_B-9/commands"),
                ("POST", "/pre/v1/db/a_B-9/backup"),
                ("GET", "/pre/v1/db/a_B-9/backup"),
                ("GET", "/pre/v1/db/a_B-9/backup?format=sql"),
                ("GET", "/pre/healthz"),
                ("POST", "/pre/v1/db/a_B-9/query?rows=objects"),
            ])
            rec.requests.clear()
            with lith.Client(rec.url) as c:
                c.do("SELECT 1")
            self.assertEqual(rec.requests, [("POST", "/v1/do")])
        finally:
            rec.close()

    def test_names_that_could_change_the_path_are_refused(self):
        for bad in ["", ".", "..", "../do", "a/b", "a%2Fb", "a?x=1", "a#b", "a b", "a.b", "\u00e9", "a\n",
                    "x\r\nHost: evil", "a" * 65, 7, b"a"]:
            with self.assertRaises(ValueError, msg=repr(bad)):
                lith.Client("http://127.0.0.1:1", db=bad)
        self.assertEqual(lith.Client("http://127.0.0.1:1", db="a" * 64).db, "a" * 64)


OK = b'{"results": [], "commands": [], "ok": true}'


def http_answer(status, body=OK, headers=(), length=None):
    """An HTTP/1.1 answer: `status`, `headers`, Content-Length (`length`
    if given, else the body's) and the body."""
    head = ["HTTP/1.1 %d X" % status, "Content-Type: application/json",
            "Content-Length: %d" % (len(body) if length is None else length), *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked_answer(body, last=True):
    """A 200 with `body` in chunks of 1000 bytes; without the last chunk if not `last`."""
    out = b"HTTP/1.1 200 X\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    for i in range(0, len(body), 1000):
        piece = body[i:i + 1000]
        out += b"%x\r\n%s\r\n" % (len(piece), piece)
    return out + (b"0\r\n\r\n" if last else b"")


class _Fake:
    """A raw HTTP/1.1 server on a free port, for what lithd does not do on
    purpose (die after a request arrived, cut an answer, close a kept-alive
    connection). Every request is recorded in .requests as (method, path,
    body) and handed to script(n, method, path, body), which returns (bytes
    to send or None for none, then "keep" the connection, "close" it or
    "rst" it: close with a reset)."""

    def __init__(self, script):
        self.script = script
        self.requests = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                length = 0
                while True:
                    h = f.readline()
                    if h in (b"\r\n", b""):
                        break
                    k, _, v = h.decode().partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                body = f.read(length)
                with self.lock:
                    n = len(self.requests)
                    self.requests.append((method, path, body))
                out, then = self.script(n, method, path, body)
                if out:
                    c.sendall(out)
                if then == "rst":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                if then != "keep":
                    return
        except OSError:
            pass
        finally:
            f.close()
            c.close()

    def paths(self):
        with self.lock:
            return [m + " " + p for m, p, _ in self.requests]

    def close(self):
        self.sock.close()


class FakeServerTest(unittest.TestCase):
    """What is sent again, what is raised, what is read: against _Fake (no lithd)."""

    def fake(self, script):
        f = _Fake(script)
        self.addCleanup(f.close)
        c = lith.Client(f.url, timeout=5, max_retries=3, max_retry_wait=5)
        self.addCleanup(c.close)
        return f, c

    WRITES = [("do", lambda c: c.do("INSERT INTO kv VALUES (1)"), "POST /v1/do"),
              ("command", lambda c: c.command("put", {"k": 1}), "POST /v1/commands/put"),
              ("batch", lambda c: c.batch([["INSERT INTO kv VALUES (1)"]]), "POST /v1/batch"),
              ("backup_to_server", lambda c: c.backup_to_server("x.db"), "POST /v1/backup")]

    def test_a_write_lost_after_it_was_sent_is_never_sent_again(self):
        # lithd took the request (it may have committed) and died before
        # answering: on a kept-alive connection and on a new one
        for name, call, line in self.WRITES:
            for warm in (True, False):
                f, c = self.fake(lambda n, m, p, b: (None, "close") if m == "POST" else (http_answer(200), "keep"))
                if warm:
                    c.health()
                with self.assertRaises(lith.AnswerLost, msg=name) as cm:
                    call(c)
                e = cm.exception
                self.assertIsInstance(e, lith.OutcomeUnknown)
                self.assertNotIsInstance(e, lith.ConnectionFailed)  # the other branch
                self.assertEqual((e.status, e.code), (None, "connection"))
                self.assertIn("whether it committed is unknown", str(e))
                self.assertEqual(f.paths(), ["GET /healthz"] * warm + [line], name)

    def test_a_write_that_timed_out_is_never_sent_again(self):
        def slow(n, m, p, b):
            time.sleep(0.6)
            return http_answer(200), "keep"
        f, c = self.fake(slow)
        c.timeout = 0.2
        with self.assertRaises(lith.AnswerLost) as cm:
            c.do("INSERT INTO kv VALUES (1)")
        self.assertEqual(cm.exception.code, "timeout")
        time.sleep(0.6)
        self.assertEqual(f.paths(), ["POST /v1/do"])

    def test_a_read_without_an_answer_is_sent_once_more(self):
        reads = [("query", lambda c: c.query("SELECT 1"), "POST /v1/query"),
                 ("stats", lambda c: c.stats(), "GET /v1/stats"),
                 ("commands", lambda c: c.commands(), "GET /v1/commands")]
        for name, call, line in reads:
            # the first try is lost, the second answered
            f, c = self.fake(lambda n, m, p, b: (None, "close") if n == 1 else (http_answer(200), "keep"))
            c.health()
            call(c)
            self.assertEqual(f.paths(), ["GET /healthz", line, line], name)
            # both lost: ConnectionFailed, and whether it ran does not matter
            f, c = self.fake(lambda n, m, p, b: (None, "close"))
            with self.assertRaises(lith.ConnectionFailed, msg=name) as cm:
                call(c)
            self.assertNotIsInstance(cm.exception, lith.OutcomeUnknown)
            self.assertEqual(f.paths(), [line, line], name)

    def test_a_kept_alive_connection_closed_while_idle_is_not_sent_on(self):
        # lithd answers, then closes the connection it kept alive (a FIN, or
        # a reset): the next write goes on a new connection, once
        for then in ("close", "rst"):
            f, c = self.fake(lambda n, m, p, b: (http_answer(200), then))
            for i in range(3):
                c.do("INSERT INTO kv VALUES (1)")
                time.sleep(0.05)  # the FIN or RST arrives
            self.assertEqual(f.paths(), ["POST /v1/do"] * 3, then)

    def test_a_connection_found_reset_when_sending_is_sent_again(self):
        # as if the reset came between the check and the send: the first
        # send() fails with nothing written, so a new connection is safe
        real = lith.client._dropped
        lith.client._dropped = lambda sock: False
        self.addCleanup(setattr, lith.client, "_dropped", real)
        f, c = self.fake(lambda n, m, p, b: (http_answer(200), "rst"))
        c.do("INSERT INTO kv VALUES (1)")
        time.sleep(0.05)
        c.do("INSERT INTO kv VALUES (2)")
        self.assertEqual(f.paths(), ["POST /v1/do"] * 2)
        # closed with a FIN instead, the send succeeds and only the answer
        # is missing: that write is not sent again
        f, c = self.fake(lambda n, m, p, b: (http_answer(200), "close"))
        c.do("INSERT INTO kv VALUES (1)")
        time.sleep(0.05)
        with self.assertRaises(lith.AnswerLost):
            c.do("INSERT INTO kv VALUES (2)")
        self.assertEqual(f.paths(), ["POST /v1/do"])

    def test_only_503_is_retried(self):
        unknown = b'{"error": {"code": "outcome_unknown", "message": "the leader was lost after COMMIT"}}'
        cases = [(504, unknown, lith.OutcomeUnknown, "outcome_unknown"),
                 (503, unknown, lith.OutcomeUnknown, "outcome_unknown"),  # the code wins
                 (504, b"<html>Gateway Timeout</html>", lith.OutcomeUnknown, "http_504"),  # a proxy's
                 (500, b'{"error": {"code": "internal", "message": "x"}}', lith.ServerError, "internal"),
                 (502, b"Bad Gateway", lith.ServerError, "http_502"),
                 (507, b'{"error": {"code": "disk_full", "message": "x"}}', lith.ServerError, "disk_full"),
                 (409, b'{"error": {"code": "constraint", "message": "x"}}', lith.ConstraintError, "constraint")]
        for status, body, cls, code in cases:
            for call in (lambda c: c.do("INSERT INTO kv VALUES (1)"), lambda c: c.query("SELECT 1")):
                f, c = self.fake(lambda n, m, p, b: (http_answer(status, body), "keep"))
                with self.assertRaises(cls) as cm:
                    call(c)
                self.assertEqual((cm.exception.status, cm.exception.code), (status, code))
                self.assertEqual(len(f.requests), 1, (status, code))
        self.assertFalse(issubclass(lith.OutcomeUnknown, lith.ServerError))
        # 503: retried (Retry-After: 0) up to max_retries, then raised
        busy = http_answer(503, b'{"error": {"code": "busy", "message": "x"}}', ["Retry-After: 0"])
        f, c = self.fake(lambda n, m, p, b: (busy, "keep"))
        with self.assertRaises(lith.Unavailable) as cm:
            c.do("INSERT INTO kv VALUES (1)")
        self.assertEqual((cm.exception.code, len(f.requests)), ("busy", 4))
        f, c = self.fake(lambda n, m, p, b: (busy if n < 2 else http_answer(200), "keep"))
        self.assertEqual(c.do("INSERT INTO kv VALUES (1)"), [])
        self.assertEqual(len(f.requests), 3)

    def test_batch_sends_again_only_what_did_not_run(self):
        first = (b'{"results": [{"error": {"code": "outcome_unknown", "message": "lost"}},'
                 b' {"error": {"code": "busy", "message": "x"}}, {"results": []}]}')
        again = b'{"results": [{"results": []}]}'
        f, c = self.fake(lambda n, m, p, b: (http_answer(200, first if n == 0 else again), "keep"))
        out = c.batch([["INSERT INTO kv VALUES (1)"], ["INSERT INTO kv VALUES (2)"], ["SELECT 1"]])
        self.assertIsInstance(out[0], lith.OutcomeUnknown)
        self.assertEqual((out[0].status, out[0].code), (504, "outcome_unknown"))
        self.assertEqual(out[1:], [[], []])
        self.assertEqual(len(f.requests), 2)
        self.assertEqual(json.loads(f.requests[1][2])["commands"],
                         [{"statements": [{"sql": "INSERT INTO kv VALUES (2)"}]}])

    def backup_into(self, answer, *, old=b"the old copy"):
        """backup() from a server answering `answer`; returns (result or error, dest, dir's files)."""
        f, c = self.fake(lambda n, m, p, b: (answer, "close"))
        d = tempfile.mkdtemp(prefix="lith-py-backup-")
        self.addCleanup(shutil.rmtree, d, True)
        dest = os.path.join(d, "copy.db")
        with open(dest, "wb") as out:
            out.write(old)
        try:
            got = c.backup(dest)
        except lith.LithError as e:
            got = e
        return got, dest, sorted(os.listdir(d))

    def test_backup_cut_short_is_never_installed(self):
        data = bytes(range(256)) * 400  # 102400 bytes
        cut = [("Content-Length", http_answer(200, data[:50000], length=len(data)), "after 50000 of 102400 bytes"),
               ("chunked", chunked_answer(data, last=False), "IncompleteRead")]
        for name, answer, why in cut:
            got, dest, files = self.backup_into(answer)
            self.assertIsInstance(got, lith.ConnectionFailed, name)
            self.assertEqual(got.status, 200)
            self.assertIn(why, str(got))
            self.assertEqual(files, ["copy.db"], name)  # no partial file left beside it
            with open(dest, "rb") as f:
                self.assertEqual(f.read(), b"the old copy", name)
        # neither a length nor chunks: a cut could not be told from the end
        got, dest, files = self.backup_into(b"HTTP/1.1 200 X\r\nConnection: close\r\n\r\n" + data)
        self.assertIsInstance(got, lith.LithError)
        self.assertEqual((got.code, files), ("bad_answer", ["copy.db"]))
        # whole: installed, private
        for name, answer in [("Content-Length", http_answer(200, data)), ("chunked", chunked_answer(data))]:
            got, dest, files = self.backup_into(answer)
            self.assertEqual((got, files), (len(data), ["copy.db"]), name)
            with open(dest, "rb") as f:
                self.assertEqual(f.read(), data, name)
            self.assertEqual(os.stat(dest).st_mode & 0o777, 0o600)
        # lithd's error answer: raised, the old copy stays
        refused = b'{"error": {"code": "method_not_allowed", "message": "x"}}'
        got, dest, files = self.backup_into(http_answer(405, refused))
        self.assertEqual((got.status, files), (405, ["copy.db"]))

    def test_answers_are_bounded(self):
        rows = b'{"results": [{"rows": [["' + b"x" * 2000 + b'"]]}]}'
        for name, answer in [("Content-Length", http_answer(200, rows)), ("chunked", chunked_answer(rows))]:
            f, c = self.fake(lambda n, m, p, b: (answer, "keep"))
            c.max_answer_bytes = 1000
            for call in (lambda: c.query("SELECT 1"), lambda: c.do("SELECT 1")):
                with self.assertRaises(lith.LithError) as cm:
                    call()
                self.assertEqual((cm.exception.code, cm.exception.status), ("answer_too_large", 200), name)
                self.assertIn("max_answer_bytes (1000)", str(cm.exception))
            self.assertIn("the request ran", str(cm.exception))  # the write's
            c.max_answer_bytes = len(rows)
            self.assertEqual(c.query("SELECT 1")[0]["rows"], [["x" * 2000]], name)
            c.max_answer_bytes = None
            self.assertEqual(c.query("SELECT 1")[0]["rows"], [["x" * 2000]], name)
        self.assertEqual(lith.Client("http://127.0.0.1:1").max_answer_bytes, 256 << 20)
        # refused on its Content-Length, before any of it is waited for
        f, c = self.fake(lambda n, m, p, b: (http_answer(200, b"{}", length=10 ** 9), "keep"))
        c.timeout = 3
        t0 = time.monotonic()
        with self.assertRaises(lith.LithError) as cm:
            c.query("SELECT 1")
        self.assertEqual((cm.exception.code, cm.exception.status), ("answer_too_large", 200))
        self.assertLess(time.monotonic() - t0, 2)
        # an answer shorter than its Content-Length is no answer
        f, c = self.fake(lambda n, m, p, b: (http_answer(200, rows[:100], length=len(rows)), "close"))
        with self.assertRaises(lith.ConnectionFailed) as cm:
            c.query("SELECT 1")
        self.assertIn("cut short after 100 of %d bytes" % len(rows), str(cm.exception))

    def test_a_200_that_is_not_json_is_a_lith_error(self):
        not_utf8 = b'{"results": [{"rows": [["\xff"]]}]}'
        for body in (b"not json", b"", b'{"results": [', b"\xff\xfe", not_utf8, b"[1, 2]", b'{"other": 1}'):
            f, c = self.fake(lambda n, m, p, b: (http_answer(200, body), "keep"))
            for call in (lambda: c.do("SELECT 1"), lambda: c.query("SELECT 1"), lambda: c.commands()):
                with self.assertRaises(lith.LithError, msg=body) as cm:
                    call()
                self.assertEqual((cm.exception.code, cm.exception.status), ("bad_answer", 200), body)


@unittest.skipUnless(os.environ.get("LITH_PIP_TEST"), "LITH_PIP_TEST is not set (make test sets it)")
class InstallTest(unittest.TestCase):
    """pip install ./clients/python into a new venv, with no package index."""

    def test_pip_install_in_venv(self):
        try:
            import ensurepip  # noqa: F401
            import venv  # noqa: F401
        except ImportError:
            self.skipTest("this Python has no venv/ensurepip (Debian: python3-venv)")
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        with tempfile.TemporaryDirectory() as d:
            env_dir = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", env_dir], check=True)
            py = os.path.join(env_dir, "bin", "python")
            subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", root], check=True, cwd=d)
            out = subprocess.run([py, "-c", "import lith, os; print(lith.__version__, lith.__file__, "
                                  "os.path.isfile(os.path.join(os.path.dirname(lith.__file__), 'py.typed')))"],
                                 check=True, cwd=d, capture_output=True, text=True).stdout
            self.assertIn(env_dir, out)
            self.assertTrue(out.startswith("0.1.0 "))
            self.assertTrue(out.endswith(" True\n"), out)  # py.typed: type checkers read the hints


if __name__ == "__main__":
    unittest.main()
