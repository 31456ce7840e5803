"""lith.dbapi: DB-API 2.0 (PEP 249) for lithd, shaped as Python's sqlite3.

    import lith.dbapi as sqlite3
    con = sqlite3.connect("http://127.0.0.1:8765")   # the only line changed
    con.execute("CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v)")
    with con:                                           # commit, or rollback on error
        con.execute("INSERT INTO kv VALUES (?, ?)", ("a", 1))
    print(con.execute("SELECT v FROM kv WHERE k = :k", {"k": "a"}).fetchone())

Design:
  - Every statement goes to lithd's Hrana endpoint (/v3/pipeline, through
    lith.Client and hrana.py: one copy of the transport, its retries and
    the value encoding) on the connection's own Hrana stream, with a
    get_autocommit after it, so in_transaction is always what lithd says.
    The stream is kept like a sqlite3 connection's handle; one that lithd
    closed while the connection was idle outside a transaction is replaced
    silently (that refusal ran nothing).
  - sqlite3's transactions (its isolation_level, 3.6-3.11 semantics):
    outside a transaction, an INSERT, UPDATE, DELETE or REPLACE first opens
    one; commit() and rollback() end it; isolation_level None is
    autocommit. Outside a transaction every statement is one command of
    lithd's writer, group-committed with every other client's; a query runs
    on lithd's read pool. The implicit BEGIN is BEGIN IMMEDIATE for "" and
    "DEFERRED" too: the statement that opens it writes at once, and a
    deferred BEGIN would fail SQLITE_BUSY whenever another client committed
    between the two. It is sent in the same round trip as the statement,
    which runs only if the BEGIN left the stream in a transaction (a batch
    step conditioned on not is_autocommit): a refused BEGIN never lets the
    statement commit alone. An open transaction is lithd's interactive
    transaction: it holds the writer until it ends, within --tx-idle-ms
    and --tx-max-ms (docs/hrana.md); past them lithd rolls it back and the
    next statement raises OperationalError (TRANSACTION_TIMEOUT).
  - executemany is one Hrana batch per 1000 parameter sets or 4 MiB (one
    command in autocommit), each step run only if the one before it
    succeeded: the sets before a failing one stay, as sqlite3's.
  - Errors: Hrana's codes as sqlite3's classes (IntegrityError for
    SQLITE_CONSTRAINT, OperationalError for SQLITE_ERROR/BUSY/timeouts, ...;
    .sqlite_errorname and .code carry the code). A request whose answer was
    lost raises OutcomeUnknownError, both an OperationalError and a
    lith.OutcomeUnknown: it may have committed (a COMMIT above all); one
    that could not be sent, after the client's retries, raises
    ConnectionFailedError, both an OperationalError and a
    lith.ConnectionFailed: nothing of it ran, a transaction stays as it was.
  - Rows are fetched whole with the statement (bounded by lithd's
    --max-result-mib and the client's max_answer_bytes).
  - A Connection may be used from several threads (a lock keeps one
    request at a time on its stream); threadsafety is 1, as PEP 249 means it
    for a connection whose transaction all its users share.
"""
from __future__ import annotations

import atexit
import collections.abc
import datetime
import os
import queue
import re
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import hrana
from .client import Client
from .errors import ConnectionFailed as _NotSent
from .errors import LithError, OutcomeUnknown as _Unknown, TooLarge

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"  # and "named" (:name, @name, $name), as sqlite3

try:  # the SQLite of this host: lithd's when it runs here (server_version() asks lithd)
    import sqlite3 as _sqlite3

    sqlite_version = _sqlite3.sqlite_version
except ImportError:  # a Python built without it
    sqlite_version = "3.40.1"
sqlite_version_info = tuple(int(x) for x in sqlite_version.split("."))

PARSE_DECLTYPES = 1
PARSE_COLNAMES = 2

# What executemany puts in one batch, at most: lithd's --max-statements is
# 10000 and --max-body 8 MiB.
_BATCH_STEPS = 1000
_BATCH_BYTES = 4 << 20


# ---- PEP 249's exceptions, with sqlite3's names ---------------------------------

class Warning(Exception):  # noqa: A001 (PEP 249's name)
    pass


class Error(Exception):
    """Every error of this module. .code: Hrana's code ("SQLITE_CONSTRAINT",
    "TRANSACTION_TIMEOUT", ...) or lith's; .sqlite_errorname: the same when
    it is SQLite's; .sqlite_errorcode: SQLite's primary code, or None."""

    code: Optional[str] = None
    sqlite_errorname: Optional[str] = None
    sqlite_errorcode: Optional[int] = None


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


class OutcomeUnknownError(OperationalError, _Unknown):
    """The request was sent and its answer lost: it may have committed.
    Never sent again; read the database (or use an idempotency key,
    docs/clients.md) before running it again. The transaction it was in,
    if any, is gone from this connection."""

    def __init__(self, message: str, *, code: str = "outcome_unknown", status: Optional[int] = None):
        _Unknown.__init__(self, message, code=code, status=status)

    def __str__(self) -> str:
        return self.message


class ConnectionFailedError(OperationalError, _NotSent):
    """Nothing of the request reached lithd (after the client's own bounded
    retries): it did not run, and a transaction is as it was."""

    def __init__(self, message: str, *, code: str = "connection", status: Optional[int] = None):
        _NotSent.__init__(self, message, code=code, status=status)

    def __str__(self) -> str:
        return self.message


# SQLite's primary result codes, by name (sqlite3.h)
_PRIMARY = {
    "SQLITE_ERROR": 1, "SQLITE_INTERNAL": 2, "SQLITE_PERM": 3, "SQLITE_ABORT": 4, "SQLITE_BUSY": 5,
    "SQLITE_LOCKED": 6, "SQLITE_NOMEM": 7, "SQLITE_READONLY": 8, "SQLITE_INTERRUPT": 9, "SQLITE_IOERR": 10,
    "SQLITE_CORRUPT": 11, "SQLITE_NOTFOUND": 12, "SQLITE_FULL": 13, "SQLITE_CANTOPEN": 14,
    "SQLITE_PROTOCOL": 15, "SQLITE_EMPTY": 16, "SQLITE_SCHEMA": 17, "SQLITE_TOOBIG": 18,
    "SQLITE_CONSTRAINT": 19, "SQLITE_MISMATCH": 20, "SQLITE_MISUSE": 21, "SQLITE_NOLFS": 22,
    "SQLITE_AUTH": 23, "SQLITE_FORMAT": 24, "SQLITE_RANGE": 25, "SQLITE_NOTADB": 26,
}

# Hrana's codes as sqlite3's classes (CPython's _pysqlite_seterror for
# SQLite's; the protocol's own by what they mean). Others: OperationalError.
_CLASS = {
    "SQLITE_CONSTRAINT": IntegrityError, "SQLITE_MISMATCH": IntegrityError,
    "SQLITE_TOOBIG": DataError, "REQUEST_TOO_LARGE": DataError,
    "SQLITE_INTERNAL": InternalError, "SQLITE_NOTFOUND": InternalError,
    "SQLITE_CORRUPT": DatabaseError, "SQLITE_NOTADB": DatabaseError, "SQLITE_FORMAT": DatabaseError,
    "SQLITE_AUTH": DatabaseError,
    "SQLITE_MISUSE": InterfaceError, "SQLITE_RANGE": InterfaceError, "PROTO_ERROR": InterfaceError,
    "ARGS_INVALID": ProgrammingError, "ARGS_BOTH_POSITIONAL_AND_NAMED": ProgrammingError,
    "SQL_MANY_STATEMENTS": ProgrammingError, "SQL_NOT_FOUND": InterfaceError,
}


def _error(code: str, message: str, cause: Optional[BaseException] = None) -> Error:
    base = code.split("_", 2)
    primary = "_".join(base[:2]) if code.startswith("SQLITE_") else code
    cls = _CLASS.get(code) or _CLASS.get(primary) or OperationalError
    e = cls(message)
    e.code = code
    if code.startswith("SQLITE_"):
        e.sqlite_errorname = code
        e.sqlite_errorcode = _PRIMARY.get(primary)
    if cause is not None:
        e.__cause__ = cause
    return e


def _bad_answer(e: BaseException) -> Error:
    out = InterfaceError(f"lithd's answer is not Hrana's as this module reads it: {type(e).__name__}: {e}")
    out.code = "bad_answer"
    return out


def _from_lith(e: LithError) -> Error:
    """A failure of the whole request (the transport, an HTTP refusal) as this module's."""
    if isinstance(e, _Unknown):
        out: Error = OutcomeUnknownError(str(e.message), code=e.code, status=e.status)
    elif isinstance(e, _NotSent):
        out = ConnectionFailedError(str(e.message), code=e.code, status=e.status)
    elif isinstance(e, TooLarge):
        out = DataError(e.message)
        out.code = e.code
    else:
        code = str(e.code)
        out = _error(code if code.isupper() else "lith_" + code, str(e.message))
    out.__cause__ = e
    return out


# ---- Types, as PEP 249 names them --------------------------------------------------

Binary = memoryview
Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    return Timestamp(*time.localtime(ticks)[:6])


class _Type(frozenset):
    def __eq__(self, other: object) -> bool:
        return other in self if isinstance(other, str) else frozenset.__eq__(self, other)

    __hash__ = frozenset.__hash__


STRING = _Type({"TEXT"})
BINARY = _Type({"BLOB"})
NUMBER = _Type({"INTEGER", "REAL"})
DATETIME = _Type()
ROWID = _Type({"INTEGER"})


def _adapt(v: Any) -> Any:
    # sqlite3's default adapters (Python 3.11): dates as ISO 8601 text
    if isinstance(v, datetime.datetime):
        return v.isoformat(" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    return v


def _args(params: Any) -> Any:
    if params is None:
        return None
    if isinstance(params, collections.abc.Mapping):
        return {k: _adapt(v) for k, v in params.items()}
    if isinstance(params, (str, bytes, bytearray)) or not isinstance(params, collections.abc.Sequence):
        raise ProgrammingError("parameters are of unsupported type")
    return [_adapt(v) for v in params]


def _stmt(sql: str, params: Any) -> Dict[str, Any]:
    if not isinstance(sql, str):
        raise TypeError(f"the SQL must be a str, not {type(sql).__name__}")
    try:
        return hrana.stmt(sql, _args(params))
    except TypeError as e:
        raise ProgrammingError(f"Error binding parameter: {e}") from None
    except ValueError as e:  # an infinite float (OverflowError stays itself, as sqlite3's)
        err = DataError(f"Error binding parameter: {e}")
        err.code = "unencodable"
        raise err from None


# ---- Streams nobody closed -----------------------------------------------------------
# A connection dropped without close() (sqlite3's `with connect() as con:`
# idiom closes nothing) would keep its stream, and any transaction in it,
# until lithd's --stream-idle-ms: a finalizer hands the stream to a few
# closer threads, which send its close. Finalizers run inside the garbage
# collector, on any thread, so they only put into a SimpleQueue (safe
# there); the threads are started by connect(), never by a finalizer. The
# queue is bounded (_CLOSES_WAITING): past it a dropped stream is left to
# lithd's own bounds rather than kept, with its client's sockets, in memory
# (a lithd that stopped answering holds the closers for their timeout).
# A forked child starts its own closers and never closes its parent's
# streams; at exit the streams still open are closed, within _EXIT_WAIT.

_CLOSERS = 4
_CLOSES_WAITING = 64
_CLOSE_TIMEOUT = 2.0
_EXIT_WAIT = 2.0

_closing: "queue.SimpleQueue[Tuple[Client, Optional[str], bool]]" = queue.SimpleQueue()
_closer_lock = threading.Lock()
_closers: List[threading.Thread] = []
_live: "weakref.WeakSet[Connection]" = weakref.WeakSet()


def _close_one(client: Client, baton: Optional[str], owned: bool) -> None:
    if owned:  # nobody else sends with it: one try, briefly
        client.timeout = min(client.timeout or _CLOSE_TIMEOUT, _CLOSE_TIMEOUT)
        client.max_retries = 0
    try:
        if baton is not None:
            client.pipeline([{"type": "close"}], baton)
    except Exception:  # noqa: BLE001 (lithd closes it once idle all the same)
        pass
    if owned:
        client.close()


def _closer_run(q: "queue.SimpleQueue[Tuple[Client, Optional[str], bool]]") -> None:
    while True:
        _close_one(*q.get())


def _start_closers() -> None:
    with _closer_lock:
        while len(_closers) < _CLOSERS:
            t = threading.Thread(target=_closer_run, args=(_closing,), name="lith-dbapi-closer", daemon=True)
            t.start()
            _closers.append(t)


def _queue_close(client: Client, baton: Optional[str], owned: bool) -> None:
    if _closing.qsize() < _CLOSES_WAITING:
        _closing.put((client, baton, owned))


def _after_fork_in_child() -> None:
    # the parent's threads and queue are not the child's: new ones, empty
    global _closing, _closer_lock, _closers, _live
    _closing = queue.SimpleQueue()
    _closer_lock = threading.Lock()
    _closers = []
    _live = weakref.WeakSet()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _at_exit() -> None:
    # what is still open or waiting, closed by threads of its own within
    # _EXIT_WAIT: the closers are daemons, gone with the interpreter
    jobs = []
    for con in list(_live):
        jobs.append(con._detach())
    while True:
        try:
            jobs.append(_closing.get_nowait())
        except queue.Empty:
            break
    threads = [threading.Thread(target=_close_one, args=job, daemon=True) for job in jobs if job is not None]
    for t in threads:
        t.start()
    deadline = time.monotonic() + _EXIT_WAIT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


class _Stream:
    """What a finalizer needs of a connection: its stream's baton, and the
    process that opened it."""

    __slots__ = ("baton", "pid")

    def __init__(self) -> None:
        self.baton: Optional[str] = None
        self.pid = os.getpid()


def _abandoned(stream: _Stream, client: Client, owned: bool) -> None:
    if stream.pid == os.getpid() and (stream.baton is not None or owned):
        _queue_close(client, stream.baton, owned)


# ---- Reading SQL, as much as sqlite3 does -------------------------------------------

_SPACE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.S)
_WORD = re.compile(r"[A-Za-z]+")


def _keyword(sql: str) -> str:
    """The statement's first keyword, upper case ("" when none)."""
    m = _WORD.match(sql, _SPACE.match(sql).end())
    return m.group(0).upper() if m else ""


_DML = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})

# The words of a short statement, comments skipped as SQLite skips them:
# identifiers, quoted ones whole, and any other character alone.
_TOKEN = re.compile(r'"(?:[^"]|"")*"|\[[^\]]*\]|`(?:[^`]|``)*`|\'(?:[^\']|\'\')*\'|[A-Za-z_\x80-\U0010ffff][\w$\x80-\U0010ffff]*|\S',
                    re.S)
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_LEVELS = ("", "DEFERRED", "IMMEDIATE", "EXCLUSIVE")


def _words(sql: str, most: int) -> Optional[List[str]]:
    """At most `most` words of sql's only statement; None when it has more
    words, or a second statement after a ';'."""
    out: List[str] = []
    ended = False
    pos = _SPACE.match(sql).end()
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        assert m is not None  # \S matches any character _SPACE left
        pos = _SPACE.match(sql, m.end()).end()
        if m.group(0) == ";":
            ended = True
        elif ended or len(out) == most:
            return None
        else:
            out.append(m.group(0))
    return out


def _fold(name: str) -> str:
    """A savepoint's name as SQLite compares them: quotes off, ASCII
    letters without case (SQLite folds no other letter)."""
    if name[0] in "\"`'":
        name = name[1:-1].replace(name[0] * 2, name[0])
    elif name[0] == "[":
        name = name[1:-1]
    return name.translate(_ASCII_LOWER)


def _savepoint(kw: str, sql: str) -> Optional[str]:
    """The savepoint a SAVEPOINT, RELEASE [SAVEPOINT] or ROLLBACK
    [TRANSACTION] TO [SAVEPOINT] names, folded; None when the statement is
    none of them (or SQLite would not take it as one)."""
    w = _words(sql, 6)
    if not w:
        return None
    up = [x.upper() for x in w]
    if kw == "SAVEPOINT" and len(w) == 2:
        return _fold(w[1])
    # (a bare SAVEPOINT there is SQLite's keyword, a name missing: an error)
    if kw == "RELEASE" and ((len(w) == 2 and up[1] != "SAVEPOINT") or (len(w) == 3 and up[1] == "SAVEPOINT")):
        return _fold(w[-1])
    if kw == "ROLLBACK":
        rest = up[1:]
        if rest[:1] == ["TRANSACTION"]:
            rest = rest[1:]
        if rest[:1] == ["TO"] and ((len(rest) == 2 and rest[1] != "SAVEPOINT") or
                                   (len(rest) == 3 and rest[1] == "SAVEPOINT")):
            return _fold(w[-1])
    return None


class Row:
    """sqlite3.Row's equal: a row by index or by column name (case-insensitive),
    with keys(); for row_factory."""

    __slots__ = ("_keys", "_values")

    def __init__(self, cursor: "Cursor", values: Sequence[Any]):
        self._keys = tuple(d[0] for d in cursor.description or ())
        self._values = tuple(values)

    def keys(self) -> List[str]:
        return list(self._keys)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            low = key.lower()
            for i, k in enumerate(self._keys):
                if k.lower() == low:
                    return self._values[i]
            raise IndexError("No item with that key")
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self):
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and self._keys == other._keys and self._values == other._values

    def __hash__(self) -> int:
        return hash((self._keys, self._values))

    def __repr__(self) -> str:
        return f"<lith.dbapi.Row {dict(zip(self._keys, self._values))!r}>"


# ---- Connection ----------------------------------------------------------------------

def connect(url: Optional[str] = None, *, token: Optional[str] = None, isolation_level: Optional[str] = "",
            timeout: Optional[float] = 30.0, ca_file: Optional[str] = None, db: Optional[str] = None,
            client: Optional[Client] = None, detect_types: int = 0, check_same_thread: bool = True,
            cached_statements: int = 128, uri: bool = False, **client_options: Any) -> "Connection":
    """A connection to the lithd at url (lith.Client's forms: http://HOST:PORT,
    https://..., a Unix socket path, http+unix://...; None: $LITHD_URL, else
    lithd's default address), or over client= (a lith.Client, shared: close()
    leaves it open). token, timeout (seconds for each request), ca_file, db
    (a database NAME of a lithd serving several) and the other keywords go to
    lith.Client. isolation_level as sqlite3's: "" (the default), "DEFERRED",
    "IMMEDIATE", "EXCLUSIVE", or None for autocommit. Nothing is sent until
    the first statement. check_same_thread, cached_statements and uri are
    accepted for sqlite3's callers and change nothing; detect_types is not
    supported (NotSupportedError)."""
    _start_closers()
    if detect_types:
        raise NotSupportedError("detect_types is not supported: lithd answers SQLite's values as they are stored")
    if client is None:
        client = Client(url, token=token, timeout=timeout, ca_file=ca_file, db=db, **client_options)
        owned = True
    else:
        if url is not None or token is not None or ca_file is not None or db is not None or client_options:
            raise ProgrammingError("connect(): client= is given; the other connection options are its own")
        owned = False
    return Connection(client, isolation_level, owned)


class Connection:
    """One lithd Hrana stream with sqlite3's transaction rules (see connect())."""

    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(self, client: Client, isolation_level: Optional[str] = "", owned: bool = False):
        self._client = client
        self._owned = owned
        self._stream = _Stream()
        self._finalizer = weakref.finalize(self, _abandoned, self._stream, client, owned)
        self._finalizer.atexit = False  # _at_exit closes it, with a bound
        _live.add(self)
        self._in_tx = False
        # a transaction a SAVEPOINT opened: its savepoints, innermost last
        # (RELEASE of the outermost commits it, as SQLite's); else None
        self._savepoints: Optional[List[Optional[str]]] = None
        self._closed = False
        self._lock = threading.RLock()
        self._level: Optional[str] = None
        self.isolation_level = isolation_level
        self.row_factory: Optional[Callable[["Cursor", Tuple[Any, ...]], Any]] = None
        self.text_factory = str
        self._last_rowid = 0

    @property
    def _baton(self) -> Optional[str]:
        return self._stream.baton

    @_baton.setter
    def _baton(self, baton: Optional[str]) -> None:
        self._stream.baton = baton

    # -- sqlite3's attributes

    @property
    def isolation_level(self) -> Optional[str]:
        return self._level

    @isolation_level.setter
    def isolation_level(self, level: Optional[str]) -> None:
        if level is not None:
            if not isinstance(level, str) or level.upper() not in _LEVELS:
                raise ValueError("isolation_level string must be '', 'DEFERRED', 'IMMEDIATE', or 'EXCLUSIVE'")
            level = level.upper()
        elif self._in_tx and not self._closed:
            self.commit()  # sqlite3: autocommit from now on commits what is open
        self._level = level

    @property
    def in_transaction(self) -> bool:
        return self._in_tx

    @property
    def client(self) -> Client:
        """The lith.Client this connection sends through."""
        return self._client

    # -- PEP 249

    def cursor(self, factory: Optional[Callable[["Connection"], "Cursor"]] = None) -> "Cursor":
        self._check()
        return (factory or Cursor)(self)

    def commit(self) -> None:
        """End the open transaction with COMMIT (nothing when none is open).
        OutcomeUnknownError when its answer was lost: it may have committed."""
        self._check()
        with self._lock:
            if self._in_tx:
                self._one(hrana.stmt("COMMIT"))

    def rollback(self) -> None:
        """End the open transaction with ROLLBACK (nothing when none is open).
        A ROLLBACK that cannot reach lithd raises nothing: the stream is
        closed as soon as lithd can be reached (the closer thread), and
        lithd rolls back what it held; nor does one of a transaction lithd
        had already ended (a bound)."""
        self._check()
        with self._lock:
            if not self._in_tx:
                return
            try:
                self._one(hrana.stmt("ROLLBACK"))
            except (OutcomeUnknownError, ConnectionFailedError):
                self._forget()
            except Error:
                if self._in_tx:
                    raise
                # lithd had ended it already (a bound: TRANSACTION_TIMEOUT):
                # nothing is open, which is what a rollback is for

    def close(self) -> None:
        """Close the stream (lithd rolls back what is open: sqlite3 does not
        commit on close) and, when connect() made it, the client. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer.detach()
            baton, self._baton, self._in_tx = self._baton, None, False
        if baton is not None:
            try:
                self._client.pipeline([{"type": "close"}], baton)
            except LithError:
                pass  # lithd closes it once idle: it holds nothing then but a slot
        if self._owned:
            self._client.close()

    def execute(self, sql: str, parameters: Any = ()) -> "Cursor":
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> "Cursor":
        return self.cursor().executemany(sql, seq_of_parameters)

    def executescript(self, sql_script: str) -> "Cursor":
        return self.cursor().executescript(sql_script)

    def server_version(self) -> str:
        """The SQLite version lithd runs (SELECT sqlite_version())."""
        return self.execute("SELECT sqlite_version()").fetchone()[0]

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> bool:
        # sqlite3's: commit on success, roll back on an exception (and when
        # the commit fails: a block run again must not land in the old
        # transaction); not closed
        if kind is None:
            try:
                self.commit()
            except BaseException:
                try:
                    self.rollback()
                except Error:
                    self._forget()
                raise
        else:
            self.rollback()
        return False

    # -- The stream

    def _check(self) -> None:
        if self._closed:
            raise ProgrammingError("Cannot operate on a closed database.")

    def _send(self, requests: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The requests and a get_autocommit, on this connection's stream;
        their results. Keeps in_transaction as lithd says it is."""
        requests = requests + [{"type": "get_autocommit"}]
        for attempt in (0, 1):
            fresh = self._baton is None
            try:
                baton, results = self._client.pipeline(requests, self._baton)
                break
            except _Unknown as e:  # sent; the stream's state is unknown
                self._forget()
                raise _from_lith(e) from None
            except _NotSent as e:  # nothing ran: the stream is as it was
                raise _from_lith(e) from None
            except LithError as e:
                if e.code in ("STREAM_EXPIRED", "STREAM_INVALID") and not fresh:
                    self._baton = None
                    if not self._in_tx and attempt == 0:
                        continue  # closed while idle outside a transaction: nothing ran, nothing lost
                    self._in_tx = False
                    err = OperationalError(f"the transaction was lost: lithd closed its stream ({e.message})")
                    err.code = e.code
                    raise err from None
                raise _from_lith(e) from None
        self._baton = baton
        last = results.pop()
        try:
            if hrana.error_of(last) is None:
                autocommit = hrana.response_of(last).get("is_autocommit", True)
                if not isinstance(autocommit, bool):
                    raise ValueError(f"is_autocommit is {autocommit!r}")
                self._in_tx = not autocommit
        except (ValueError, TypeError, AttributeError) as e:
            self._forget()
            raise _bad_answer(e) from None
        if baton is None:
            self._in_tx = False
        if not self._in_tx:
            self._savepoints = None
        return results

    def _detach(self) -> Optional[Tuple[Client, Optional[str], bool]]:
        """At exit: this connection's stream to close, if it is this
        process's and open; nothing more is sent through it."""
        if self._closed or not self._finalizer.detach():
            return None
        self._closed = True
        if self._stream.pid != os.getpid() or (self._baton is None and not self._owned):
            return None
        return self._client, self._baton, self._owned

    def _end_quietly(self) -> None:
        """ROLLBACK what this connection's BEGIN opened, whatever comes of it."""
        try:
            self._one(hrana.stmt("ROLLBACK"))
        except Error:
            if self._in_tx:
                self._forget()

    def _forget(self) -> None:
        """Leave the stream, whose state is not known here: the closer
        thread closes it, so lithd rolls back any transaction in it now
        rather than once it is idle too long."""
        if self._baton is not None:
            _queue_close(self._client, self._baton, False)
        self._baton, self._in_tx, self._savepoints = None, False, None

    def _one(self, stmt: Dict[str, Any]) -> Dict[str, Any]:
        """One statement; its result, or its error raised."""
        (entry,) = self._send([{"type": "execute", "stmt": stmt}])
        try:
            e = hrana.error_of(entry)
            if e is not None:
                raise _error(str(e.get("code") or "SQLITE_ERROR"), str(e.get("message", "")))
            result = hrana.response_of(entry)["result"]
            if not isinstance(result, dict):
                raise TypeError(f"the result is {type(result).__name__}")
            return result
        except (ValueError, TypeError, AttributeError, KeyError) as e:
            raise _bad_answer(e) from None

    def _send_begun(self, requests: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """A BEGIN, then the requests, in one round trip; their results, or
        the BEGIN's error raised. The requests must be batches whose first
        step is conditioned on _IN_TX: a BEGIN lithd refused (queued past
        --tx-max-ms) then runs nothing of them in autocommit. IMMEDIATE
        for every isolation level but EXCLUSIVE: what follows writes."""
        level = "EXCLUSIVE" if self._level == "EXCLUSIVE" else "IMMEDIATE"
        begin, *results = self._send([{"type": "execute", "stmt": hrana.stmt("BEGIN " + level)}] + requests)
        e = hrana.error_of(begin)
        if e is not None:
            raise _error(str(e.get("code") or "SQLITE_ERROR"), str(e.get("message", "")))
        return results


_IN_TX = {"type": "not", "cond": {"type": "is_autocommit"}}


class Cursor:
    """A statement's result, fetched whole; sqlite3.Cursor's attributes."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.arraysize = 1
        self.row_factory = connection.row_factory
        self.description: Optional[Tuple[Tuple[Any, ...], ...]] = None
        self.rowcount = -1
        self.lastrowid: Optional[int] = None
        self._rows: List[Tuple[Any, ...]] = []
        self._next = 0
        self._closed = False

    def _check(self) -> Connection:
        if self._closed:
            raise ProgrammingError("Cannot operate on a closed cursor.")
        self.connection._check()
        return self.connection

    def _reset(self) -> None:
        self.description = None
        self.rowcount = -1
        self._rows, self._next = [], 0

    def _take(self, result: Mapping[str, Any], dml: bool) -> None:
        try:
            cols = result.get("cols") or []
            description = tuple((str(c["name"]), None, None, None, None, None, None) for c in cols) or None
            rows = hrana.rows(result)
            rowcount = int(result.get("affected_row_count", 0)) if dml else -1
            rowid = result.get("last_insert_rowid")
            rowid = None if rowid is None else int(rowid)
        except (ValueError, TypeError, AttributeError, KeyError) as e:
            raise _bad_answer(e) from None
        self.description, self._rows, self.rowcount = description, rows, rowcount
        con = self.connection
        if rowid is not None:
            con._last_rowid = rowid
        self.lastrowid = con._last_rowid

    def execute(self, sql: str, parameters: Any = ()) -> "Cursor":
        con = self._check()
        stmt = _stmt(sql, parameters)
        kw = _keyword(sql)
        dml = kw in _DML
        with con._lock:
            self._reset()
            # sqlite3's rule: a DML statement outside a transaction opens one;
            # SQLite's: so does a SAVEPOINT, and RELEASE of it commits (lithd
            # would run it as a command of its own, its savepoint gone at once)
            savepoint = kw == "SAVEPOINT" and not con._in_tx
            if savepoint or (dml and con._level is not None and not con._in_tx):
                (batch,) = con._send_begun([{"type": "batch", "batch": {"steps": [{"stmt": stmt, "condition": _IN_TX}]}}])
                try:
                    self._take(_step(batch, 0), dml)
                except Error:
                    if savepoint:  # SQLite never began a transaction for it: end the BEGIN's
                        con._end_quietly()
                    raise
                if savepoint:
                    con._savepoints = [_savepoint(kw, sql)]
                return self
            stack = con._savepoints
            name = _savepoint(kw, sql) if stack is not None and kw in ("SAVEPOINT", "RELEASE", "ROLLBACK") else None
            if kw == "RELEASE" and name is not None and name in stack and _last(stack, name) == 0:
                # the outermost savepoint of a transaction it began: SQLite's
                # RELEASE of it is a COMMIT, and a COMMIT that fails keeps
                # the transaction and its savepoint, as SQLite's does
                self._take(con._one(hrana.stmt("COMMIT")), False)
                return self
            try:
                result = con._one(stmt)
            except Error as e:
                if e.code == "SQL_NO_STATEMENT":  # sqlite3 runs "" (or only a comment) as nothing
                    self.lastrowid = con._last_rowid
                    return self
                raise
            self._take(result, dml)
            stack = con._savepoints  # (None once the transaction ended)
            if stack is not None and stack is con._savepoints and name is not None:
                # a transaction a SAVEPOINT began: its stack, innermost last
                if kw == "SAVEPOINT":
                    stack.append(name)
                elif name in stack:
                    del stack[_last(stack, name) + (kw == "ROLLBACK"):]
        return self

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> "Cursor":
        """One batch of steps per 1000 parameter sets (or 4 MiB), each step
        run only if the one before it succeeded."""
        con = self._check()
        if _keyword(sql) not in _DML:
            raise ProgrammingError("executemany() can only execute DML statements.")
        with con._lock:
            self._reset()
            total = 0
            steps: List[Dict[str, Any]] = []
            size = 0
            for params in seq_of_parameters:
                step = {"stmt": _stmt(sql, params)}
                n = len(hrana.dumps(step["stmt"]))
                if steps and (len(steps) >= _BATCH_STEPS or size + n > _BATCH_BYTES):
                    total += self._many(con, steps)
                    steps, size = [], 0
                steps.append(step)
                size += n
            if steps:
                total += self._many(con, steps)
            self.rowcount = total
        return self

    def _many(self, con: Connection, steps: List[Dict[str, Any]]) -> int:
        for i, step in enumerate(steps):
            step["condition"] = {"type": "ok", "step": i - 1} if i else None
        begin = con._level is not None and not con._in_tx
        if begin or con._in_tx:
            steps[0]["condition"] = _IN_TX  # never alone in autocommit if the transaction is gone
        if steps[0]["condition"] is None:
            del steps[0]["condition"]
        request = {"type": "batch", "batch": {"steps": steps}}
        (batch,) = con._send_begun([request]) if begin else con._send([request])
        total = 0
        for i in range(len(steps)):
            result = _step(batch, i)
            try:
                total += int(result.get("affected_row_count", 0))
            except (ValueError, TypeError, AttributeError) as e:
                raise _bad_answer(e) from None
        return total

    def executescript(self, sql_script: str) -> "Cursor":
        """sqlite3's: COMMIT what is open, then the script's statements in
        order (a Hrana sequence), stopping at the first error."""
        con = self._check()
        if not isinstance(sql_script, str):
            raise ValueError("script argument must be unicode.")
        with con._lock:
            self._reset()
            if con._in_tx:
                con._one(hrana.stmt("COMMIT"))
            (entry,) = con._send([{"type": "sequence", "sql": sql_script}])
            e = hrana.error_of(entry)
            if e is not None and e.get("code") != "SQL_NO_STATEMENT":
                raise _error(str(e.get("code") or "SQLITE_ERROR"), str(e.get("message", "")))
        return self

    def fetchone(self) -> Any:
        self._check()
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        self._next += 1
        return self.row_factory(self, row) if self.row_factory else row

    def fetchmany(self, size: Optional[int] = None) -> List[Any]:
        self._check()
        n = self.arraysize if size is None else size
        # sqlite3's: a negative size never counts down to zero, so all
        rows = self._rows[self._next:] if n < 0 else self._rows[self._next:self._next + n]
        self._next += len(rows)
        return [self.row_factory(self, r) for r in rows] if self.row_factory else rows

    def fetchall(self) -> List[Any]:
        self._check()
        rows = self._rows[self._next:]
        self._next = len(self._rows)
        return [self.row_factory(self, r) for r in rows] if self.row_factory else rows

    def close(self) -> None:
        self._closed = True
        self._rows = []

    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def __iter__(self) -> "Cursor":
        return self

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _last(stack: List[Optional[str]], name: str) -> int:
    """Where the newest savepoint of that name is (SQLite's RELEASE and
    ROLLBACK TO take the newest)."""
    return len(stack) - 1 - stack[::-1].index(name)


def _step(batch: Mapping[str, Any], i: int) -> Mapping[str, Any]:
    """Step i's result of a batch's answer, or its error raised (a step
    skipped because the transaction was gone: OperationalError)."""
    try:
        return _step_of(batch, i)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
        raise _bad_answer(e) from None


def _step_of(batch: Mapping[str, Any], i: int) -> Mapping[str, Any]:
    e = hrana.error_of(batch)
    if e is not None:
        raise _error(str(e.get("code") or "SQLITE_ERROR"), str(e.get("message", "")))
    result = hrana.response_of(batch).get("result") or {}
    errors = result.get("step_errors") or []
    results = result.get("step_results") or []
    if not isinstance(errors, list) or not isinstance(results, list):
        raise TypeError("step_results and step_errors are not lists")
    if i < len(errors) and errors[i] is not None:
        err = errors[i]
        raise _error(str(err.get("code") or "SQLITE_ERROR"), str(err.get("message", "")))
    if i >= len(results) or results[i] is None:
        for j in range(i):  # skipped after an earlier step's error: that error
            if j < len(errors) and errors[j] is not None:
                raise _error(str(errors[j].get("code") or "SQLITE_ERROR"), str(errors[j].get("message", "")))
        err = OperationalError("the statement did not run: the transaction was no longer open")
        err.code = "TRANSACTION_TIMEOUT"
        raise err
    if not isinstance(results[i], dict):
        raise TypeError(f"step {i}'s result is {type(results[i]).__name__}")
    return results[i]


__all__ = [
    "apilevel", "threadsafety", "paramstyle", "sqlite_version", "sqlite_version_info", "connect",
    "Connection", "Cursor", "Row", "Warning", "Error", "InterfaceError", "DatabaseError", "DataError",
    "OperationalError", "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError",
    "OutcomeUnknownError", "ConnectionFailedError", "Binary", "Date", "Time", "Timestamp",
    "DateFromTicks", "TimeFromTicks", "TimestampFromTicks", "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID",
    "PARSE_DECLTYPES", "PARSE_COLNAMES",
]
