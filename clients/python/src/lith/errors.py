"""What lithd answers when something fails, as exceptions.

lithd's every error body is {"error": {"code", "message", "statement"}}
(docs/lithd.md); the HTTP status says what kind of failure it is. Each
status has its class, so callers catch what they can handle:

    try:
        db.do([("INSERT INTO kv VALUES (?, ?)", ["a", 1])])
    except lith.ConstraintError as e:      # 409, e.code == "constraint"
        ...
    except lith.Unavailable:              # 503 after the client's retries
        ...
    except lith.OutcomeUnknown:           # 504, or a write whose answer was lost
        ...                               # read the database: did it commit?

Every class is a LithError, which carries .status (None when no answer
came), .code (lithd's short name: "constraint", "queue_full",
"bad_request", ...), .message and .statement (index of the failing
statement, or None).
"""
from __future__ import annotations

from typing import Optional


class LithError(Exception):
    """An error lithd answered, or a failure to reach it (ConnectionFailed)."""

    def __init__(self, message: str, *, code: str = "error", status: Optional[int] = None,
                 statement: Optional[int] = None, retry_after: Optional[float] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.statement = statement
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" (statement {self.statement})" if self.statement is not None else ""
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, status={self.status!r})"


class BadRequest(LithError):
    """400: the request or its SQL is wrong (bad_request, sql_error, misuse)."""


class Unauthorized(LithError):
    """401: no bearer token, or the wrong one."""


class Forbidden(LithError):
    """403: refused by configuration (a write on /v1/query: not_a_query;
    raw SQL under --only-named, ATTACH, PRAGMA assignments: forbidden; a
    backup with no --backup-dir; a web page's Origin)."""


class NotFound(LithError):
    """404: no such named command, or no such route."""


class Conflict(LithError):
    """409: the request conflicts with the database's state."""


class ConstraintError(Conflict):
    """409 with code "constraint": UNIQUE, NOT NULL, CHECK, FOREIGN KEY."""


class TooLarge(LithError):
    """413: the request is over one of lithd's limits."""


class Unprocessable(LithError):
    """422: a valid request that cannot be answered within the limits
    (result_too_large, unencodable, timeout): the same again fails again."""


class Unavailable(LithError):
    """503: try later (queue_full, busy, closed, ...). Raised once the
    client's retries (max_retries, max_retry_wait) are spent; nothing of
    the request was committed. .retry_after: lithd's Retry-After, seconds."""


class QueueFull(Unavailable):
    """503 with code "queue_full": the write queue stayed full."""


class ServerError(LithError):
    """5xx other than 503 and 504: lithd's own failure (500), disk full (507)."""


class OutcomeUnknown(LithError):
    """Whether the request committed is unknown, and it was not retried
    (a retry could apply it twice): lithd answered 504 "outcome_unknown"
    (lithd --dqlite lost the leader after COMMIT was sent; a proxy's 504
    gateway timeout is the same), or a write was sent and its answer
    never came (AnswerLost). Read the database to learn which."""


class ConnectionFailed(LithError):
    """No answer: connecting, sending or reading failed, or timed out
    (code "timeout", else "connection"); or the answer was cut short or
    is not lithd's (status then says what lithd answered). A read lost
    before its answer began was sent once more first. A write lost after
    it was sent is an AnswerLost."""


class AnswerLost(ConnectionFailed, OutcomeUnknown):
    """A write (do, command, batch, backup_to_server) was sent and the
    connection was lost, or timed out, before lithd's answer began: it
    may have committed. Both a ConnectionFailed and an OutcomeUnknown."""


_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: Unprocessable,
    503: Unavailable,
    504: OutcomeUnknown,
}
_BY_CODE = {"constraint": ConstraintError, "queue_full": QueueFull, "outcome_unknown": OutcomeUnknown}


def error_for(status: int, code: str, message: str, statement: Optional[int] = None,
              retry_after: Optional[float] = None) -> LithError:
    """The exception for an answer: by code where a class names it, else by status."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else LithError
    return cls(message, code=code, status=status, statement=statement, retry_after=retry_after)
