"""lith.aio against a real lithd: the calls as coroutines, the loop free
while they wait, lith's errors as they are, the bound on calls at once."""
import asyncio
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lith  # noqa: E402
import lith.aio  # noqa: E402
from test_client import LITHD, TOKEN, Lithd  # noqa: E402

# About half a second of the writer's time (longer under sanitizers)
SLOW = ("SELECT count(*) FROM (WITH RECURSIVE c(i) AS "
        "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000000) SELECT i FROM c)")


@unittest.skipUnless(LITHD, "LITHD (the lithd binary) is not set")
class AioTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Lithd(token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_calls_and_errors(self):
        async def main():
            async with lith.aio.Client(self.server.url, token=TOKEN) as db:
                await db.do("CREATE TABLE IF NOT EXISTS a1(k TEXT PRIMARY KEY, v)")
                r = await asyncio.gather(*(db.do(("INSERT INTO a1 VALUES (?, ?)", [f"k{i}", i]))
                                           for i in range(64)))
                self.assertEqual(sorted(x[0]["changes"] for x in r), [1] * 64)
                q = await db.query("SELECT count(*), sum(v) FROM a1")
                self.assertEqual(q[0]["rows"], [[64, sum(range(64))]])
                with self.assertRaises(lith.ConstraintError):
                    await db.do(("INSERT INTO a1 VALUES (?, ?)", ["k1", 0]))
                self.assertEqual((await db.health())["ok"], True)
                baton, res = await db.pipeline([{"type": "execute", "stmt": {"sql": "SELECT 5"}},
                                                {"type": "close"}])
                self.assertEqual(res[0]["response"]["result"]["rows"], [[{"type": "integer", "value": "5"}]])
        asyncio.run(main())

    def test_loop_runs_while_waiting_and_threads_bound(self):
        async def main():
            db = lith.aio.Client(self.server.url, token=TOKEN, threads=2)
            ticks = 0
            running, most = 0, 0
            lock = threading.Lock()
            real = db.sync.query

            def counted(*a, **kw):
                nonlocal running, most
                with lock:
                    running += 1
                    most = max(most, running)
                try:
                    return real(*a, **kw)
                finally:
                    with lock:
                        running -= 1

            db.sync.query = counted

            async def tick():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.01)

            t = asyncio.ensure_future(tick())
            t0 = time.monotonic()
            await asyncio.gather(*(db.query(SLOW) for _ in range(4)))
            took = time.monotonic() - t0
            t.cancel()
            await db.close()
            return ticks, took, most

        ticks, took, most = asyncio.run(main())
        self.assertEqual(most, 2)  # threads=2: never more at once
        self.assertGreater(ticks, took / 0.01 / 4)  # the loop kept running while they waited

    def test_closed_client_says_so(self):
        async def main():
            db = lith.aio.Client(self.server.url, token=TOKEN)
            await db.close()
            with self.assertRaises(lith.LithError) as cm:
                await db.health()
            self.assertEqual(cm.exception.code, "closed")
        asyncio.run(main())

    def test_threads_must_be_positive(self):
        with self.assertRaises(ValueError):
            lith.aio.Client(self.server.url, threads=0)


if __name__ == "__main__":
    unittest.main()
