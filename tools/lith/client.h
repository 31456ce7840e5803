/*
 * lith client — a small blocking HTTP/1.1 client for the `lith` command line.
 *
 * Why its own: the CLI sends one request to lithd and exits, over TCP or a
 * Unix socket, and must say precisely what went wrong (refused, timed out,
 * cut off, not HTTP). A library such as libcurl would be one more run-time
 * dependency for a few hundred lines of code, and lithd's HTTP layer (h2o)
 * is a server.
 *
 * What it does: one request per connection (it sends "Connection: close";
 * no keep-alive, no redirects, no proxies), over http or https (OpenSSL,
 * the server's certificate always verified). The whole exchange —
 * name resolution aside (getaddrinfo blocks on its own) — connecting,
 * sending and reading the answer, is bounded by one deadline, waited for
 * with poll() on a non-blocking socket. The answer's body is read by
 * Content-Length, by chunked transfer coding, or to the end of the
 * connection, and handed back whole.
 *
 * Errors are returned as a code and a one-line message in the caller's
 * buffer, worded for a person ("cannot connect to 127.0.0.1:8765:
 * Connection refused"). An HTTP error status (4xx, 5xx) is not an error
 * here: it is an answer, for the caller to read.
 *
 * Threads: no global state; calls on different objects may run in parallel.
 */
#ifndef LITH_CLIENT_H
#define LITH_CLIENT_H

#include <stddef.h>
#include <sys/types.h> /* ssize_t */

#include "h1client.h" /* the answer and how it is read */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Result codes ------------------------------------------------------- */
enum {
  LITHC_OK = 0,
  LITHC_BAD_ARG,  /* the caller's input: a malformed URL, a socket path too
                     long, a token with a line break */
  LITHC_CONNECT,  /* could not connect (resolution, refused, no such socket):
                     nothing was sent */
  LITHC_TIMEOUT,  /* the deadline passed; if the request was sent, its outcome
                     on the server is unknown */
  LITHC_IO,       /* the connection failed or closed before the whole answer
                     arrived; the outcome is unknown too */
  LITHC_PROTOCOL, /* the peer's answer is not HTTP/1.x as we understand it,
                     or is larger than LITHC_MAX_ANSWER */
  LITHC_NOMEM
};

/* Largest answer accepted (headers and body), to fail cleanly rather than
 * exhaust memory on a runaway peer: h1client's. lithd's own limits keep its
 * answers far below (64 MiB of row data by default). */
#define LITHC_MAX_ANSWER H1C_MAX_ANSWER
#define LITHC_MAX_HEADERS H1C_MAX_HEADERS

/* A place to send requests to. Plain storage, filled by the functions below
 * or by hand; nothing inside is heap-allocated, nothing to free. */
typedef struct lithc_endpoint {
  int is_unix;    /* 1: connect to unix_path; 0: host and port */
  int tls;        /* 1: https (TCP only) */
  char host[256]; /* a name or an address; an IPv6 address without [] */
  int port;
  char base_path[256]; /* prefix of every request path, "" or "/x" (no
                          trailing '/'): a URL "http://h:1/x/" gives "/x" */
  char unix_path[108]; /* sizeof sun_path on Linux */
} lithc_endpoint;

/* Parse "http://HOST[:PORT][/PREFIX]" or "https://..." (HOST a name, an
 * IPv4 address or "[IPv6]"; PORT 80, or 443 for https, when left out). On error returns LITHC_BAD_ARG and
 * writes why into err (errsz bytes, may be 0). */
int lithc_endpoint_url(lithc_endpoint *ep, const char *url, char *err, size_t errsz);

/* An endpoint for the Unix socket at `path` (absolute or relative to the
 * current directory). LITHC_BAD_ARG if the path is empty or does not fit
 * into sun_path. */
int lithc_endpoint_unix(lithc_endpoint *ep, const char *path, char *err, size_t errsz);

/* "http://HOST:PORT", "https://HOST:PORT" or "unix:PATH", for messages.
 * Returns buf. */
const char *lithc_endpoint_name(const lithc_endpoint *ep, char *buf, size_t bufsz);

/* One header of an answer: name and value point into lithc_response.head
 * (not NUL-terminated; values without surrounding blanks). */
typedef h1c_header lithc_header;

/* An answer (h1client's): status, head, headers[n_headers] pointing into
 * head, body[body_len] then a NUL (never NULL after LITHC_OK). Filled by
 * lithc_request; every pointer inside is owned by the response and freed by
 * lithc_response_free (which leaves it empty, so it may be called twice). A
 * zeroed struct is an empty response. */
typedef h1c_response lithc_response;

/* A request. Every pointer is read during lithc_request only. */
typedef struct lithc_request {
  const char *method; /* "GET", "POST", ... */
  const char *path;   /* "/v1/do": appended to the endpoint's base_path;
                               sent as is (the caller escapes it) */
  const char *token;  /* NULL, or sent as "Authorization: Bearer TOKEN";
                               must not hold CR, LF or NUL */
  const char *body;   /* NULL for none, else body_len bytes sent as
                               application/json */
  size_t body_len;
  int timeout_ms;      /* for the whole exchange; <= 0: no limit */
  const char *ca_file; /* https: the PEM file of the CA certificates to trust
                          instead of the system's (NULL: OpenSSL's default
                          paths, which SSL_CERT_FILE and SSL_CERT_DIR set) */
} lithc_request;

/* Send `req` to `ep` and read the answer into *resp (which must be empty:
 * zeroed or freed). Returns LITHC_OK with *resp filled — whatever the HTTP
 * status — or an error code with a one-line message in err and *resp left
 * empty. 1xx interim answers are skipped. For https a certificate that
 * does not verify, or a failed handshake, is LITHC_CONNECT (nothing was
 * sent); an unusable ca_file LITHC_BAD_ARG. */
int lithc_request_send(const lithc_endpoint *ep, const lithc_request *req, lithc_response *resp, char *err,
                       size_t errsz);

/* The reading half of lithc_request_send, for a request already sent on
 * `fd` (a connected stream socket; non-blocking, or timeout_ms cannot bound
 * the wait) with `method`: reads the answer into *resp as lithc_request_send
 * does (1xx answers skipped). `peer` names the server in messages (NULL:
 * "the server"). fd stays open; the caller closes it. Tests feed it canned
 * bytes this way. */
int lithc_response_read(int fd, const char *method, const char *peer, int timeout_ms, lithc_response *resp,
                        char *err, size_t errsz);

/* Where lithc_response_read_from gets the answer's bytes: up to n of them
 * into buf, returning how many (> 0), 0 at the end, or -1 with errno set
 * (EINTR is retried, anything else is an error: there is no socket to
 * wait for). */
typedef h1c_source lithc_source;

/* lithc_response_read on bytes from src(ctx, ...) instead of a socket,
 * without a deadline: each call is one receive, so the caller decides
 * where the answer is cut (the fuzzer does). */
int lithc_response_read_from(lithc_source src, void *ctx, const char *method, const char *peer,
                             lithc_response *resp, char *err, size_t errsz);

/* lithc_request_send for a download (GET /v1/backup): a 200 answer's body,
 * framed by Content-Length, is written to out_fd as it arrives and never
 * held whole (64 KiB at a time); *resp then holds the status and headers
 * with an empty body, *bytes the body's length. Any other answer is read
 * whole into *resp as lithc_request_send does (lithd's errors are small).
 * req->timeout_ms bounds each wait, not the whole exchange: a large
 * download takes as long as it takes while bytes keep coming. Returns
 * LITHC_OK or an error (LITHC_IO when the connection ended early or
 * writing out_fd failed: what was written is incomplete). */
int lithc_download(const lithc_endpoint *ep, const lithc_request *req, int out_fd, lithc_response *resp,
                   long long *bytes, char *err, size_t errsz);

/* The value of the first header named `name` (case-insensitive), or NULL;
 * *len receives its length. Points into resp. */
const char *lithc_response_header(const lithc_response *resp, const char *name, size_t *len);

/* Free what *resp holds and zero it. NULL is fine. */
void lithc_response_free(lithc_response *resp);

#ifdef __cplusplus
}
#endif

#endif /* LITH_CLIENT_H */
