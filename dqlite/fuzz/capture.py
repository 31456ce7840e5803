#!/usr/bin/env python3
"""Capture a running dqlite node's answers as seeds for fuzz_dq_response.

    python3 dqlite/fuzz/capture.py HOST:PORT OUTDIR

Speaks the wire protocol (version 1) directly, sends a fixed conversation
(LEADER, CLIENT, OPEN, EXEC_SQL, QUERY_SQL with every value type and a
result of several parts, failures (at prepare, at a step, after some
parts), a query stopped by INTERRUPT, PREPARE/EXEC/QUERY/FINALIZE, CLUSTER
in both formats) and writes each answer, header and body, to OUTDIR/NAME:
what the harness reads is a sequence of such messages.
"""
import os
import socket
import struct
import sys


def text(s):
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


def msg(mtype, body):
    assert len(body) % 8 == 0
    return struct.pack("<IBBH", len(body) // 8, mtype, 0, 0) + body


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError("node closed the connection")
        out += chunk
    return out


def answer(sock):
    """One answer; for ROWS, every part until DONE, concatenated."""
    out = b""
    while True:
        head = recv_exact(sock, 8)
        words, mtype = struct.unpack("<IB", head[:5])
        body = recv_exact(sock, words * 8)
        out += head + body
        if mtype != 7 or body[-8:] == b"\xff" * 8:
            return out


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    sock = socket.create_connection((host, int(port)))
    sock.sendall(struct.pack("<Q", 1))
    db = struct.pack("<Q", 0)

    def ask(name, mtype, body):
        sock.sendall(msg(mtype, body))
        data = answer(sock)
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        return data

    ask("leader", 0, struct.pack("<Q", 0))
    ask("welcome", 1, struct.pack("<Q", 1))
    ask("db", 3, text("seed.db") + struct.pack("<Q", 0) + text(""))
    ask("result_create", 8, db + text(
        "CREATE TABLE IF NOT EXISTS t(i INTEGER, f REAL, s TEXT, b BLOB, n, d DATETIME, ok BOOLEAN)"))
    # one parameter of each type: int, float, text, blob, null
    params = bytes([5, 1, 2, 3, 4, 5, 0, 0]) + struct.pack("<q", -42) + struct.pack("<d", 2.5) \
        + text("text value") + struct.pack("<Q", 3) + b"\x00\x01\x02" + b"\0" * 5 + struct.pack("<Q", 0)
    ask("result_insert", 8, db + text("INSERT INTO t(i, f, s, b, n, d, ok) VALUES (?, ?, ?, ?, ?, "
                                       "'2026-12-01 19:00:00', 1)") + params)
    ask("rows_all_types", 9, db + text("SELECT * FROM t"))
    ask("rows_many_parts", 9, db + text(
        "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 300) "
        "SELECT n, printf('%040d', n), x'00ff', NULL, 1.5 FROM k"))
    ask("rows_17_columns", 9, db + text("SELECT " + ", ".join(str(i) for i in range(17))))
    ask("failure_syntax", 8, db + text("SELEC 1"))
    ask("failure_no_table", 9, db + text("SELECT * FROM nowhere"))
    # A failure at a step: libdqlite 1.11.1 puts the part's columns (and
    # rows) before the code and message; mid-result, after some parts.
    ask("failure_step", 9, db + text("SELECT 1 AS n, abs(-9223372036854775807 - 1) AS x"))
    ask("failure_mid_rows", 9, db + text(
        "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 300) "
        "SELECT n, CASE WHEN n = 250 THEN abs(n - 250 - 9223372036854775807 - 1) "
        "ELSE printf('%040d', n) END FROM k"))
    # A stop: QUERY_SQL, then INTERRUPT at once: the node sends the whole
    # result, its DONE, then EMPTY for the INTERRUPT.
    sock.sendall(msg(9, db + text(
        "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 200) "
        "SELECT n, printf('%040d', n) FROM k")) + msg(10, db))
    data = answer(sock)
    data += answer(sock)
    with open(os.path.join(outdir, "rows_then_interrupt"), "wb") as f:
        f.write(data)
    ask("stmt", 4, db + text("SELECT i FROM t WHERE i = ?"))
    ask("rows_prepared", 6, struct.pack("<II", 0, 0) + bytes([1, 1, 0, 0, 0, 0, 0, 0]) + struct.pack("<q", -42))
    ask("empty", 7, struct.pack("<II", 0, 0))
    ask("servers_v0", 16, struct.pack("<Q", 0))
    ask("servers_v1", 16, struct.pack("<Q", 1))
    sock.close()


if __name__ == "__main__":
    main()
