"""lith.aio: the client for asyncio programs.

    import asyncio, lith.aio

    async def main():
        async with lith.aio.Client("http://127.0.0.1:8765") as db:
            await db.do(("INSERT INTO kv VALUES (?, ?)", ["a", 1]))
            print(await db.query("SELECT * FROM kv"))

    asyncio.run(main())

Design: not a second client. Each call is lith.Client's own, run on a
thread of this client's executor (at most `threads` at once, 16 by
default), so the transport, its pool, the retries, the errors and the
Hrana code are the one copy in client.py and hrana.py. The event loop
never blocks on lithd; a call waiting for lithd's answer holds a thread,
which is what bounds how many run at once (more wait their turn in the
executor's queue, not in lithd's). Cancelling a call's task stops waiting
for it, not the request: a write already sent may still commit, as with
any lost answer.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from .client import Client as _Client
from .errors import LithError

T = TypeVar("T")


class Client:
    """lith.Client's calls as coroutines. The keywords are lith.Client's, and
    threads: how many calls may wait for lithd at once (16)."""

    def __init__(self, url: Optional[str] = None, *, threads: int = 16, **options: Any):
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.sync = _Client(url, **options)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lith-aio")

    async def _run(self, f: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, functools.partial(f, *args, **kw))
        except RuntimeError as e:
            if self._pool._shutdown:  # type: ignore[attr-defined]
                raise LithError("the client is closed", code="closed") from e
            raise

    async def do(self, statements: Any, **kw: Any) -> List[Dict[str, Any]]:
        return await self._run(self.sync.do, statements, **kw)

    async def query(self, statements: Any, **kw: Any) -> List[Dict[str, Any]]:
        return await self._run(self.sync.query, statements, **kw)

    async def command(self, name: str, params: Optional[Dict[str, Any]] = None, **kw: Any) -> List[Dict[str, Any]]:
        return await self._run(self.sync.command, name, params, **kw)

    async def batch(self, commands: Any, **kw: Any) -> List[Any]:
        return await self._run(self.sync.batch, commands, **kw)

    async def pipeline(self, requests: Sequence[Dict[str, Any]],
                       baton: Optional[str] = None) -> Tuple[Optional[str], List[Dict[str, Any]]]:
        return await self._run(self.sync.pipeline, requests, baton)

    async def stats(self) -> Dict[str, Any]:
        return await self._run(self.sync.stats)

    async def health(self) -> Dict[str, Any]:
        return await self._run(self.sync.health)

    async def commands(self) -> List[Dict[str, Any]]:
        return await self._run(self.sync.commands)

    async def backup(self, path: str, **kw: Any) -> int:
        return await self._run(self.sync.backup, path, **kw)

    async def backup_to_server(self, name: str) -> Dict[str, Any]:
        return await self._run(self.sync.backup_to_server, name)

    async def close(self) -> None:
        """Wait for the calls running, then close the connections."""
        await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)
        self.sync.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
