"""The lithd client: one Client per lithd, shareable between threads.

Design:
  - http.client only. Kept-alive connections wait in a small pool (at most
    pool_size idle, 8 by default), so a Client can be shared by threads:
    each request takes a connection of its own for its duration (the pool,
    else a new one), and the pool is the one thing the threads share,
    under a lock.
  - Where and the token, when not given: the environment as the lith CLI
    reads it (docs/cli.md): LITHD_UNIX, else LITHD_URL, else
    http://127.0.0.1:8765; LITHD_TOKEN_FILE, else LITHD_TOKEN.
  - TCP (http://host:port; https://host:port to a lithd with --tls-cert or
    behind a TLS proxy, its certificate always verified: against ca_file
    when given, else the system's CAs, which SSL_CERT_FILE overrides) or a
    Unix socket (a path, http+unix://<percent-encoded path>, or
    unix_socket=).
  - Values: JSON as lithd speaks it. Integers are exact both ways (Python
    ints; lithd is exact over 64 bits), bytes go as {"base64": ...} and come
    back as bytes.
  - What is sent again is what cannot apply anything twice, and the
    errors say which side a failure is on: ConnectionFailed (nothing
    committed: safe to send again) and OutcomeUnknown (may have committed;
    AnswerLost) are separate branches (errors.py), so a caller's
    `except ConnectionFailed: retry` never resends a write that ran.
  - Retried within max_retries and max_retry_wait (seconds of waiting in
    all), one budget for both: a 503 (lithd answers it when the request
    was not run or was rolled back: queue full, busy, shutting down),
    waiting its Retry-After; and a request not one byte of which was
    written because lithd was not there (connection refused, no such
    socket, a reset or broken pipe before the first byte: lithd
    restarting), waiting 50 ms doubling to 1 s. 504 (outcome_unknown) and
    every other status are never retried; nor a timeout, nor a
    certificate refused.
  - A lost connection: a kept-alive connection the server closed while it
    was idle is looked for before reuse, and one that fails before the
    first byte is written is dropped for another at once. A read (query,
    GETs) that got no answer at all is sent once more. A write any byte of
    which was written and whose answer was lost, timed out or was cut
    short after a 200 began raises AnswerLost: it may have committed (a
    200 cut short did), and it is never sent again.
  - Answers are read into one buffer (sized by Content-Length when there
    is one), decoded to text and dropped before the JSON is parsed, and
    are bounded by max_answer_bytes (LithError "answer_too_large" past it).
    A body shorter than its Content-Length, or a chunked one without its
    last chunk, is an error, never a shorter answer. backup() streams to a
    temporary file beside the destination, 64 KiB at a time, and renames
    it only when the whole download (by Content-Length, or chunked to its
    end) arrived and was synced.
  - db="NAME": a lithd serving several databases (lithd --db NAME=PATH
    ...); every /v1/ request goes to /v1/db/NAME/... instead. NAME is
    checked against lithd's rule (1 to 64 of A-Z a-z 0-9 _ -), so it can
    never add a piece to the path.
  - Answer format: rows as arrays (lithd's default) or objects, declared
    types: sent as query parameters (?rows=objects&types=true), which every
    lithd route that answers rows takes. Nothing is sent for the defaults,
    so the client also talks to a lithd that predates them.
"""
from __future__ import annotations

import base64
import email.utils
import http.client
import json
import os
import re
import select
import socket
import ssl
import tempfile
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import hrana
from .errors import AnswerLost, ConnectionFailed, LithError, OutcomeUnknown, error_for

Statement = Union[str, Sequence[Any], Dict[str, Any]]

# lithd_http_status (tools/lithd/sqljson.h): the status of an error code,
# for the errors /v1/batch answers inside its 200.
_STATUS_OF_CODE = {
    "bad_request": 400, "sql_error": 400, "misuse": 400,
    "not_a_query": 403, "forbidden": 403, "not_found": 404,
    "constraint": 409, "conflict": 409, "too_large": 413,
    "result_too_large": 422, "unencodable": 422, "timeout": 422,
    "busy": 503, "queue_full": 503, "closed": 503, "interrupted": 503, "aborted": 503,
    "outcome_unknown": 504, "disk_full": 507,
}


# lithd's database names (tools/lithd/options.h, LITHD_DB_NAME_MAX).
_DB_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Idle kept-alive connections a Client holds by default (pool_size); more
# threads at once open more, closed when they are done.
_POOL_SIZE = 8

# The default retry bounds. 12 retries of 50 ms doubling to 1 s wait about
# 8.5 s for a lithd that is not listening: lithd.service restarts a lithd
# that died after RestartSec=2, and lithd listens within about a second of
# starting (longer for a large WAL to recover), so a restart is ridden
# out with room; 30 s is the most a 503's Retry-After waits in all.
_MAX_RETRIES = 12
_MAX_RETRY_WAIT = 30.0

# What a lithd that is not there (stopped, restarting) gives a connect, or
# the first send on a connection it reset: nothing of the request went out.
_NOT_THERE = (ConnectionRefusedError, FileNotFoundError, ConnectionResetError, BrokenPipeError,
              ConnectionAbortedError)

# lithd_token_read (tools/lithd/util/token.h): the CLI's bound on a token file.
_TOKEN_MAX = 4096

# The default bound on one answer (max_answer_bytes): lithd's own default
# limit on a result's row data is 64 MiB.
_MAX_ANSWER = 256 << 20

# What a download is read and written by.
_PIECE = 1 << 16


class _Tracked:
    """A connection that knows whether any byte of the request went out
    (.wrote, cleared before each request): the first write of a request is
    one send(), which either raises with nothing written or writes some."""

    wrote = False

    def send(self, data: Any) -> None:
        if self.sock is None:
            self.connect()  # what http.client's send() does (auto_open)
        if not self.wrote and isinstance(data, (bytes, bytearray)) and data:
            view = memoryview(data)
            n = self.sock.send(view)
            self.wrote = True
            if n == len(view):
                return
            data = view[n:]
        self.wrote = True
        super().send(data)


class _HTTPConnection(_Tracked, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Tracked, http.client.HTTPSConnection):
    pass


class _UnixConnection(_Tracked, http.client.HTTPConnection):
    """HTTP over a Unix socket: http.client with another connect()."""

    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


def _dropped(sock: Any) -> bool:
    """An idle kept-alive connection the server closed (or wrote to
    unasked): readable before any request was sent on it."""
    try:
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(sock, select.POLLIN)
            return bool(p.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _fsync_dir(path: str) -> None:
    """Make a rename in directory `path` durable, where the system can."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Cut(Exception):
    """The answer ended before its framing said it would."""


class _Unsent(Exception):
    """Not one byte of the request was written and lithd was not there:
    _request sends it again within the retry bounds, else raises .error."""

    def __init__(self, error: LithError):
        super().__init__(error)
        self.error = error


def _env(name: str) -> Optional[str]:
    """An environment variable, None when unset or empty (as the CLI)."""
    v = os.environ.get(name)
    return v if v else None


def _env_token() -> Optional[str]:
    """The token the lith CLI would send: the file LITHD_TOKEN_FILE names
    (its trailing CR/LF dropped), else LITHD_TOKEN; None without either."""
    path = _env("LITHD_TOKEN_FILE")
    if path is None:
        token = _env("LITHD_TOKEN")
        if token is not None and ("\r" in token or "\n" in token):
            raise ValueError("LITHD_TOKEN holds a line break")
        return token
    with open(path, "rb") as f:
        data = f.read(_TOKEN_MAX + 1)
    if len(data) > _TOKEN_MAX:
        raise ValueError(f"LITHD_TOKEN_FILE {path}: larger than {_TOKEN_MAX} bytes")
    data = data.rstrip(b"\r\n")
    if not data or b"\r" in data or b"\n" in data or b"\0" in data:
        raise ValueError(f"LITHD_TOKEN_FILE {path}: empty, or holds a line break")
    return data.decode("utf-8")


class _Local(Exception):
    """Writing the download failed here (a full disk): its OSError is
    raised as it is, not as a failure of the connection."""

    def __init__(self, error: OSError):
        super().__init__(error)
        self.error = error


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After in seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _encode_value(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(v)).decode("ascii")}
    return v


def _statement(s: Statement) -> Dict[str, Any]:
    """"SQL", ("SQL", params) or {"sql": ..., "params": ...} as lithd's statement."""
    if isinstance(s, str):
        return {"sql": s}
    if isinstance(s, dict):
        out = dict(s)
    elif isinstance(s, (list, tuple)) and len(s) == 2 and isinstance(s[0], str):
        out = {"sql": s[0], "params": s[1]}
    else:
        raise TypeError(f"a statement is 'SQL', ('SQL', params) or {{'sql': ..., 'params': ...}}, not {s!r}")
    params = out.get("params")
    if isinstance(params, dict):
        out["params"] = {k: _encode_value(v) for k, v in params.items()}
    elif params is not None:
        out["params"] = [_encode_value(v) for v in params]
    return out


def _statements(statements: Union[Statement, Iterable[Statement]]) -> List[Dict[str, Any]]:
    # One statement ("SQL", a dict, a ("SQL", params) tuple) or a list of them.
    if isinstance(statements, (str, dict)) or (isinstance(statements, tuple) and len(statements) == 2 and
                                               isinstance(statements[0], str) and
                                               not isinstance(statements[1], str)):
        statements = [statements]
    return [_statement(s) for s in statements]


def _decode_cell(v: Any) -> Any:
    # A cell that is an object is a blob: lithd writes no other object as a value.
    if isinstance(v, dict) and len(v) == 1 and "base64" in v:
        return base64.b64decode(v["base64"])
    return v


def _decode_results(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    for r in results:
        rows = r.get("rows") or []
        for i, row in enumerate(rows):
            if isinstance(row, dict):
                rows[i] = {k: _decode_cell(v) for k, v in row.items()}
            else:
                rows[i] = [_decode_cell(v) for v in row]
    return results


def _field(answer: Any, key: str) -> Any:
    """answer[key] of a JSON object lithd answered, or a LithError."""
    if not isinstance(answer, dict) or key not in answer:
        raise LithError(f"the answer has no {key!r}: not lithd's, or from a lithd too old or too new",
                        code="bad_answer", status=200)
    return answer[key]


class Client:
    """A lithd at `url`: "http://host:port", "https://...", a Unix socket
    path ("/run/lithd.sock"), "http+unix://%2Frun%2Flithd.sock", or
    unix_socket="/run/lithd.sock". Without url and unix_socket: the lith
    CLI's environment, LITHD_UNIX (a socket path), else LITHD_URL, else
    http://127.0.0.1:8765.

    token: the bearer token (lithd --token-file); None: the CLI's
    environment, the file LITHD_TOKEN_FILE names, else LITHD_TOKEN, else
    none. ca_file: for https://, a
    PEM file of the CA certificates to trust instead of the system's (a
    self-signed lithd's); without it the system's, or the file named by
    SSL_CERT_FILE. timeout: seconds for
    connecting and for each read. max_retries, max_retry_wait: how often
    and how long in all (seconds of waiting) a request is sent again when
    that cannot apply it twice: a 503 (after its Retry-After), and a
    request not one byte of which was written because lithd was not there
    (connection refused, no such socket, reset before the first byte;
    50 ms doubling to 1 s). The defaults, 12 and 30 s, wait about 8.5 s
    for a lithd that is not listening, which rides out a restart
    (lithd.service restarts a lithd that died after 2 s, and it listens
    within about a second); 0 retries turns retrying off.
    on_retry(attempt, wait_seconds, error): called before each wait, error
    the Unavailable or ConnectionFailed that is retried (docs/clients.md:
    what is sent again and why). pool_size: how many idle kept-alive
    connections the client keeps (8; 0: a new connection per request).
    max_answer_bytes:
    the largest answer read (256 MiB; None: no bound); past it a LithError
    with code "answer_too_large" (its status is lithd's: 200 means a write
    committed). Downloads (backup) are not bounded: they stream to disk.
    rows ("arrays" or "objects") and types (declared column types in
    "types") are the defaults of every call; each call may override them.
    db: the database NAME of a lithd serving several (lithd --db
    NAME=PATH ...): every call but health() goes to /v1/db/NAME/...;
    None, lithd's only or default database. ValueError unless NAME is 1
    to 64 of A-Z a-z 0-9 _ -.

    Calls that run statements return lithd's "results": one dict per
    statement with "changes", "last_insert_rowid", "columns", "rows" (and
    "types" when asked). A statement is "SQL", ("SQL", params) with params
    a list (positional) or a dict (named, ":k"), or lithd's own dict.
    Failures raise LithError subclasses (errors.py): OutcomeUnknown when
    a write may have committed (504, or AnswerLost), ConnectionFailed when
    nothing committed and the request can be sent again; neither is a
    subclass of the other.

    Threads: one Client may be shared by any number of threads. Each call
    takes a connection of its own for its duration (an idle one from the
    pool, else a new one), so N calls at once use N connections, and at
    most pool_size stay open between calls. Set the attributes (timeout,
    max_retries, ...) before sharing it. After os.fork(), make a new
    Client in the child: the pool's sockets are the parent's.
    """

    def __init__(self, url: Optional[str] = None, *, token: Optional[str] = None,
                 unix_socket: Optional[str] = None, timeout: Optional[float] = 30.0,
                 max_retries: int = _MAX_RETRIES, max_retry_wait: float = _MAX_RETRY_WAIT,
                 on_retry: Optional[Callable[[int, float, LithError], None]] = None,
                 rows: str = "arrays", types: bool = False, db: Optional[str] = None,
                 max_answer_bytes: Optional[int] = _MAX_ANSWER, ca_file: Optional[str] = None,
                 pool_size: int = _POOL_SIZE):
        if rows not in ("arrays", "objects"):
            raise ValueError('rows must be "arrays" or "objects"')
        if db is not None and (not isinstance(db, str) or not _DB_NAME.fullmatch(db)):
            raise ValueError(f"db: {db!r} is not a database name (1 to 64 of A-Z a-z 0-9 _ -)")
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 0:
            raise ValueError(f"pool_size: {pool_size!r} is not a count of connections (0 or more)")
        self.db = db
        self.token = _env_token() if token is None else token
        self.pool_size = pool_size
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.on_retry = on_retry
        self.max_answer_bytes = max_answer_bytes
        self.rows = rows
        self.types = types
        self._prefix = ""
        self._unix = unix_socket
        self._tls = False
        self._host, self._port = "127.0.0.1", 8765
        if url is None and unix_socket is None:
            self._unix = _env("LITHD_UNIX")  # the socket first, as the CLI
            if self._unix is None:
                url = _env("LITHD_URL") or "http://127.0.0.1:8765"
        if url is not None:
            self._parse_url(url)
        if ca_file is not None and not self._tls:
            raise ValueError("ca_file is for an https:// URL")
        # One context for every connection (loading CAs is not free); the
        # default one verifies the certificate and the host name, TLS 1.2+.
        self._ssl = ssl.create_default_context(cafile=ca_file) if self._tls else None
        self._lock = threading.Lock()
        self._idle: List[http.client.HTTPConnection] = []  # kept-alive connections, free

    def _parse_url(self, url: str) -> None:
        if url.startswith("/"):
            self._unix = url
            return
        u = urllib.parse.urlsplit(url)
        if u.scheme == "http+unix":
            self._unix = urllib.parse.unquote(u.netloc)
        elif u.scheme in ("http", "https"):
            self._tls = u.scheme == "https"
            self._host = u.hostname or "127.0.0.1"
            self._port = u.port or (443 if self._tls else 80)
        else:
            raise ValueError(f"not a lithd address: {url!r} (http://host:port, a socket path, http+unix://...)")
        self._prefix = u.path.rstrip("/")

    # ---- Calls ---------------------------------------------------------------

    def do(self, statements: Union[Statement, Iterable[Statement]], *, rows: Optional[str] = None,
           types: Optional[bool] = None) -> List[Dict[str, Any]]:
        """POST /v1/do: the statements as one command (all or nothing), on the writer."""
        body = {"statements": _statements(statements)}
        return _decode_results(_field(self._call("POST", "/v1/do", body, rows, types), "results"))

    def query(self, statements: Union[Statement, Iterable[Statement]], *, rows: Optional[str] = None,
              types: Optional[bool] = None) -> List[Dict[str, Any]]:
        """POST /v1/query: read-only statements on one snapshot, on the read pool."""
        body = {"statements": _statements(statements)}
        return _decode_results(_field(self._call("POST", "/v1/query", body, rows, types, read=True), "results"))

    def command(self, name: str, params: Optional[Dict[str, Any]] = None, *, rows: Optional[str] = None,
                types: Optional[bool] = None) -> List[Dict[str, Any]]:
        """POST /v1/commands/NAME: a named command (lithd --commands) with its parameters."""
        body = {"params": {k: _encode_value(v) for k, v in (params or {}).items()}}
        path = "/v1/commands/" + urllib.parse.quote(name, safe="")
        return _decode_results(_field(self._call("POST", path, body, rows, types), "results"))

    def batch(self, commands: Iterable[Iterable[Statement]], *, rows: Optional[str] = None,
              types: Optional[bool] = None) -> List[Union[List[Dict[str, Any]], LithError]]:
        """POST /v1/batch: several commands, each its own savepoint and outcome.

        Returns one entry per command, in order: its results, or the
        LithError it failed with (not raised: the others stand). Commands
        refused with a 503 code (the queue was full) are sent again, alone,
        within the same retry bounds as any 503; nothing of them ran. One
        whose outcome is unknown (outcome_unknown) is an OutcomeUnknown,
        never sent again."""
        cmds = [{"statements": _statements(c)} for c in commands]
        out: List[Any] = [None] * len(cmds)
        pending = list(range(len(cmds)))
        attempt, waited = 0, 0.0
        while True:
            answer = self._call("POST", "/v1/batch", {"commands": [cmds[i] for i in pending]}, rows, types)
            again = []
            for i, entry in zip(pending, _field(answer, "results")):
                if "error" in entry:
                    e = entry["error"]
                    code = e.get("code", "error")
                    out[i] = error_for(_STATUS_OF_CODE.get(code, 500), code, e.get("message", ""),
                                       e.get("statement"))
                    if out[i].status == 503:
                        again.append(i)
                else:
                    out[i] = _decode_results(entry["results"])
            wait = min(0.05 * 2 ** attempt, 1.0)
            if not again or attempt >= self.max_retries or waited + wait > self.max_retry_wait:
                return out
            if self.on_retry:
                self.on_retry(attempt + 1, wait, out[again[0]])
            time.sleep(wait)
            waited += wait
            attempt += 1
            pending = again

    def pipeline(self, requests: Sequence[Dict[str, Any]], baton: Optional[str] = None) -> Tuple[Optional[str], List[Dict[str, Any]]]:
        """POST /v3/pipeline (Hrana 3, docs/hrana.md): the requests, in order,
        on the stream `baton` names (None: a new stream). Returns the
        stream's next baton (None once a "close" ended it) and one result
        per request, {"type": "ok", "response": ...} or {"type": "error",
        "error": {"message", "code"}}, as lithd answered them (hrana.py
        reads them). A refusal of the whole pipeline (a bad or expired
        baton, the token, no stream free) raises, as every call does, a
        LithError whose code is Hrana's ("STREAM_EXPIRED", ...); the
        transport's retries are every call's. With db=NAME the stream is
        that database's (/v1/db/NAME/v3/pipeline)."""
        path = "/v3/pipeline" if self.db is None else "/v1/db/" + self.db + "/v3/pipeline"
        answer = self._call("POST", path, hrana.dumps({"baton": baton, "requests": list(requests)}))
        results = _field(answer, "results")
        if not isinstance(results, list) or len(results) != len(requests) or \
                not all(isinstance(r, dict) for r in results):
            raise LithError(f"{self._where()}: the pipeline's answer has {len(results) if isinstance(results, list) else 'no'} "
                            f"results for {len(requests)} requests (lithd answered 200: the requests ran)",
                            code="bad_answer", status=200)
        next_baton = answer.get("baton")
        return (next_baton if isinstance(next_baton, str) else None), results

    def stats(self) -> Dict[str, Any]:
        """GET /v1/stats: lithd's counters (commands, batches, queue depth, latencies, ...)."""
        return self._call("GET", "/v1/stats")

    def health(self) -> Dict[str, Any]:
        """GET /healthz: {"ok": True} while lithd serves."""
        return self._call("GET", "/healthz")

    def commands(self) -> List[Dict[str, Any]]:
        """GET /v1/commands: the named commands with their descriptions and parameters."""
        return _field(self._call("GET", "/v1/commands"), "commands")

    def backup(self, path: str, *, format: str = "sqlite") -> int:
        """GET /v1/backup: download a consistent snapshot of the live database
        into the local file `path` (format "sqlite": a database file;
        "sql": a .dump-style SQL text). Streamed, 64 KiB at a time, into a
        new file beside `path` (PATH.XXXXXXXX.part, mode 0600), synced, and
        renamed onto `path` only once the whole download arrived (as many
        bytes as its Content-Length, or a chunked body to its last chunk);
        a download cut short raises ConnectionFailed and leaves `path` as
        it was. Returns the bytes written. A lithd without the download
        answers 405 (LithError); backup_to_server() works there."""
        query = "" if format == "sqlite" else "?format=" + urllib.parse.quote(format)
        where = os.path.dirname(os.path.abspath(path))
        fd, part = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".part", dir=where)
        try:
            with os.fdopen(fd, "wb") as f:
                size = self._request("GET", "/v1/backup" + query, None, sink=f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(part, path)
        except BaseException:
            try:
                os.unlink(part)
            except OSError:
                pass
            raise
        _fsync_dir(where)
        return size

    def backup_to_server(self, name: str) -> Dict[str, Any]:
        """POST /v1/backup {"dest": name}: lithd writes the new file `name`
        into its own --backup-dir. Returns lithd's answer (path, bytes, ms)."""
        return self._call("POST", "/v1/backup", {"dest": name})

    def close(self) -> None:
        """Close the idle connections (a later call opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- Transport -----------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, rows: Optional[str] = None,
              types: Optional[bool] = None, read: bool = False) -> Any:
        rows = self.rows if rows is None else rows
        types = self.types if types is None else types
        params = []
        if rows != "arrays":
            params.append("rows=" + urllib.parse.quote(rows))
        if types:
            params.append("types=true")
        if params:
            path += "?" + "&".join(params)
        # bytes: a body its caller encoded (hrana.dumps: a float's infinity)
        data = body if isinstance(body, bytes) or body is None else json.dumps(body, allow_nan=False).encode()
        # The answer's one buffer becomes text and is dropped before the
        # JSON is parsed: never the bytes, the text and the values at once.
        answer = self._request(method, path, data, read=read or method == "GET")
        try:
            text = answer.decode("utf-8")
            del answer
            return json.loads(text)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError, JSONDecodeError, nested too deep
            what = "" if read or method == "GET" else " (lithd answered 200: the request ran)"
            raise LithError(f"{self._where()}: the answer to {method} {path} is not JSON{what}: {e}",
                            code="bad_answer", status=200) from None

    def _new_connection(self) -> http.client.HTTPConnection:
        if self._unix is not None:
            return _UnixConnection(self._unix, self.timeout)
        if self._tls:
            return _HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._ssl)
        return _HTTPConnection(self._host, self._port, timeout=self.timeout)

    def _take(self, fresh: bool = False) -> Tuple[http.client.HTTPConnection, bool]:
        """A kept-alive connection that is still open (unless fresh), else a
        new one; and whether it was reused."""
        while not fresh:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new_connection(), False
            if conn.sock is not None and not _dropped(conn.sock):
                return conn, True
            conn.close()  # closed by the server while idle: never sent on
        return self._new_connection(), False

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if conn.sock is not None and len(self._idle) < self.pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def _send_once(self, method: str, target: str, data: Optional[bytes], sink: Any, read: bool):
        """One exchange: (status, Retry-After, body) where body is the answer
        (a bytearray), or for a 200 to a download the bytes written to sink.

        Sent again only when that cannot apply it twice: when not one byte of
        it was written on a kept-alive connection (found closed), or, once,
        for a read that got no answer at all. Not one byte written because
        lithd was not there raises _Unsent, which _request retries."""
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = "Bearer " + self.token
        resent = False
        while True:
            conn, reused = self._take(fresh=resent)
            conn.wrote = False
            try:
                try:
                    conn.request(method, target, body=data, headers=headers)
                except (BrokenPipeError, ConnectionResetError):
                    # lithd may have refused before the whole body arrived (a 413
                    # past --max-body) and closed: its answer, when it can still
                    # be read, says nothing ran; else the write may have
                    resp = self._early_answer(conn)
                    if resp is None:
                        raise
                else:
                    resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                timeout = isinstance(e, socket.timeout)
                if not conn.wrote:
                    if reused and not timeout:
                        continue  # the kept-alive connection was closed: nothing went out
                    err = self._no_answer(e, ConnectionFailed)
                    if isinstance(e, _NOT_THERE):
                        err.__cause__ = e
                        raise _Unsent(err) from e
                    raise err from e
                if read and not resent and not timeout:
                    resent = True  # a read: nothing to apply twice
                    continue
                raise self._no_answer(e, ConnectionFailed if read else AnswerLost) from e
            try:
                if sink is not None and resp.status == 200:
                    body: Any = self._download(resp, sink)
                else:
                    body = self._answer(resp)
            except LithError:
                resp.close()
                conn.close()
                raise
            except _Local as e:
                resp.close()
                conn.close()
                raise e.error
            except (_Cut, OSError, http.client.HTTPException) as e:
                resp.close()
                conn.close()
                raise self._cut(method, target, resp.status, read, e) from e
            resp.close()  # read to its end (even when that is 0 bytes): done with
            if resp.will_close:
                conn.close()
            self._release(conn)
            return resp.status, resp.getheader("Retry-After"), body

    def _early_answer(self, conn: http.client.HTTPConnection) -> Optional[http.client.HTTPResponse]:
        """The refusal lithd sent before it had read the whole request, if it
        is there to read; None otherwise (and for anything but a refusal)."""
        if not conn.wrote or conn.sock is None:
            return None
        try:
            conn.sock.settimeout(min(self.timeout or 2.0, 2.0))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            return None
        if 400 <= resp.status < 500 or resp.status == 503:
            return resp
        resp.close()
        return None

    def _answer(self, resp: http.client.HTTPResponse) -> bytearray:
        """The whole body, in one buffer, at most max_answer_bytes."""
        limit = self.max_answer_bytes
        length = resp.length  # None: chunked, or to the end of the connection
        if limit is not None and length is not None and length > limit:
            raise self._too_large(resp.status, f"{length} bytes")
        if length is not None:
            buf = bytearray(length)
            view, got = memoryview(buf), 0
            while got < length:
                n = resp.readinto(view[got:])
                if not n:
                    raise _Cut(f"after {got} of {length} bytes")
                got += n
            return buf
        buf, piece = bytearray(), bytearray(_PIECE)
        while True:
            n = resp.readinto(piece)  # chunked: IncompleteRead without the last chunk
            if not n:
                return buf
            if limit is not None and len(buf) + n > limit:
                raise self._too_large(resp.status, f"more than {limit} bytes")
            buf += memoryview(piece)[:n]

    def _download(self, resp: http.client.HTTPResponse, sink: Any) -> int:
        """A 200's body to sink, 64 KiB at a time; its length. Only a body
        whose end can be told from a cut (Content-Length, chunked) is taken."""
        length = resp.length
        if length is None and not resp.chunked:
            raise LithError(f"{self._where()}: the download has neither a Content-Length nor chunks: "
                            "a cut could not be told from its end", code="bad_answer", status=resp.status)
        piece = bytearray(_PIECE)
        view, got = memoryview(piece), 0
        while True:
            n = resp.readinto(piece)  # chunked: IncompleteRead without the last chunk
            if not n:
                break
            try:
                sink.write(view[:n])
            except OSError as e:
                raise _Local(e) from None
            got += n
        if length is not None and got != length:
            raise _Cut(f"after {got} of {length} bytes")
        return got

    def _too_large(self, status: int, size: str) -> LithError:
        ran = " (lithd answered 200: the request ran)" if status == 200 else ""
        return LithError(f"{self._where()}: an answer of {size} is over max_answer_bytes "
                         f"({self.max_answer_bytes}){ran}", code="answer_too_large", status=status)

    def _cut(self, method: str, target: str, status: int, read: bool, e: BaseException) -> LithError:
        """An answer that began and was cut short: for a write whose status
        says it ran (2xx) or may have (504), an AnswerLost; else (a read,
        or an error status: nothing committed) a ConnectionFailed."""
        timeout = isinstance(e, socket.timeout)
        why = f"timed out after {self.timeout} s" if timeout else f"cut short {e}" if isinstance(e, _Cut) else \
            f"cut short ({type(e).__name__}: {e})" if str(e) else f"cut short ({type(e).__name__})"
        ran = not read and method != "GET" and (status < 400 or status == 504)
        cls = AnswerLost if ran else ConnectionFailed
        if ran:
            why += " (lithd answered 200: the request ran)" if status == 200 else \
                " (whether it committed is unknown)"
        return cls(f"{self._where()}: the answer (HTTP {status}) to {method} {target} {why}",
                   code="timeout" if timeout else "connection", status=status)

    def _no_answer(self, e: BaseException, cls: type) -> LithError:
        timeout = isinstance(e, socket.timeout)
        why = f"timed out after {self.timeout} s" if timeout else str(e) or type(e).__name__
        if cls is AnswerLost:
            why += " (the request was sent: whether it committed is unknown)"
        return cls(f"{self._where()}: {why}", code="timeout" if timeout else "connection")

    def _request(self, method: str, path: str, data: Optional[bytes], sink: Any = None,
                 read: Optional[bool] = None) -> Any:
        if read is None:
            read = method == "GET"
        if self.db is not None and path.startswith("/v1/") and not path.startswith("/v1/db/"):
            path = "/v1/db/" + self.db + path[3:]  # /healthz is lithd's, not a database's
        target = self._prefix + path
        attempt, waited = 0, 0.0
        while True:
            try:
                status, retry_after, body = self._send_once(method, target, data, sink, read)
            except _Unsent as u:  # lithd was not there: nothing of it went out
                err, wait = u.error, None
            else:
                if status < 400:
                    return body
                err = self._error(status, body, _retry_after(retry_after))
                del body
                # outcome_unknown is never retried, whatever status came with it
                if status != 503 or isinstance(err, OutcomeUnknown):
                    raise err
                wait = err.retry_after
            if wait is None:
                wait = min(0.05 * 2 ** attempt, 1.0)
            if attempt >= self.max_retries or waited + wait > self.max_retry_wait:
                if attempt:
                    err.message += f" (sent {attempt + 1} times over {waited:.2f} s)"
                raise err
            if self.on_retry:
                self.on_retry(attempt + 1, wait, err)
            time.sleep(wait)
            waited += wait
            attempt += 1

    def _error(self, status: int, payload: bytes, retry_after: Optional[float]) -> LithError:
        try:
            body = json.loads(payload)
            # lithd's /v1 {"error": {...}}, or Hrana's own {"message", "code"}
            e = body["error"] if "error" in body else body if "code" in body and "message" in body else body["error"]
            code, message, statement = e.get("code", "error"), e.get("message", ""), e.get("statement")
        except (ValueError, KeyError, TypeError, AttributeError):
            code, message, statement = "http_%d" % status, payload.decode("utf-8", "replace")[:200], None
        return error_for(status, code, message, statement, retry_after)

    def _where(self) -> str:
        if self._unix is not None:
            return "lithd at " + self._unix
        return f"lithd at {self._host}:{self._port}"
