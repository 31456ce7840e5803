"""Hrana 3 over HTTP, as lithd speaks it (docs/hrana.md): values,
statements and the error codes, in one place for every Python caller
(lith.dbapi, lith.aio, Client.pipeline).

A pipeline is Client.pipeline(requests, baton): one POST /v3/pipeline with
the client's transport (its pool, TLS, token, and its retries of what was
not sent). Each request is a dict of Hrana's ("execute", "batch",
"sequence", "get_autocommit", "close"); each result is
{"type": "ok", "response": {...}} or {"type": "error", "error":
{"message", "code"}}.

Values cross as Hrana's typed objects: integers as decimal strings over
the whole 64-bit range, floats as JSON numbers, blobs as base64.
"""
from __future__ import annotations

import base64
import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

Params = Union[Sequence[Any], Mapping[str, Any], None]

def dumps(body: Any) -> bytes:
    """A pipeline's body as JSON."""
    return json.dumps(body, allow_nan=False).encode()


def encode_value(v: Any) -> Dict[str, Any]:
    """A Python value as Hrana's: None, int (64 bits; bool as 0/1), float,
    str, bytes-like. OverflowError for an int past 64 bits, ValueError for
    an infinite float, TypeError for any other type (what sqlite3 refuses
    too)."""
    if v is None:
        return {"type": "null"}
    if isinstance(v, bool):
        return {"type": "integer", "value": "1" if v else "0"}
    if isinstance(v, int):
        if not INT64_MIN <= v <= INT64_MAX:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return {"type": "integer", "value": str(v)}
    if isinstance(v, float):
        if math.isnan(v):
            return {"type": "null"}  # SQLite stores a NaN as NULL
        if math.isinf(v):
            # JSON has no infinity, and lithd reads no number past a double's range
            raise ValueError("an infinite float cannot be sent to lithd: JSON has no infinity")
        return {"type": "float", "value": v}
    if isinstance(v, str):
        return {"type": "text", "value": v}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"type": "blob", "base64": base64.b64encode(bytes(v)).decode("ascii")}
    raise TypeError(f"type {type(v).__name__!r} is not supported")


def decode_value(v: Mapping[str, Any]) -> Any:
    """Hrana's typed value as Python's. ValueError for one that is not Hrana's."""
    t = v.get("type") if isinstance(v, Mapping) else None
    if t == "null":
        return None
    if t == "integer":
        return int(v["value"])
    if t == "float":
        return float(v["value"])
    if t == "text":
        return v["value"]
    if t == "blob":
        b = v.get("base64", "")
        return base64.b64decode(b + "=" * (-len(b) % 4))
    raise ValueError(f"not a Hrana value: {v!r}")


def stmt(sql: str, params: Params = None, *, want_rows: bool = True) -> Dict[str, Any]:
    """An execute's "stmt": positional params (a sequence: ?, ?NNN) or named
    (a mapping: :k, @k, $k; its keys with or without the prefix)."""
    s: Dict[str, Any] = {"sql": sql, "want_rows": want_rows}
    if params is None:
        return s
    if isinstance(params, Mapping):
        s["named_args"] = [{"name": str(k), "value": encode_value(v)} for k, v in params.items()]
    elif isinstance(params, (str, bytes, bytearray, memoryview)):
        raise TypeError("parameters are a sequence or a mapping, not a string")
    else:
        s["args"] = [encode_value(v) for v in params]
    return s


def rows(result: Mapping[str, Any]) -> List[tuple]:
    """A statement result's rows as tuples of Python values."""
    return [tuple(decode_value(c) for c in r) for r in result.get("rows") or []]


def error_of(entry: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """A pipeline result's error {"message", "code"}, or None when it is ok."""
    if entry.get("type") == "error":
        e = entry.get("error")
        return e if isinstance(e, Mapping) else {"message": "the error has no body", "code": "PROTO_ERROR"}
    return None


def response_of(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """An ok pipeline result's response ({"type": "execute", "result": ...}, ...)."""
    r = entry.get("response")
    if entry.get("type") != "ok" or not isinstance(r, Mapping):
        raise ValueError(f"not a Hrana result: {entry!r}")
    return r
