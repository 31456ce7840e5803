/*
 * http/test/wsclient.h — a raw WebSocket client for tests (RFC 6455, libc
 * only): the handshake written by hand, frames masked as a client must,
 * and frames read back one at a time, so a test sees exactly what went
 * over the wire (and can send what no library would: a torn frame, an
 * unmasked one, one too large). Used by http/test/test_websocket.c and
 * lithd's Hrana tests. Blocking sockets with 5 s timeouts; nothing here
 * asserts: every call returns what happened.
 */
#ifndef LITH_HTTP_TEST_WSCLIENT_H
#define LITH_HTTP_TEST_WSCLIENT_H

#include <stddef.h>

enum { WSC_TEXT = 1, WSC_BINARY = 2, WSC_CLOSE = 8, WSC_PING = 9, WSC_PONG = 10 };

/* A TCP connection to 127.0.0.1:port with 5 s send and receive timeouts
 * (rcvbuf: SO_RCVBUF, 0 to leave it), or -1. */
int wsc_tcp(int port, int rcvbuf);

/* Send the handshake for `path` (protocols: the Sec-WebSocket-Protocol
 * offer, NULL none; extra: more header lines, each ending in \r\n, or
 * NULL) and read the answer's head (byte by byte: no frame after it is
 * consumed) into head[0..cap). Returns its status (101: upgraded; the
 * Sec-WebSocket-Accept is checked, a wrong one gives -2), or -1. */
int wsc_handshake(int fd, const char *path, const char *protocols, const char *extra, char *head, size_t cap);

/* The value of header `name` in a head, copied into out, or NULL. */
const char *wsc_header(const char *head, const char *name, char *out, size_t cap);

/* wsc_tcp + wsc_handshake; the fd, or -1 unless the answer was 101. */
int wsc_open(int port, const char *path, const char *protocols, const char *extra);

/* One frame: fin, opcode, payload p[0..n), masked (mask 0: sent unmasked,
 * which a server must refuse). Returns 0, or -1. */
int wsc_send_frame(int fd, int fin, int opcode, const void *p, size_t n, int mask);
int wsc_send_text(int fd, const char *s);

/* The next frame: its opcode in *opcode, the payload's first cap - 1
 * bytes in buf (NUL-terminated), its whole length returned; -1 at end of
 * input or timeout. For a close frame, *code (may be NULL) is its status
 * (0: none). */
long wsc_read_frame(int fd, int *opcode, char *buf, size_t cap, int *code);

/* The next text message (pings and pongs skipped): its length, or -1 at
 * end of input, or -2 for a close frame (*code its status). */
long wsc_read_text(int fd, char *buf, size_t cap, int *code);

#endif
