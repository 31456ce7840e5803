"""What a retry loop can rely on: the two branches of the errors, the
client's own retry of what was not sent, and the safe loop through lithd
being SIGKILLed and restarted.

The lithd helper, the fake server and LITHD are test_client.py's.
"""
import os
import socket
import tempfile
import threading
import time
import unittest

from test_client import LITHD, TOKEN, Lithd, _Fake, free_port, http_answer

import lith


class ErrorTreeTest(unittest.TestCase):
    """"Nothing committed" and "may have committed" are separate branches."""

    def fake(self, script, **options):
        f = _Fake(script)
        self.addCleanup(f.close)
        c = lith.Client(f.url, timeout=5, **options)
        self.addCleanup(c.close)
        return f, c

    def test_neither_branch_is_under_the_other(self):
        self.assertFalse(issubclass(lith.AnswerLost, lith.ConnectionFailed))
        self.assertFalse(issubclass(lith.ConnectionFailed, lith.OutcomeUnknown))
        self.assertFalse(issubclass(lith.OutcomeUnknown, lith.ConnectionFailed))
        self.assertTrue(issubclass(lith.AnswerLost, lith.OutcomeUnknown))

    def test_except_connection_failed_never_sends_a_sent_write_again(self):
        # the loop a user writes first: it must not catch a write that was
        # sent (here lithd took it and died before answering)
        f, c = self.fake(lambda n, m, p, b: (None, "close"))
        sends = 0
        with self.assertRaises(lith.AnswerLost):
            for _ in range(3):
                try:
                    sends += 1
                    c.do("INSERT INTO kv VALUES (1)")
                    break
                except lith.ConnectionFailed:
                    continue
        self.assertEqual((sends, f.paths()), (1, ["POST /v1/do"]))

    def test_an_answer_cut_short_is_classed_by_what_it_said(self):
        body = b'{"results": [{"changes": 1}]}'
        refused = b'{"error": {"code": "constraint", "message": "x"}}'
        cases = [  # (call, status, answer, class)
            ("do", 200, body, lith.AnswerLost),  # it ran: its results are lost
            ("pipeline", 200, body, lith.AnswerLost),  # a Hrana pipeline is a write
            ("do", 504, refused, lith.AnswerLost),
            ("do", 409, refused, lith.ConnectionFailed),  # lithd said it did not commit
            ("query", 200, body, lith.ConnectionFailed),  # a read
        ]
        calls = {"do": lambda c: c.do("INSERT INTO kv VALUES (1)"), "query": lambda c: c.query("SELECT 1"),
                 "pipeline": lambda c: c.pipeline([{"type": "close"}])}
        for name, status, answer, cls in cases:
            cut = http_answer(status, answer[:10], length=len(answer))
            f, c = self.fake(lambda n, m, p, b: (cut, "close"), max_retries=3)
            with self.assertRaises(lith.LithError) as cm:
                calls[name](c)
            e = cm.exception
            self.assertIs(type(e), cls, (name, status, e))
            self.assertEqual(e.status, status)
            self.assertIn("cut short", str(e))
            self.assertEqual(len(f.requests), 1, name)  # never sent again
            if status == 200 and cls is lith.AnswerLost:
                self.assertIn("the request ran", str(e))

    def test_a_pipeline_lost_after_it_was_sent_is_an_answer_lost(self):
        f, c = self.fake(lambda n, m, p, b: (None, "close"), max_retries=3)
        with self.assertRaises(lith.AnswerLost):
            c.pipeline([{"type": "execute", "stmt": {"sql": "INSERT INTO kv VALUES (1)"}}])
        self.assertEqual(f.paths(), ["POST /v3/pipeline"])


class NotSentRetryTest(unittest.TestCase):
    """Refused and missing: retried within the bounds, seen by on_retry."""

    def client(self, url, **options):
        seen = []
        c = lith.Client(url, timeout=5, on_retry=lambda n, wait, e: seen.append((n, wait, type(e))), **options)
        self.addCleanup(c.close)
        return c, seen

    def test_refused_and_missing_socket_are_retried_within_the_bounds(self):
        d = tempfile.mkdtemp(prefix="lith-py-retry-")
        self.addCleanup(os.rmdir, d)
        for where in (f"http://127.0.0.1:{free_port()}", os.path.join(d, "no.sock")):
            for call in (lambda c: c.do("INSERT INTO kv VALUES (1)"), lambda c: c.query("SELECT 1"),
                         lambda c: c.pipeline([{"type": "close"}])):
                c, seen = self.client(where, max_retries=3, max_retry_wait=5)
                with self.assertRaises(lith.ConnectionFailed) as cm:
                    call(c)
                self.assertEqual(cm.exception.code, "connection")
                self.assertIn("(sent 4 times over 0.35 s)", str(cm.exception))
                self.assertEqual(seen, [(1, 0.05, lith.ConnectionFailed), (2, 0.1, lith.ConnectionFailed),
                                        (3, 0.2, lith.ConnectionFailed)], where)
            # no retries: at once
            c, seen = self.client(where, max_retries=0)
            with self.assertRaises(lith.ConnectionFailed):
                c.do("INSERT INTO kv VALUES (1)")
            self.assertEqual(seen, [])
            # the wait bound: 0.05 fits in 0.1 s, 0.05 + 0.1 does not
            c, seen = self.client(where, max_retries=10, max_retry_wait=0.1)
            t0 = time.monotonic()
            with self.assertRaises(lith.ConnectionFailed):
                c.do("INSERT INTO kv VALUES (1)")
            self.assertLess(time.monotonic() - t0, 1)
            self.assertEqual(seen, [(1, 0.05, lith.ConnectionFailed)])

    def test_the_defaults_wait_out_a_restart(self):
        # 12 retries, 50 ms doubling to 1 s: about 8.5 s (client.py says why)
        c, seen = self.client(f"http://127.0.0.1:{free_port()}")
        real = lith.client.time.sleep
        lith.client.time.sleep = lambda s: None
        try:
            with self.assertRaises(lith.ConnectionFailed):
                c.stats()
        finally:
            lith.client.time.sleep = real
        self.assertEqual((c.max_retries, c.max_retry_wait, len(seen)), (12, 30.0, 12))
        self.assertAlmostEqual(sum(wait for _, wait, _ in seen), 8.55)

    @unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
    def test_a_write_made_while_lithd_is_down_lands_once_when_it_is_back(self):
        server = Lithd()
        self.addCleanup(server.stop)
        server.kill()
        for url in (server.url, server.sock):  # refused, and a socket file left behind
            c, seen = self.client(url)
            back = threading.Timer(0.6, server.start)
            back.start()
            r = c.do([("INSERT INTO kv VALUES (?, 1)", [url])])
            back.join()
            self.assertEqual(r[0]["changes"], 1)
            self.assertTrue(seen and all(cls is lith.ConnectionFailed for _, _, cls in seen), seen)
            self.assertEqual(c.query(("SELECT count(*) FROM kv WHERE k = ?", [url]))[0]["rows"], [[1]])
            server.kill()
        server.start()


class PoolTest(unittest.TestCase):
    """pool_size: how many idle connections stay open."""

    def connections(self, pool_size, threads):
        """Requests from `threads` threads, 3 each, at once; then how many
        connections the server saw and how many the client keeps idle."""
        f = _Fake(lambda n, m, p, b: (time.sleep(0.05), (http_answer(200), "keep"))[1])
        self.addCleanup(f.close)
        accepted = []
        serve = f._serve
        f._serve = lambda sock: (accepted.append(1), serve(sock))
        c = lith.Client(f.url, pool_size=pool_size)
        self.addCleanup(c.close)
        go = threading.Barrier(threads)

        def work():
            go.wait()
            for _ in range(3):
                c.stats()

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return len(accepted), len(c._idle)

    def test_pool_size(self):
        self.assertEqual(self.connections(8, 1), (1, 1))  # one thread: one connection, kept
        self.assertEqual(self.connections(0, 1), (3, 0))  # none kept: one per request
        self.assertEqual(self.connections(2, 6)[1], 2)  # six at once, two kept
        self.assertEqual(self.connections(8, 6)[1], 6)
        for bad in (-1, "8", None, True, 1.5):
            with self.assertRaises(ValueError, msg=repr(bad)):
                lith.Client("http://127.0.0.1:1", pool_size=bad)


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class EnvironmentTest(unittest.TestCase):
    """LITHD_UNIX, LITHD_URL, LITHD_TOKEN_FILE, LITHD_TOKEN: as the lith CLI."""

    NAMES = ("LITHD_UNIX", "LITHD_URL", "LITHD_TOKEN_FILE", "LITHD_TOKEN")

    @classmethod
    def setUpClass(cls):
        cls.server = Lithd(token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        saved = {k: os.environ.pop(k, None) for k in self.NAMES}

        def restore():
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
        self.addCleanup(restore)

    def env(self, **values):
        for k in self.NAMES:
            os.environ.pop(k, None)
        os.environ.update(values)

    def reaches(self, *args, **kwargs):
        """Where a Client(*args, **kwargs) goes, and whether its token is lithd's."""
        with lith.Client(*args, max_retries=0, timeout=5, **kwargs) as c:
            try:
                c.stats()
                return c._unix or f"http://{c._host}:{c._port}", True
            except lith.Unauthorized:
                return c._unix or f"http://{c._host}:{c._port}", False

    def test_where(self):
        s = self.server
        nowhere = f"http://127.0.0.1:{free_port()}"
        self.env(LITHD_URL=s.url, LITHD_TOKEN=TOKEN)
        self.assertEqual(self.reaches(), (s.url, True))
        self.env(LITHD_URL=nowhere, LITHD_UNIX=s.sock, LITHD_TOKEN=TOKEN)  # the socket wins
        self.assertEqual(self.reaches(), (s.sock, True))
        self.env(LITHD_URL=nowhere, LITHD_TOKEN=TOKEN)  # an argument wins
        self.assertEqual(self.reaches(s.url), (s.url, True))
        self.assertEqual(self.reaches(unix_socket=s.sock), (s.sock, True))
        self.env(LITHD_URL="", LITHD_UNIX="")  # empty: unset
        self.assertEqual(lith.Client()._where(), "lithd at 127.0.0.1:8765")

    def test_token(self):
        s = self.server
        path = os.path.join(s.dir, "env-token")
        with open(path, "w") as f:
            f.write(TOKEN + "\r\n")
        self.env()
        self.assertEqual(self.reaches(s.url), (s.url, False))
        self.env(LITHD_TOKEN=TOKEN)
        self.assertEqual(self.reaches(s.url), (s.url, True))
        self.env(LITHD_TOKEN="wrong")
        self.assertEqual(self.reaches(s.url), (s.url, False))
        self.assertEqual(self.reaches(s.url, token=TOKEN), (s.url, True))  # an argument wins
        self.env(LITHD_TOKEN_FILE=path, LITHD_TOKEN="wrong")  # the file wins
        self.assertEqual(self.reaches(s.url), (s.url, True))
        self.env(LITHD_TOKEN_FILE="", LITHD_TOKEN=TOKEN)  # empty: unset
        self.assertEqual(self.reaches(s.url), (s.url, True))
        # refused as the CLI refuses them, before anything is sent
        for text in ("", "\n", "a\nb\n", "x" * 4097):
            with open(path, "w") as f:
                f.write(text)
            self.env(LITHD_TOKEN_FILE=path)
            with self.assertRaises(ValueError, msg=repr(text)):
                lith.Client(s.url)
        self.env(LITHD_TOKEN_FILE=os.path.join(s.dir, "missing"))
        with self.assertRaises(FileNotFoundError):
            lith.Client(s.url)
        self.env(LITHD_TOKEN="a\nb")
        with self.assertRaises(ValueError):
            lith.Client(s.url)


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class KillTest(unittest.TestCase):
    """docs/clients.md's safe loop through SIGKILLs and restarts of lithd:
    writer threads share one Client; each write carries an idempotency key
    (a UNIQUE column, ON CONFLICT DO NOTHING) and is sent again on
    OutcomeUnknown, never on anything else. Every write counted done is
    there exactly once, and no call of the client was run twice."""

    WRITERS = 4
    KILLS = 4

    def test_no_write_lost_or_doubled(self):
        server = Lithd()
        self.addCleanup(server.stop)
        db = lith.Client(server.url)
        self.addCleanup(db.close)
        # w: the writes, by key. calls: one row per call of db.do (the
        # writer's attempt number, no UNIQUE): two rows for one (key,
        # attempt) would be the client sending one call twice.
        db.do(["CREATE TABLE w(key TEXT UNIQUE NOT NULL, writer INTEGER)",
               "CREATE TABLE calls(key TEXT NOT NULL, attempt INTEGER NOT NULL)"])
        lock = threading.Lock()
        done, failed, counts = [], [], {"lost": 0, "not_sent": 0}

        def on_retry(n, wait, e):
            if isinstance(e, lith.ConnectionFailed):
                with lock:
                    counts["not_sent"] += 1

        db.on_retry = on_retry
        stop = threading.Event()

        def writer(t):
            i = 0
            try:
                while not stop.is_set():
                    key, attempt = f"{t}-{i}", 0
                    while True:  # the safe loop (docs/clients.md)
                        try:
                            db.do([("INSERT INTO w(key, writer) VALUES (?, ?) ON CONFLICT(key) DO NOTHING", [key, t]),
                                   ("INSERT INTO calls(key, attempt) VALUES (?, ?)", [key, attempt])])
                            break
                        except lith.OutcomeUnknown:
                            with lock:
                                counts["lost"] += 1
                            attempt += 1
                    with lock:
                        done.append(key)
                    i += 1
            except Exception as e:  # noqa: BLE001 - the test fails on it below
                with lock:
                    failed.append(f"writer {t}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(self.WRITERS)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        for _ in range(self.KILLS):
            time.sleep(0.6)
            server.kill()
            time.sleep(0.3)  # down: connections refused meanwhile
            server.start()
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t0
        self.assertEqual(failed, [])
        keys, last = [], 0
        while True:  # in pages: an answer holds at most lithd's max_rows
            page = db.query(("SELECT rowid, key FROM w WHERE rowid > ? ORDER BY rowid LIMIT 5000", [last]))
            if not page[0]["rows"]:
                break
            keys += [k for _, k in page[0]["rows"]]
            last = page[0]["rows"][-1][0]
        self.assertEqual(sorted(keys), sorted(done))  # none lost, none doubled, none unaccounted
        self.assertEqual(len(set(done)), len(done))
        twice = db.query("SELECT key, attempt, count(*) FROM calls GROUP BY key, attempt HAVING count(*) > 1")
        self.assertEqual(twice[0]["rows"], [])
        # the run went through what it is for: writes lost in a kill and
        # sent again by the loop, and writes the client held until lithd
        # was back
        self.assertGreater(counts["lost"], 0, counts)
        self.assertGreater(counts["not_sent"], 0, counts)
        # (a write that committed before its answer was lost ran twice;
        # its key kept the second from writing: how often, for the log)
        absorbed = db.query("SELECT count(*) FROM (SELECT key FROM calls GROUP BY key HAVING count(*) > 1)")
        print(f"\n  {len(done)} writes through {self.KILLS} kills in {elapsed:.1f} s: "
              f"{counts['lost']} answers lost and sent again by the loop "
              f"({absorbed[0]['rows'][0][0]} of them had committed), "
              f"{counts['not_sent']} retries of what was not sent", flush=True)


if __name__ == "__main__":
    unittest.main()
