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
    except lith.ConnectionFailed:         # no answer, and nothing committed:
        ...                               # safe to send again

For a retry loop the tree has two branches, neither under the other:
ConnectionFailed (nothing of the request was sent, or it was a read:
sending it again is safe) and OutcomeUnknown (a write that may have
committed, AnswerLost among them: sending it again is safe only with an
idempotency key). So `except lith.ConnectionFailed: retry` can never send
again a write that may have committed.

Every class is a LithError, which carries .status (None when no answer
came), .code (lithd's short name: "constraint", "queue_full",
"bad_request", ...), .message and .statement (index of the failing
statement, or None).
"""
from __future__ import annotations

from typing import Optional


class LithError(Exception):
    """An error lithd answered, or a failure to reach it (ConnectionFailed,
    AnswerLost)."""

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
    """A write that may have committed: whether it did is unknown, and the
    client did not send it again (that could apply it twice). lithd
    answered 504 "outcome_unknown" (lithd --dqlite lost the leader after
    COMMIT was sent; a proxy's 504 gateway timeout is the same), or the
    write was sent and its answer was lost (AnswerLost). Read the database
    to learn which, or send it again with an idempotency key (a request id
    in a UNIQUE column, INSERT ... ON CONFLICT DO NOTHING): docs/clients.md.
    Never a ConnectionFailed."""


class ConnectionFailed(LithError):
    """No answer, and nothing committed: sending the request again is
    safe. Connecting failed (refused, no such socket, a certificate that
    does not verify) or the connection was lost before a byte of the
    request was written, or a read (query, GETs, backup) got no answer or
    a cut one, or timed out (code "timeout", else "connection"); or a
    write's answer was cut short after an error status, which says it did
    not commit (status then says what lithd answered). Refused
    connections, a missing socket and resets before a byte was written
    were retried first, within max_retries and max_retry_wait (a lithd
    restarting); a read lost before its answer began was sent once more.
    A write lost after any byte of it was written is an AnswerLost
    instead, never this class."""


class AnswerLost(OutcomeUnknown):
    """A write (do, command, batch, pipeline, backup_to_server) of which
    some bytes were written, and whose answer never came (the connection
    was lost, or it timed out) or was cut short after a 200 began (it ran,
    its results are lost): it may have committed. An OutcomeUnknown, not a
    ConnectionFailed. .status: lithd's status when an answer began, else
    None."""


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
