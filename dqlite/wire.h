/*
 * dqlite's wire protocol (version 1), encoding and decoding only: no I/O.
 * Written from dqlite's "wire protocol" reference (dqlite.io/docs/protocol)
 * and checked against libdqlite 1.11.1 (Debian's), which is what lith's
 * nodes run.
 *
 * Everything is little-endian and aligned on 8-byte words. A message is an
 * 8-byte header (body size in words: uint32; type: uint8; schema revision:
 * uint8; two unused bytes) and a body of fields: uint64/int64/double take a
 * word, two uint32 share one, text is NUL-terminated and padded with zeros
 * to the next word, a blob is a uint64 length and the bytes padded likewise.
 *
 * Requests are built into a lith__dq_buf (growing; the first error sticks and
 * is reported by lith__dq_req_end). Responses are decoded from a body the
 * caller has read whole: a node is not trusted, so every length, count and
 * offset is checked against the body before it is used, every text must end
 * inside it, and counts are bounded by what the body could hold before any
 * allocation. Trailing bytes after the fields are ignored: the reference says
 * a later schema revision only appends fields.
 *
 * Bound parameters use the version-0 tuple (1 byte count, 1 byte type each,
 * padded): at most 255 parameters, which is all libdqlite 1.11 reads.
 */
#ifndef LITH_DQLITE_WIRE_H
#define LITH_DQLITE_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* The one result code of the dqlite client (wire.c and client.c). */
enum lith__dq_rc {
  LITH_DQ_OK = 0,
  LITH_DQ_FAILURE, /* the node answered FAILURE: code and message kept on the handle */
  LITH_DQ_PROTO,   /* a malformed or unexpected frame: the connection is dropped */
  LITH_DQ_IO,      /* connect, send or receive failed (or not connected) */
  LITH_DQ_TIMEOUT, /* the whole answer did not come by the call's deadline
                    * (the handle's timeout from the call's start, or
                    * lith__dq_query_each's deadline_ms): dropped */
  LITH_DQ_NOMEM,
  LITH_DQ_MISUSE,  /* a bad argument: too many parameters, an unknown value type;
                   * or a call on the connection from inside on_rows */
  LITH_DQ_STOPPED, /* lith__dq_query_each: on_rows returned non-zero (client.h) */
  LITH_DQ_TOOBIG,  /* one frame over LITH_DQ_MAX_BODY (the connection is
                    * closed), or a whole answer gathered by lith__dq_query /
                    * _query_sql over LITH_DQ_MAX_ANSWER (client.h) */
};

/* A short name for a code ("ok", "failure", "protocol error", ...). */
const char *lith__dq_rc_str(int rc);

#define LITH_DQ_PROTOCOL_VERSION 1
#define LITH_DQ_ROWS_PART 0xeeeeeeeeeeeeeeeeULL
#define LITH_DQ_ROWS_DONE 0xffffffffffffffffULL
#define LITH_DQ_MAX_PARAMS 255

/* Request types. */
enum {
  LITH_DQ_REQ_LEADER = 0,
  LITH_DQ_REQ_CLIENT = 1,
  LITH_DQ_REQ_OPEN = 3,
  LITH_DQ_REQ_PREPARE = 4,
  LITH_DQ_REQ_EXEC = 5,
  LITH_DQ_REQ_QUERY = 6,
  LITH_DQ_REQ_FINALIZE = 7,
  LITH_DQ_REQ_EXEC_SQL = 8,
  LITH_DQ_REQ_QUERY_SQL = 9,
  LITH_DQ_REQ_INTERRUPT = 10,
  LITH_DQ_REQ_ADD = 12,
  LITH_DQ_REQ_ASSIGN = 13,
  LITH_DQ_REQ_REMOVE = 14,
  LITH_DQ_REQ_DUMP = 15,
  LITH_DQ_REQ_CLUSTER = 16,
};

/* Response types. */
enum {
  LITH_DQ_RES_FAILURE = 0,
  LITH_DQ_RES_SERVER = 1,
  LITH_DQ_RES_WELCOME = 2,
  LITH_DQ_RES_SERVERS = 3,
  LITH_DQ_RES_DB = 4,
  LITH_DQ_RES_STMT = 5,
  LITH_DQ_RES_RESULT = 6,
  LITH_DQ_RES_ROWS = 7,
  LITH_DQ_RES_EMPTY = 8,
  LITH_DQ_RES_FILES = 9,
};

/* Value types: SQLite's, and dqlite's three for declared column types
 * (a DATETIME/DATE/TIMESTAMP column gives UNIXTIME for an integer and
 * ISO8601 for text, a BOOLEAN column gives BOOLEAN). */
enum {
  LITH_DQ_INTEGER = 1,
  LITH_DQ_FLOAT = 2,
  LITH_DQ_TEXT = 3,
  LITH_DQ_BLOB = 4,
  LITH_DQ_NULL = 5,
  LITH_DQ_UNIXTIME = 9,
  LITH_DQ_ISO8601 = 10,
  LITH_DQ_BOOLEAN = 11,
};

/* dqlite's own extended codes in FAILURE (SQLITE_IOERR | n << 8): the node
 * is not the leader; leadership was lost while the request ran (for a
 * COMMIT: the outcome is unknown). */
#define LITH_DQ_IOERR_NOT_LEADER (10 | (40 << 8))
#define LITH_DQ_IOERR_LEADERSHIP_LOST (10 | (41 << 8))

/* Raft roles (ASSIGN, CLUSTER format 1). */
enum { LITH_DQ_VOTER = 0, LITH_DQ_STANDBY = 1, LITH_DQ_SPARE = 2 };

/* One value: INTEGER, UNIXTIME and BOOLEAN use i, FLOAT f; TEXT and ISO8601
 * p (NUL-terminated, n = strlen), BLOB p and n. As a parameter the pointers
 * are the caller's; decoded, they point into the body they came from. */
typedef struct lith__dq_value {
  int type;
  union {
    int64_t i;
    double f;
  };
  const void *p;
  size_t n;
} lith__dq_value;

/* Value constructors for parameters (pointers stay the caller's). */
lith__dq_value lith__dq_int(int64_t i);
lith__dq_value lith__dq_float(double f);
lith__dq_value lith__dq_text(const char *s);
lith__dq_value lith__dq_blob(const void *p, size_t n);
lith__dq_value lith__dq_null(void);

/* ---- Requests ---- */

/* A growing byte buffer; data is malloc'd, owned by the buffer. */
typedef struct lith__dq_buf {
  uint8_t *data;
  size_t len, cap;
  int err;      /* first error (LITH_DQ_NOMEM or LITH_DQ_MISUSE), sticky */
  size_t start; /* offset of the message being built */
} lith__dq_buf;

void lith__dq_buf_init(lith__dq_buf *b);
void lith__dq_buf_free(lith__dq_buf *b);
void lith__dq_buf_reset(lith__dq_buf *b);

/* The handshake: one word, the protocol version. */
void lith__dq_put_handshake(lith__dq_buf *b);

/* Build one message: begin writes its header, the put functions its fields,
 * end fills in the size; end returns LITH_DQ_OK or the buffer's error.
 * Several messages may be built one after the other into one buffer. */
void lith__dq_req_begin(lith__dq_buf *b, int type);
void lith__dq_put_u64(lith__dq_buf *b, uint64_t v);
void lith__dq_put_u32(lith__dq_buf *b, uint32_t v);
void lith__dq_put_text(lith__dq_buf *b, const char *s);
/* A parameter tuple; n == 0 writes nothing (no parameters). */
void lith__dq_put_params(lith__dq_buf *b, const lith__dq_value *params, unsigned n);
int lith__dq_req_end(lith__dq_buf *b);

/* Whole requests (each begin/put/end). */
int lith__dq_req_leader(lith__dq_buf *b);
int lith__dq_req_client(lith__dq_buf *b, uint64_t id);
int lith__dq_req_open(lith__dq_buf *b, const char *name, uint64_t flags, const char *vfs);
int lith__dq_req_prepare(lith__dq_buf *b, uint32_t db, const char *sql);
int lith__dq_req_exec(lith__dq_buf *b, int type, uint32_t db, uint32_t stmt, const lith__dq_value *params,
                      unsigned n); /* type: EXEC or QUERY */
int lith__dq_req_finalize(lith__dq_buf *b, uint32_t db, uint32_t stmt);
int lith__dq_req_sql(lith__dq_buf *b, int type, uint32_t db, const char *sql, const lith__dq_value *params,
                     unsigned n); /* type: EXEC_SQL or QUERY_SQL */
int lith__dq_req_interrupt(lith__dq_buf *b, uint32_t db);
int lith__dq_req_add(lith__dq_buf *b, uint64_t id, const char *address);
int lith__dq_req_assign(lith__dq_buf *b, uint64_t id, uint64_t role);
int lith__dq_req_remove(lith__dq_buf *b, uint64_t id);
int lith__dq_req_cluster(lith__dq_buf *b, uint64_t format);
int lith__dq_req_dump(lith__dq_buf *b, const char *name);

/* ---- Responses ---- */

typedef struct lith__dq_header {
  uint32_t words; /* body size in 8-byte words */
  uint8_t type;
  uint8_t schema;
} lith__dq_header;

void lith__dq_header_decode(const uint8_t h[8], lith__dq_header *out);

/* Fixed-layout bodies. Texts returned point into body. */
int lith__dq_decode_failure(const uint8_t *body, size_t n, uint64_t *code, const char **message);
/* A FAILURE answering QUERY or QUERY_SQL, read from the END of its body:
 * libdqlite 1.11.1 encodes a failure at a step after the part it was
 * filling (gateway.c's query_batch calls failure() without resetting the
 * buffer), so the body starts with the column count, the names and the
 * rows of that part, and the code and message come last (seen in
 * test_client: the forward decoder read the column count 2 as the code and
 * the first column's name as the message). The message is the text that
 * ends the body (its NUL and zero padding: 1 to 8 zero bytes; more mean an
 * empty message), starting on a word boundary; the code is the word before
 * it, below 2^56 (its top byte is the zero that ends the backward scan).
 * Also right for a plain FAILURE (code, message). */
int lith__dq_decode_failure_tail(const uint8_t *body, size_t n, uint64_t *code, const char **message);
int lith__dq_decode_server(const uint8_t *body, size_t n, uint64_t *id, const char **address);
int lith__dq_decode_welcome(const uint8_t *body, size_t n, uint64_t *heartbeat_timeout);
int lith__dq_decode_db(const uint8_t *body, size_t n, uint32_t *db);
int lith__dq_decode_stmt(const uint8_t *body, size_t n, uint32_t *db, uint32_t *stmt, uint64_t *params);
int lith__dq_decode_result(const uint8_t *body, size_t n, uint64_t *last_insert_id, uint64_t *rows_affected);
int lith__dq_decode_empty(const uint8_t *body, size_t n);

/* SERVERS: the cluster's nodes. format 0: id and address; format 1 adds the
 * role. *out is one malloc'd block (entries and their addresses), the
 * caller's to free(). */
typedef struct lith__dq_server {
  uint64_t id;
  const char *address;
  uint64_t role; /* LITH_DQ_VOTER, ... (format 1; else LITH_DQ_VOTER) */
} lith__dq_server;
typedef struct lith__dq_servers {
  size_t n;
  lith__dq_server *v; /* free(v) frees the whole block */
} lith__dq_servers;
int lith__dq_decode_servers(const uint8_t *body, size_t n, uint64_t format, lith__dq_servers *out);

/* ROWS: a result set arrives in one or more messages, each with the column
 * count and names, rows, and a closing word: PART (more messages follow) or
 * DONE. A row is a header of 4-bit type codes (two a byte, low nibble first,
 * padded to a word) and its values. lith__dq_rows gathers the parts: names
 * come from the first, every part must have the same column count. */
typedef struct lith__dq_rows {
  unsigned ncols;
  const char **names; /* ncols, into the first body */
  size_t nrows;
  lith__dq_value *values; /* nrows * ncols, row-major, into the bodies */
  /* private */
  size_t cap;
  uint8_t **bodies;
  size_t nbodies;
} lith__dq_rows;

void lith__dq_rows_init(lith__dq_rows *r);
void lith__dq_rows_free(lith__dq_rows *r);
/* The value at row i, column j. */
const lith__dq_value *lith__dq_rows_at(const lith__dq_rows *r, size_t i, unsigned j);
/* Decode one ROWS body into r. body is malloc'd and becomes r's in every
 * case (freed on error). *done is 1 after DONE, 0 after PART. On an error r
 * is left as it was before the call (the caller usually frees it). */
int lith__dq_rows_decode(lith__dq_rows *r, uint8_t *body, size_t n, int *done);

/* FILES (DUMP's answer): a count, then per file its name (text), its
 * size (uint64) and its bytes, padded to a word. libdqlite 1.11.1
 * (gateway.c's handle_dump) sends two files, the database's main file
 * ("NAME") and its WAL ("NAME-wal"), each as it lies in the node's memory
 * (either may be empty; both when the database does not exist), in ONE
 * frame: as large as the database, so it is decoded as it streams in,
 * never held whole. A FAILURE answering DUMP carries the count word before
 * its code (handle_dump writes it first): read it with
 * lith__dq_decode_failure_tail.
 *
 * lith__dq_files_next takes the body's bytes in pieces of any size and
 * says what they held, one event at a time. Nothing is trusted: the count
 * must fit the body (each file takes two words at least), a name must end
 * within LITH_DQ_FILE_NAME_MAX bytes and the body, a size (and its
 * padding) must fit what is left of the body. Anything else is
 * LITH_DQ_PROTO at once, before the bytes that would settle it arrive. */
#define LITH_DQ_FILE_NAME_MAX 1024 /* a name, NUL included (libdqlite's own bound) */

enum {
  LITH_DQ_FILES_NEED,  /* every byte given was taken: give the body's next ones */
  LITH_DQ_FILES_BEGIN, /* file `index` begins: name and size are set */
  LITH_DQ_FILES_DATA,  /* *data, *len: the next bytes of file `index` (len > 0) */
  LITH_DQ_FILES_END,   /* file `index` ended (all its bytes were DATA) */
  LITH_DQ_FILES_DONE,  /* every file ended; `left` bytes of the body follow,
                          ignored (a later schema only appends fields) */
};

typedef struct lith__dq_files {
  /* Read after an event. */
  uint64_t count; /* the files announced (once the first word is read) */
  uint64_t index; /* the file of the last event, from 0 */
  uint64_t size;  /* its size, in bytes */
  char name[LITH_DQ_FILE_NAME_MAX];
  uint64_t left; /* bytes of the body not taken yet */
  /* Private. */
  int state;
  uint64_t data_left, pad_left;
  uint8_t word[8];
  unsigned nword;
  size_t nname;
} lith__dq_files;

/* Ready to decode a FILES body of body_size bytes (the header's). */
void lith__dq_files_init(lith__dq_files *f, uint64_t body_size);
/* Take bytes from p[0..n) (the body's next; bytes past the body are not
 * taken) up to the next event: LITH_DQ_OK with *ev and *used (bytes
 * taken; for DATA, *data = p + *used - *len), or LITH_DQ_PROTO (the body
 * cannot be a FILES body; the decoder is then spent). */
int lith__dq_files_next(lith__dq_files *f, const uint8_t *p, size_t n, size_t *used, int *ev,
                        const uint8_t **data, size_t *len);

#endif
