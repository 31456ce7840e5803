/*
 * h1client — a blocking HTTP/1.1 client's reading half: one response
 * (status line, headers, then a body framed by Content-Length, by chunked
 * transfer coding or by the end of the connection) from a socket or from a
 * caller's byte source.
 *
 * Why one module: the `lith` command line, lithd's end-to-end tests, the
 * benchmarks and the kanban example's HTTP test each read lithd's (or
 * kanban's) answers. Four readers had grown, each checking a different
 * subset of the framing rules. This one holds the union: RFC 9112's order
 * (no body for HEAD, 1xx, 204, 304; then chunked; then Content-Length;
 * then the end of the connection), two different Content-Lengths or an
 * unknown transfer coding refused, limits on the head and on the whole
 * answer, and one-line messages worded for a person ("127.0.0.1:8765
 * closed the connection before the whole answer arrived").
 *
 * libc only (no h2o, no libuv): the lith CLI links it. Nothing here writes
 * requests; callers format their own.
 *
 * Two levels:
 *   - h1c_parse_head: the head at the start of a buffer, no I/O and no
 *     allocation (the benchmarks' epoll clients parse with it);
 *   - h1c_conn + h1c_read: a connection's received bytes and a deadline;
 *     bytes past one answer stay buffered for the next (keep-alive).
 *
 * Threads: no global state; calls on different objects may run in parallel.
 */
#ifndef LITH_H1CLIENT_H
#define LITH_H1CLIENT_H

#include <stddef.h>
#include <sys/types.h> /* ssize_t */
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Result codes ------------------------------------------------------- */
enum {
  H1C_OK = 0,
  H1C_TIMEOUT,  /* the deadline passed; if the request was sent, its outcome on the
                    server is unknown */
  H1C_IO,       /* the connection failed or closed before the whole answer arrived */
  H1C_PROTOCOL, /* the answer is not HTTP/1.x as we understand it, or too large */
  H1C_NOMEM,
  H1C_MORE,     /* h1c_parse_head only: the head's end is not in the buffer yet */
  H1C_TOO_LARGE /* h1c_parse_head only: a Content-Length above H1C_MAX_ANSWER */
};

/* Largest answer accepted (head and body) and largest head, to fail
 * cleanly rather than exhaust memory on a runaway peer. */
#define H1C_MAX_ANSWER ((size_t)1 << 30)
#define H1C_MAX_HEADERS ((size_t)64 * 1024)

/* ---- The head, parsed in place -------------------------------------------- */

/* One header: name and value point into the parsed bytes (not
 * NUL-terminated; the value without surrounding blanks). */
typedef struct h1c_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} h1c_header;

/* How the body after a head is framed. */
enum { H1C_BODY_NONE, H1C_BODY_LENGTH, H1C_BODY_CHUNKED, H1C_BODY_EOF };

typedef struct h1c_head {
  int status;       /* 100..999 */
  size_t head_len;  /* bytes through the empty line */
  size_t n_lines;   /* lines in the head, the status line and the empty one included */
  size_t n_headers; /* header lines */
  int body;         /* H1C_BODY_*: for a 1xx, 204, 304 or HEAD answer NONE */
  size_t length;    /* with H1C_BODY_LENGTH: the Content-Length */
  int closes;       /* "Connection: close" */
} h1c_head;

/* Parse the head at buf[0..len), the answer to a request made with
 * `method` (NULL: not HEAD). H1C_OK with *h filled, and hdrs[0..max_hdrs)
 * pointing into buf (hdrs may be NULL: nothing stored); H1C_MORE when the
 * empty line is not there yet; H1C_TOO_LARGE; or H1C_PROTOCOL with *why
 * saying what is wrong ("no status line"). The body's framing is checked
 * only where a body follows. */
int h1c_parse_head(const char *buf, size_t len, const char *method, h1c_head *h, h1c_header *hdrs,
                   size_t max_hdrs, const char **why);

/* ---- Responses ------------------------------------------------------------ */

/* An answer. Every pointer inside is owned by the response and freed by
 * h1c_response_free (which leaves it empty, so it may be called twice). A
 * zeroed struct is an empty response. */
typedef struct h1c_response {
  int status;          /* 200, 404, ... */
  char *head;          /* the status line and header lines through the empty line, as
                            received, NUL-terminated */
  h1c_header *headers; /* n_headers entries pointing into head */
  size_t n_headers;
  char *body; /* body_len bytes, then a NUL (the body may hold NULs of its
                            own); never NULL after H1C_OK */
  size_t body_len;
} h1c_response;

/* The value of the first header named `name` (case-insensitive), or NULL;
 * *len (when not NULL) receives its length. Points into resp. */
const char *h1c_response_header(const h1c_response *resp, const char *name, size_t *len);

/* Free what *resp holds and zero it. NULL is fine. */
void h1c_response_free(h1c_response *resp);

/* ---- A connection --------------------------------------------------------- */

/* Where a connection gets its bytes instead of a socket: up to n of them
 * into buf, returning how many (> 0), 0 at the end, or -1 with errno set
 * (EINTR is retried, anything else is an error: there is no socket to
 * wait for). */
typedef ssize_t (*h1c_source)(void *ctx, char *buf, size_t n);

/* The reading side of one connection. Set up by h1c_init; the fields are
 * the module's but for `sent`, which a caller sets once its request is out
 * (messages then say that the outcome is unknown). Owns buf (freed by
 * h1c_release); never closes fd. */
typedef struct h1c_conn {
  int fd;         /* -1 with a source */
  h1c_source src; /* if set, bytes come from src(src_ctx, ...), not fd */
  void *src_ctx;
  struct timespec deadline; /* meaningful when has_deadline */
  int has_deadline;
  int timeout_ms;
  int sent;  /* the whole request went out */
  char *buf; /* received bytes; [pos, len) not consumed yet */
  size_t pos, len, cap;
  size_t total; /* bytes received for the answer being read */
  int eof;
  const char *peer; /* names the server in messages; borrowed */
  char *err;        /* messages go here (errsz bytes, may be 0); borrowed */
  size_t errsz;
} h1c_conn;

/* Set up c to read from fd (a connected stream socket, blocking or not:
 * every receive that would wait polls against the deadline). peer: "the
 * server" when NULL. No deadline until h1c_deadline. */
void h1c_init(h1c_conn *c, int fd, const char *peer, char *err, size_t errsz);

/* Set up c to read from src(ctx, ...) instead of a socket, without a
 * deadline: each call is one receive, so the source decides where the
 * bytes are cut (the fuzzer does). */
void h1c_init_source(h1c_conn *c, h1c_source src, void *ctx, const char *peer, char *err, size_t errsz);

/* Start a deadline timeout_ms from now (<= 0: none) for what follows. */
void h1c_deadline(h1c_conn *c, int timeout_ms);

/* Wait until fd is ready for `events` (poll's), within the deadline. `what`
 * words the timeout message: "timed out after 5 s connecting to PEER". */
int h1c_wait(h1c_conn *c, short events, const char *what);

/* Read the answer to a request made with `method` into *resp (which must be
 * empty): interim 1xx answers are skipped, a 101 is an error. H1C_OK with
 * *resp filled — whatever the status — or an error code with a one-line
 * message in c->err and *resp left empty. Bytes after the answer stay in c
 * for the next one. */
int h1c_read(h1c_conn *c, const char *method, h1c_response *resp);

/* After an answer on a connection the server closes: wait for the end of
 * the stream. H1C_OK there; H1C_PROTOCOL if more bytes came first. */
int h1c_read_eof(h1c_conn *c);

/* Bytes received and not yet consumed (the start of a next answer). */
size_t h1c_pending(const h1c_conn *c);

/* Free c's buffer (not fd); c may be set up again. */
void h1c_release(h1c_conn *c);

#ifdef __cplusplus
}
#endif

#endif /* LITH_H1CLIENT_H */
