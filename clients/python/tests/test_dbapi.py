"""lith.dbapi against a real lithd, and beside Python's own sqlite3.

The heart of it is test_same_as_sqlite3: one program written for sqlite3 runs
on sqlite3 (a file) and on lith.dbapi (lithd), only its connect() changed,
and everything it sees must be the same: results, rowcount, lastrowid,
description, in_transaction, and the exception classes. The other tests
cover what only lithd has: other clients beside the transaction, its
bounds, a refused BEGIN, a stream closed while idle, lost answers.
"""
import gc
import http.server
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lith  # noqa: E402
import lith.dbapi as dbapi  # noqa: E402
from test_client import LITHD, TOKEN, Lithd  # noqa: E402

# About two seconds of one INSERT on the writer (longer under sanitizers)
SLOW = ("INSERT INTO t_refused(k, v) SELECT 'slow-' || hex(randomblob(8)), count(*) FROM (WITH RECURSIVE c(i) AS "
        "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 8000000) SELECT i FROM c)")


def program(m, con, savepoints=True):
    """A sqlite3 program: what it sees, as a list. savepoints: run the part
    with the program's own SAVEPOINTs (lithd --dqlite refuses them)."""
    seen = []

    def see(*what):
        seen.append(what)

    def fails(f, closed=False):
        try:
            f()
        except m.Error as e:
            see("raised", type(e).__name__, None if closed else con.in_transaction)
        else:
            see("no error")

    cur = con.cursor()
    cur.execute("CREATE TABLE p(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, n INTEGER, r REAL, b BLOB)")
    see("ddl", cur.rowcount, cur.description, con.in_transaction)
    cur.execute("INSERT INTO p(name, n) VALUES (?, ?)", ("a", 1))
    see("insert", cur.rowcount, cur.lastrowid, cur.description, con.in_transaction)
    cur.execute("INSERT INTO p(name, n, r, b) VALUES (:name, :n, :r, :b)",
                {"name": "b", "n": 2 ** 63 - 1, "r": 0.1, "b": b"\x00\xff"})
    see("named", cur.rowcount, cur.lastrowid)
    cur.execute("SELECT count(*) FROM p")
    see("select in tx", cur.fetchone(), cur.rowcount, cur.lastrowid, con.in_transaction)
    con.commit()
    see("committed", con.in_transaction)
    con.commit()  # nothing open: nothing
    fails(lambda: cur.execute("INSERT INTO p(name) VALUES ('a')"))  # opens a transaction, then fails
    con.rollback()
    see("rolled back", con.in_transaction)
    cur.executemany("INSERT INTO p(name, n) VALUES (?, ?)", [("c%d" % i, i) for i in range(5)])
    see("many", cur.rowcount, con.in_transaction)
    cur.execute("UPDATE p SET n = n + 1 WHERE name LIKE 'c%'")
    see("update", cur.rowcount)
    cur.execute("DELETE FROM p WHERE name IN ('c0', 'c1') RETURNING name")
    see("returning", cur.description, sorted(cur.fetchall()))
    con.rollback()
    see("after rollback", con.execute("SELECT count(*) FROM p").fetchone())
    with con:
        con.execute("INSERT INTO p(name, n) VALUES ('d', 4)")
    try:
        with con:
            con.execute("INSERT INTO p(name, n) VALUES ('e', 5)")
            raise KeyError("e")
    except KeyError:
        pass
    see("with", con.execute("SELECT name FROM p ORDER BY id").fetchall(), con.in_transaction)
    cur.execute("SELECT id, name, n, r, b FROM p ORDER BY id")
    see("fetch", cur.description, cur.fetchmany(2), cur.fetchone(), cur.fetchall(), cur.fetchone(), cur.lastrowid)
    cur.arraysize = 2
    see("arraysize", con.execute("SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3").fetchmany())
    see("fetchmany(-1)", con.execute("SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3").fetchmany(-1))
    see("iter", [r for r in con.execute("SELECT name FROM p WHERE n < ? ORDER BY n", (3,))])
    fails(lambda: cur.execute("SELEC 1"))
    fails(lambda: cur.execute("SELECT * FROM nowhere"))
    fails(lambda: cur.execute("SELECT ?", ()))
    fails(lambda: cur.execute("SELECT 1; SELECT 2"))
    fails(lambda: cur.executemany("SELECT ?", [(1,)]))
    fails(lambda: cur.execute("INSERT INTO p(name) VALUES (NULL)"))
    con.rollback()
    see("empty", cur.execute("").description, cur.execute("-- nothing").fetchall())
    see("trailing comments", con.execute("SELECT 1; -- why").fetchall(), con.execute("SELECT 2 /* why */;").fetchall())
    values = (None, 0, -1, 2 ** 63 - 1, -2 ** 63, 1.5, -0.25, 1e300, "", "ünï\u2603",
              b"", b"\x00\x01", True)
    see("values", [tuple((type(v).__name__, v) for v in con.execute("SELECT ?", (x,)).fetchone()) for x in values])
    try:
        con.execute("SELECT ?", (2 ** 63,))
    except OverflowError:
        see("overflow")
    see("dates", con.execute("SELECT ?, ?", (__import__("datetime").date(2026, 12, 7),
                                             __import__("datetime").datetime(2026, 12, 7, 1, 2, 3))).fetchone())
    con.executescript("""
        INSERT INTO p(name, n) VALUES ('s1', 10);
        CREATE TABLE q(x);
        INSERT INTO q VALUES (1), (2);
    """)
    see("script", con.in_transaction, con.execute("SELECT count(*) FROM q").fetchone())
    cur.execute("INSERT INTO p(name, n) VALUES ('f', 6)")
    con.executescript("INSERT INTO q VALUES (3)")  # commits the open transaction first
    see("script commits", con.in_transaction)
    con.isolation_level = None
    cur.execute("INSERT INTO p(name, n) VALUES ('g', 7)")
    see("autocommit", con.in_transaction, cur.rowcount, cur.lastrowid)
    cur.execute("BEGIN")
    cur.execute("INSERT INTO p(name, n) VALUES ('h', 8)")
    see("explicit", con.in_transaction)
    cur.execute("ROLLBACK")
    see("explicit rollback", con.in_transaction, con.execute("SELECT count(*) FROM p WHERE name = 'h'").fetchone())
    if savepoints:
        # outside a transaction a SAVEPOINT begins one, RELEASE of the
        # outermost commits it, ROLLBACK TO keeps it open
        cur.execute("SAVEPOINT a")
        see("savepoint opens", con.in_transaction)
        cur.execute("INSERT INTO p(name, n) VALUES ('sp1', 1)")
        cur.execute("ROLLBACK TO a")
        see("rollback to", con.in_transaction, con.execute("SELECT count(*) FROM p WHERE name = 'sp1'").fetchone())
        cur.execute("SAVEPOINT \"B b\"")
        cur.execute("INSERT INTO p(name, n) VALUES ('sp2', 2)")
        cur.execute("RELEASE SAVEPOINT \"B b\"")
        see("inner release", con.in_transaction)
        cur.execute("RELEASE a")
        see("outer release commits", con.in_transaction)
        cur.execute("SAVEPOINT x")
        cur.execute("SAVEPOINT y")
        cur.execute("INSERT INTO p(name, n) VALUES ('sp3', 3)")
        cur.execute("RELEASE X")  # releases y too: commits
        see("release outer of two", con.in_transaction)
        con.isolation_level = ""
        cur.execute("SAVEPOINT z")  # with sqlite3's implicit transactions too
        cur.execute("INSERT INTO p(name, n) VALUES ('sp4', 4)")
        see("savepoint then dml", con.in_transaction)
        cur.execute("RELEASE z")
        see("released", con.in_transaction, con.execute("SELECT name FROM p WHERE name LIKE 'sp%' ORDER BY name").fetchall())
        con.isolation_level = None
        fails(lambda: cur.execute("SAVEPOINT select"))  # SQLite's error: no transaction began
        see("failed savepoint", con.in_transaction)
        cur.execute("SAVEPOINT c -- why")
        cur.execute("INSERT INTO p(name, n) VALUES ('sp5', 5)")
        cur.execute("RELEASE /* done */ c;")
        see("commented release commits", con.in_transaction)
        cur.execute('SAVEPOINT "\u00c9"')  # SQLite folds ASCII letters only: these are two names
        cur.execute('SAVEPOINT "\u00e9"')
        cur.execute("INSERT INTO p(name, n) VALUES ('sp6', 6)")
        cur.execute('RELEASE "\u00c9"')
        see("release of the outer, by its own case", con.in_transaction)
        fails(lambda: cur.execute("RELEASE savepoint"))  # SQLite: a name is missing
        see("names", con.execute("SELECT name FROM p WHERE name LIKE 'sp%' ORDER BY name").fetchall())
    con.isolation_level = "IMMEDIATE"
    cur.execute("UPDATE p SET n = 0 WHERE name = 'g'")
    see("immediate", con.in_transaction)
    con.isolation_level = None  # commits what is open
    see("level to None commits", con.in_transaction, con.execute("SELECT n FROM p WHERE name = 'g'").fetchone())
    try:
        con.isolation_level = "SOMETIMES"
    except ValueError:
        see("bad level")
    con.row_factory = m.Row
    r = con.execute("SELECT name AS Name, n FROM p WHERE name = 'a'").fetchone()
    see("row", r["name"], r["NAME"], r[1], r.keys(), len(r), tuple(r))
    con.row_factory = None
    c2 = con.cursor()
    c2.close()
    fails(lambda: c2.execute("SELECT 1"))
    see("exceptions", [hasattr(m, n) for n in ("Warning", "Error", "InterfaceError", "DatabaseError", "DataError",
                                               "OperationalError", "IntegrityError", "InternalError",
                                               "ProgrammingError", "NotSupportedError")],
        m.apilevel, m.paramstyle, issubclass(m.IntegrityError, m.DatabaseError))
    con.close()
    fails(lambda: con.execute("SELECT 1"), closed=True)
    return seen


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class DbapiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Lithd("--tx-idle-ms", "400", "--tx-max-ms", "800", "--stream-idle-ms", "2000", token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def connect(self, **kw):
        kw.setdefault("token", TOKEN)
        con = dbapi.connect(kw.pop("url", self.server.url), **kw)
        self.addCleanup(con.close)
        return con

    def fresh(self, name):
        """A table of its own for a test, empty."""
        con = self.connect(isolation_level=None)
        con.execute(f"DROP TABLE IF EXISTS {name}")
        con.execute(f"CREATE TABLE {name}(id INTEGER PRIMARY KEY, k TEXT UNIQUE, v)")
        return con

    def test_same_as_sqlite3(self):
        with tempfile.TemporaryDirectory() as d:
            con = sqlite3.connect(os.path.join(d, "same.db"))
            expected = program(sqlite3, con)
        other = self.connect(isolation_level=None)
        other.execute("DROP TABLE IF EXISTS p")
        other.execute("DROP TABLE IF EXISTS q")
        got = program(dbapi, self.connect())
        for e, g in zip(expected, got):
            self.assertEqual(g, e)
        self.assertEqual(len(got), len(expected))

    def test_uncommitted_unseen_and_writers_wait(self):
        a = self.fresh("t_iso")
        b = self.connect()
        a.isolation_level = ""
        a.execute("INSERT INTO t_iso(k, v) VALUES ('x', 1)")
        self.assertTrue(a.in_transaction)
        # another client reads the last commit, not the open transaction
        self.assertEqual(b.execute("SELECT count(*) FROM t_iso").fetchone(), (0,))
        # another client's write waits for the transaction, then commits after it
        done = []
        c = self.connect(isolation_level=None)
        t = threading.Thread(target=lambda: done.append(c.execute("INSERT INTO t_iso(k, v) VALUES ('y', 2)").rowcount))
        t.start()
        time.sleep(0.2)
        self.assertEqual(done, [])
        a.commit()
        t.join(10)
        self.assertEqual(done, [1])
        self.assertEqual(b.execute("SELECT k FROM t_iso ORDER BY id").fetchall(), [("x",), ("y",)])

    def test_refused_begin_runs_nothing(self):
        # a slow command holds the writer past --tx-max-ms (800): the
        # implicit BEGIN IMMEDIATE queued behind it is refused, and the
        # INSERT sent with it must not commit alone, in autocommit
        self.fresh("t_refused")
        slow = lith.Client(self.server.url, token=TOKEN)
        self.addCleanup(slow.close)
        t = threading.Thread(target=lambda: _ignore(lambda: slow.do(SLOW)))
        t.start()
        time.sleep(0.3)  # on the writer
        waiting = self.connect()
        try:
            with self.assertRaises(dbapi.OperationalError) as cm:
                waiting.execute("INSERT INTO t_refused(k) VALUES ('alone')")
        finally:
            t.join()
        self.assertFalse(waiting.in_transaction)
        self.assertEqual(cm.exception.code, "TRANSACTION_TIMEOUT")
        check = self.connect()
        self.assertEqual(check.execute("SELECT count(*) FROM t_refused WHERE k = 'alone'").fetchone(), (0,))

    def test_transaction_bound_ends_it(self):
        con = self.fresh("t_bound")
        con.isolation_level = ""
        con.execute("INSERT INTO t_bound(k) VALUES ('a')")
        time.sleep(1.1)  # past --tx-max-ms (800)
        with self.assertRaises(dbapi.OperationalError) as cm:
            con.execute("INSERT INTO t_bound(k) VALUES ('b')")
        self.assertFalse(con.in_transaction)
        self.assertIn(cm.exception.code, ("TRANSACTION_TIMEOUT", "STREAM_EXPIRED"))
        con.rollback()  # nothing open: nothing
        self.assertEqual(self.connect().execute("SELECT count(*) FROM t_bound").fetchone(), (0,))
        con.execute("INSERT INTO t_bound(k) VALUES ('c')")  # a new transaction
        con.commit()
        self.assertEqual(self.connect().execute("SELECT k FROM t_bound").fetchall(), [("c",)])

    def test_idle_stream_replaced_outside_transaction(self):
        con = self.fresh("t_idle")
        con.execute("INSERT INTO t_idle(k) VALUES ('a')")
        baton = con._baton
        time.sleep(2.3)  # past --stream-idle-ms (2000): lithd closed the stream
        con.execute("INSERT INTO t_idle(k) VALUES ('b')")  # a new stream, silently
        self.assertNotEqual(con._baton, baton)
        self.assertEqual(con.execute("SELECT count(*) FROM t_idle").fetchone(), (2,))

    def test_executemany_in_batches(self):
        con = self.fresh("t_many")
        cur = con.cursor()
        cur.executemany("INSERT INTO t_many(k, v) VALUES (?, ?)", ((str(i), i) for i in range(2500)))
        self.assertEqual(cur.rowcount, 2500)
        self.assertEqual(con.execute("SELECT count(*), sum(v) FROM t_many").fetchone(), (2500, sum(range(2500))))
        # a failing set stops it; in autocommit the sets before it stay, as sqlite3's
        with self.assertRaises(dbapi.IntegrityError):
            cur.executemany("INSERT INTO t_many(k, v) VALUES (?, ?)", [("x1", 1), ("x2", 2), ("0", 0), ("x3", 3)])
        self.assertEqual(con.execute("SELECT k FROM t_many WHERE k LIKE 'x%' ORDER BY k").fetchall(),
                         [("x1",), ("x2",)])
        # big values go in several batches (4 MiB each at most)
        blob = b"\xab" * (512 << 10)
        cur.executemany("INSERT INTO t_many(k, v) VALUES (?, ?)", [("blob%d" % i, blob) for i in range(20)])
        self.assertEqual(con.execute("SELECT count(*), sum(length(v)) FROM t_many WHERE k LIKE 'blob%'").fetchone(),
                         (20, 10 << 20))

    def test_threads_share_a_connection_and_many_connect(self):
        con = self.fresh("t_threads")
        shared = self.connect(isolation_level=None)
        errors = []

        def work(i):
            try:
                own = dbapi.connect(self.server.url, token=TOKEN)
                for j in range(10):
                    own.execute("INSERT INTO t_threads(k, v) VALUES (?, ?)", (f"o{i}.{j}", i))
                    own.commit()
                    shared.execute("INSERT INTO t_threads(k, v) VALUES (?, ?)", (f"s{i}.{j}", i))
                own.close()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(con.execute("SELECT count(*), count(DISTINCT k) FROM t_threads").fetchone(), (320, 320))

    def test_not_sent_and_lost(self):
        # nothing listens: nothing was sent, a ConnectionFailed of lith's tree
        port = _free_port()
        con = self.connect(url=f"http://127.0.0.1:{port}", max_retries=0, token=None)
        with self.assertRaises(dbapi.ConnectionFailedError) as cm:
            con.execute("SELECT 1")
        self.assertIsInstance(cm.exception, dbapi.OperationalError)
        self.assertIsInstance(cm.exception, lith.ConnectionFailed)
        self.assertNotIsInstance(cm.exception, lith.OutcomeUnknown)
        # a COMMIT whose answer is lost: it did commit, and that cannot be known
        self.fresh("t_lost")
        proxy = _Blackhole(self.server.port)
        con = self.connect()
        con.execute("INSERT INTO t_lost(k) VALUES ('maybe')")
        # move this connection's transport to the proxy that forwards
        # requests and drops their answers
        con.client._host, con.client._port = "127.0.0.1", proxy.port
        con.client.close()
        with self.assertRaises(dbapi.OutcomeUnknownError) as cm:
            con.commit()
        self.assertIsInstance(cm.exception, lith.OutcomeUnknown)
        self.assertNotIsInstance(cm.exception, lith.ConnectionFailed)
        self.assertFalse(con.in_transaction)
        proxy.close()
        deadline = time.time() + 10
        while self.connect().execute("SELECT count(*) FROM t_lost").fetchone() != (1,):
            self.assertLess(time.time(), deadline, "the COMMIT never landed")
            time.sleep(0.05)

    def test_failed_commit_then_the_block_again_lands_once(self):
        # a `with con:` block whose COMMIT cannot be sent (lithd out of
        # reach: ConnectionFailedError, "safe to send again") is rolled back,
        # as sqlite3's: run again, its INSERT must not join the old
        # transaction and commit twice
        self.fresh("t_again")
        con = self.connect(max_retries=0)
        real = con.client._port
        for attempt in range(2):
            try:
                with con:
                    con.execute("INSERT INTO t_again(v) VALUES ('order 1')")
                    if attempt == 0:
                        con.client.close()
                        con.client._port = _free_port()  # nothing listens: the COMMIT is not sent
            except lith.ConnectionFailed:
                self.assertEqual(attempt, 0)
                self.assertFalse(con.in_transaction)
                con.client._port = real
                continue
            self.assertEqual(attempt, 1)
        # the first transaction was never committed; lithd rolls it back
        self.assertEqual(self.connect().execute("SELECT count(*) FROM t_again").fetchone(), (1,))

    def test_bound_keeps_the_programs_exception(self):
        # lithd ended the transaction (--tx-max-ms); the block's own error
        # comes out of `with con:`, not the rollback's
        con = self.fresh("t_keep")
        con.isolation_level = ""
        with self.assertRaises(KeyError):
            with con:
                con.execute("INSERT INTO t_keep(k) VALUES ('a')")
                time.sleep(1.1)  # past --tx-max-ms (800): the ROLLBACK meets TRANSACTION_TIMEOUT
                raise KeyError("mine")
        con.rollback()  # nothing open: nothing
        self.assertEqual(self.connect().execute("SELECT count(*) FROM t_keep").fetchone(), (0,))

    def test_values_sqlite3_takes_and_json_cannot(self):
        con = self.connect()
        with self.assertRaises(dbapi.DataError):
            con.execute("SELECT ?", (float("inf"),))
        with self.assertRaises(OverflowError):
            con.execute("SELECT ?", (2 ** 64,))
        with self.assertRaises(dbapi.ProgrammingError):
            con.execute("SELECT ?", (object(),))
        self.assertEqual(con.execute("SELECT 9e999, -9e999").fetchone(), (float("inf"), float("-inf")))

    def test_executemany_splits_by_size(self):
        # two sets, each well under lithd's --max-body alone, over it together
        con = self.fresh("t_size")
        con.execute("SELECT 1")
        a, b = ("\x01" * 650_000,), ("\x01" * 1_000_000,)  # ~3.9 MiB and ~6 MiB of JSON
        cur = con.executemany("INSERT INTO t_size(v) SELECT length(?)", [a, b])
        self.assertEqual(cur.rowcount, 2)
        self.assertEqual(con.execute("SELECT v FROM t_size ORDER BY id").fetchall(), [(650_000,), (1_000_000,)])

    def test_connect_options(self):
        with self.assertRaises(dbapi.NotSupportedError):
            dbapi.connect(self.server.url, detect_types=dbapi.PARSE_DECLTYPES)
        c = lith.Client(self.server.url, token=TOKEN)
        self.addCleanup(c.close)
        con = dbapi.connect(client=c, check_same_thread=False)
        self.assertEqual(con.execute("SELECT 7").fetchone(), (7,))
        con.close()
        self.assertEqual(c.query("SELECT 8")[0]["rows"], [[8]])  # a given client stays open
        with self.assertRaises(dbapi.ProgrammingError):
            dbapi.connect(client=c, token="x")
        with self.assertRaises(dbapi.OperationalError):  # the token is lithd's to judge
            self.connect(token="wrong").execute("SELECT 1")
        self.assertTrue(self.connect().server_version().startswith("3."))


LITH_NODE = os.environ.get("LITH_NODE") or (
    os.path.join(os.path.dirname(os.path.dirname(LITHD)), "lith-node", "lith-node") if LITHD else None)


class DqliteLithd:
    """One lith-node and a lithd --dqlite in front of it."""

    def __init__(self):
        import subprocess
        self.dir = tempfile.mkdtemp(prefix="lith-py-dq-")
        node_addr = f"127.0.0.1:{_free_port()}"
        self.node_log = open(os.path.join(self.dir, "node.log"), "wb")
        self.node = subprocess.Popen([LITH_NODE, "--id", "1", "--address", node_addr, "--dir",
                                      os.path.join(self.dir, "node"), "--latency-ms", "20"],
                                     stdout=self.node_log, stderr=subprocess.STDOUT)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "lithd.log"), "wb")
        self.proc = None
        deadline = time.time() + 30
        while b"serving on" not in _read(os.path.join(self.dir, "node.log")):
            if time.time() > deadline or self.node.poll() is not None:
                self.stop()
                raise RuntimeError("lith-node did not serve")
            time.sleep(0.05)
        self.proc = subprocess.Popen([LITHD, "--dqlite", node_addr, "--listen", f"127.0.0.1:{self.port}"],
                                     cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT)
        with lith.Client(self.url, timeout=2, max_retries=0) as probe:
            while True:
                try:
                    probe.health()
                    return
                except lith.LithError:
                    if self.proc.poll() is not None or time.time() > deadline:
                        self.stop()
                        raise RuntimeError("lithd --dqlite did not start")
                    time.sleep(0.05)

    def stop(self):
        import shutil
        for p in (self.proc, self.node):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(60)
                except Exception:  # noqa: BLE001
                    p.kill()
                    p.wait()
        self.log.close()
        self.node_log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.proc is not None and self.proc.returncode != 0:
            raise RuntimeError(f"lithd --dqlite exited {self.proc.returncode}")


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class DroppedTest(unittest.TestCase):
    """Connections dropped without close(), under lithd's default bounds."""

    @classmethod
    def setUpClass(cls):
        cls.server = Lithd(token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_dropped_transaction_frees_the_writer(self):
        # sqlite3 rolls back a connection the program dropped; here its
        # stream is closed for it, so the writer is not held until
        # --tx-idle-ms (5 s) ends the transaction
        url = self.server.url
        setup = dbapi.connect(url, token=TOKEN, isolation_level=None)
        setup.execute("CREATE TABLE IF NOT EXISTS t_drop(v)")
        setup.close()
        con = dbapi.connect(url, token=TOKEN)
        con.execute("INSERT INTO t_drop VALUES ('never')")
        self.assertTrue(con.in_transaction)
        del con
        gc.collect()
        other = dbapi.connect(url, token=TOKEN, isolation_level=None)
        t0 = time.monotonic()
        other.execute("INSERT INTO t_drop VALUES ('mine')")
        waited = time.monotonic() - t0
        other.close()
        self.assertLess(waited, 2.5)
        check = dbapi.connect(url, token=TOKEN)
        self.assertEqual(check.execute("SELECT v FROM t_drop").fetchall(), [("mine",)])
        check.close()

    def _writer_free_after(self, code):
        """Run `code` (Python, in a child process, with URL and TOKEN set):
        it leaves a transaction open and exits or drops it; then another
        client's write must not wait for --tx-idle-ms (5 s)."""
        setup = dbapi.connect(self.server.url, token=TOKEN, isolation_level=None)
        setup.execute("CREATE TABLE IF NOT EXISTS t_child(v)")
        setup.close()
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
        prelude = (f"import sys, os, gc; sys.path.insert(0, {src!r}); import lith.dbapi as dbapi; "
                   f"URL = {self.server.url!r}; TOKEN = {TOKEN!r}\n")
        subprocess.run([sys.executable, "-c", prelude + code], check=True, timeout=60)
        other = dbapi.connect(self.server.url, token=TOKEN, isolation_level=None)
        t0 = time.monotonic()
        other.execute("INSERT INTO t_child VALUES ('after')")
        waited = time.monotonic() - t0
        other.close()
        self.assertLess(waited, 2.5)

    def test_exit_closes_what_is_open(self):
        # a program that ends with a transaction open: sqlite3 rolls it back
        # as the process goes; here its stream is closed at exit
        self._writer_free_after("con = dbapi.connect(URL, token=TOKEN)\n"
                                "con.execute(\"INSERT INTO t_child VALUES ('exit')\")\n")

    def test_forked_child_closes_its_own(self):
        # a child forked after the module started its closers drops a
        # connection in a transaction: the child's own closers close it
        self._writer_free_after("first = dbapi.connect(URL, token=TOKEN)\n"
                                "first.execute('SELECT 1')\n"
                                "pid = os.fork()\n"
                                "if pid == 0:\n"
                                "    con = dbapi.connect(URL, token=TOKEN)\n"
                                "    con.execute(\"INSERT INTO t_child VALUES ('child')\")\n"
                                "    del con; gc.collect()\n"
                                "    import time; time.sleep(1)\n"
                                "    os._exit(0)\n"
                                "os.waitpid(pid, 0)\n"
                                "first.close()\n")

    def test_forked_child_leaves_the_parents_streams(self):
        # the child's copy of a parent's connection, dropped in the child,
        # is not the child's to close: the parent's transaction commits
        self._writer_free_after("first = dbapi.connect(URL, token=TOKEN)\n"
                                "first.execute(\"INSERT INTO t_child VALUES ('parent')\")\n"
                                "pid = os.fork()\n"
                                "if pid == 0:\n"
                                "    own = dbapi.connect(URL, token=TOKEN, isolation_level=None)\n"
                                "    own.execute('SELECT 1')\n"
                                "    del first; gc.collect()\n"
                                "    import time; time.sleep(1)\n"
                                "    os._exit(0)\n"
                                "os.waitpid(pid, 0)\n"
                                "first.commit()\n"
                                "assert first.execute(\"SELECT count(*) FROM t_child WHERE v = 'parent'\").fetchone() == (1,)\n"
                                "first.close()\n")

    def test_closes_waiting_are_bounded(self):
        # closers held by a lithd that answers nothing: dropped streams past
        # the bound are left to lithd, not kept in memory with their sockets
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # never accepted: connects, then silence
        self.addCleanup(silent.close)
        for _ in range(dbapi._CLOSERS):
            con = dbapi.connect(f"http://127.0.0.1:{silent.getsockname()[1]}")
            con._baton = "0000.00000001." + "0" * 32
            del con
        gc.collect()
        url = self.server.url
        for i in range(300):
            con = dbapi.connect(url, token=TOKEN)
            con.execute("SELECT ?", (i,))
            del con
        gc.collect()
        self.assertLessEqual(dbapi._closing.qsize(), dbapi._CLOSES_WAITING)

    def test_connection_per_request_never_closed(self):
        # sqlite3's `with connect() as con:` per request closes nothing: 600
        # of them in a row (lithd keeps 256 streams per address)
        url = self.server.url
        t0 = time.monotonic()
        slowest = 0.0
        for i in range(600):
            t = time.monotonic()
            with dbapi.connect(url, token=TOKEN) as con:
                con.execute("SELECT ?", (i,)).fetchone()
            slowest = max(slowest, time.monotonic() - t)
        self.assertLess(slowest, 2.0, f"slowest of 600: {slowest:.2f} s, all {time.monotonic() - t0:.1f} s")


def _ok(result):
    return {"type": "ok", "response": {"type": "execute", "result": result}}


_AUTOCOMMIT = {"type": "ok", "response": {"type": "get_autocommit", "is_autocommit": True}}
_GOOD = {"cols": [{"name": "x"}], "rows": [[{"type": "integer", "value": "1"}]], "affected_row_count": 0}

# What a hostile or broken server may answer, as a function of how many
# requests the pipeline had: (name, HTTP status, body).
_HOSTILE = [
    ("results not a list", 200, lambda n: {"baton": None, "results": "x"}),
    ("results not objects", 200, lambda n: {"baton": None, "results": [1] * n}),
    ("too few results", 200, lambda n: {"baton": None, "results": []}),
    ("is_autocommit not a bool", 200,
     lambda n: {"baton": "b", "results": [_ok(_GOOD)] * (n - 1) + [
         {"type": "ok", "response": {"type": "get_autocommit", "is_autocommit": "no"}}]}),
    ("rows not a list", 200, lambda n: {"baton": None, "results": [_ok(dict(_GOOD, rows=5))] * (n - 1) + [_AUTOCOMMIT]}),
    ("an integer that is not one", 200,
     lambda n: {"baton": None, "results": [_ok(dict(_GOOD, rows=[[{"type": "integer", "value": "x"}]]))] * (n - 1) +
                [_AUTOCOMMIT]}),
    ("a value of no type", 200,
     lambda n: {"baton": None, "results": [_ok(dict(_GOOD, rows=[[{"type": "decimal", "value": "1"}]]))] * (n - 1) +
                [_AUTOCOMMIT]}),
    ("cols not objects", 200, lambda n: {"baton": None, "results": [_ok(dict(_GOOD, cols=[1]))] * (n - 1) + [_AUTOCOMMIT]}),
    ("a rowid that is not one", 200,
     lambda n: {"baton": None, "results": [_ok(dict(_GOOD, last_insert_rowid="x"))] * (n - 1) + [_AUTOCOMMIT]}),
    ("step results not a list", 200,
     lambda n: {"baton": None, "results": [{"type": "ok", "response": {"type": "batch", "result": {
         "step_results": 3, "step_errors": 4}}}] * (n - 1) + [_AUTOCOMMIT]}),
    ("an error that is not an object", 200,
     lambda n: {"baton": None, "results": [{"type": "error", "error": "bad"}] * (n - 1) + [_AUTOCOMMIT]}),
    ("a proxy's error with a number for a code", 502, lambda n: {"error": {"code": 502, "message": "bad gateway"}}),
    ("Hrana's refusal with a list for a message", 400, lambda n: {"code": "X", "message": ["m"]}),
    ("deeply nested", 200, None),
    ("not JSON", 200, lambda n: None),
]


class _FakeHrana(http.server.BaseHTTPRequestHandler):
    answer = None

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name, status, make = self.answer
        if make is None:
            data = b"[" * 100000 + b"]" * 100000
        else:
            out = make(len(body["requests"]))
            data = b"{not json" if out is None else json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class HostileAnswerTest(unittest.TestCase):
    def test_every_failure_is_the_modules(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHrana)
        t = threading.Thread(target=server.serve_forever, daemon=True)
        t.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            for case in _HOSTILE:
                _FakeHrana.answer = case
                for sql in ("SELECT 1", "INSERT INTO t VALUES (1)"):
                    with self.subTest(case=case[0], sql=sql):
                        con = dbapi.connect(url, max_retries=0)
                        try:
                            con.execute(sql).fetchall()
                        except dbapi.Error:
                            pass
                        except Exception as e:  # noqa: BLE001
                            self.fail(f"{case[0]}, {sql}: {type(e).__name__}: {e}")
                        finally:
                            con.close()
        finally:
            server.shutdown()
            server.server_close()


@unittest.skipUnless(LITHD and LITH_NODE and os.path.exists(LITH_NODE or ""), "no lithd or lith-node")
class DbapiDqliteTest(unittest.TestCase):
    def test_same_as_sqlite3_on_dqlite(self):
        """The same sqlite3 program on lithd --dqlite: it sees what sqlite3 shows it."""
        with tempfile.TemporaryDirectory() as d:
            expected = program(sqlite3, sqlite3.connect(os.path.join(d, "same.db")), savepoints=False)
        server = DqliteLithd()
        try:
            got = program(dbapi, dbapi.connect(server.url), savepoints=False)
        finally:
            server.stop()
        for e, g in zip(expected, got):
            self.assertEqual(g, e)
        self.assertEqual(len(got), len(expected))


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _ignore(f):
    try:
        f()
    except lith.LithError:
        pass  # the slow command may be interrupted (--max-run-ms): it held the writer all the same


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Blackhole:
    """A TCP proxy that forwards each request to lithd and closes the
    client's connection when lithd's answer begins: the request ran, its
    answer is lost."""

    def __init__(self, port):
        self.target = port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stopped:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client):
        server = socket.create_connection(("127.0.0.1", self.target))
        server.settimeout(10)
        client.settimeout(10)

        def up():
            try:
                while True:
                    data = client.recv(65536)
                    if not data:
                        return
                    server.sendall(data)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        try:
            server.recv(1)  # lithd answers: the request ran
        except OSError:
            pass
        client.shutdown(socket.SHUT_RDWR)
        client.close()
        server.close()

    def close(self):
        self.stopped = True
        self.sock.close()


if __name__ == "__main__":
    unittest.main()
