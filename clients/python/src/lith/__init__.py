"""lith: a client for lithd, the single-writer SQLite server.

    import lith
    db = lith.Client("http://127.0.0.1:8765", rows="objects")
    db.do(["CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v)",
           ("INSERT INTO kv VALUES (?, ?)", ["a", 2**63 - 1])])
    print(db.query("SELECT * FROM kv")[0]["rows"])   # [{'k': 'a', 'v': 9223372036854775807}]

Standard library only (http.client); see Client for the calls and
errors.py for the exceptions.
"""
from .client import Client
from .errors import (AnswerLost, BadRequest, Conflict, ConnectionFailed, ConstraintError, Forbidden,
                     LithError, NotFound, OutcomeUnknown, QueueFull, ServerError, TooLarge, Unauthorized,
                     Unavailable, Unprocessable)

__version__ = "0.1.0"
__all__ = [
    "Client", "LithError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "ConstraintError", "TooLarge", "Unprocessable", "Unavailable", "QueueFull", "ServerError",
    "OutcomeUnknown", "ConnectionFailed", "AnswerLost",
]
