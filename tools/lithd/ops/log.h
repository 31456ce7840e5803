/*
 * lithd log — leveled, timestamped lines on stderr or in a log file.
 *
 * With a file, the file is made lithd's stderr (dup2 onto descriptor 2), so
 * whatever else writes to stderr — h2o's own warnings, a sanitizer report —
 * lands in the same place. lithd_log_reopen() (on SIGHUP) opens the path
 * again and swaps it in: after logrotate renamed the old file, lithd writes
 * to a new one without a restart. Each line goes out in one write(2) on an
 * O_APPEND descriptor, so lines from several threads never interleave.
 *
 * Two formats (--log-format): text, "2026-12-01T17:06:46.068Z lithd[PID]
 * LEVEL: MESSAGE"; or json, one object per line for every line:
 *   {"ts":"2026-12-01T17:06:46.068Z","level":"info","pid":PID,"msg":"..."}
 * and a request line (lithd_log_request) adds "method", "path", "status",
 * "us" (microseconds), "bytes" (body bytes sent) and "client".
 */
#ifndef LITHD_LOG_H
#define LITHD_LOG_H

#include <stdint.h>

enum { LITHD_LOG_ERROR = 0, LITHD_LOG_WARN = 1, LITHD_LOG_INFO = 2, LITHD_LOG_DEBUG = 3 };
enum { LITHD_LOG_TEXT = 0, LITHD_LOG_JSON = 1 };

/* "error", "warn", "info" or "debug" to its level; -1 for anything else. */
int lithd_log_level_parse(const char *name);

/* Log lines up to `level` (lines above it are dropped) to `path`, or to
 * stderr as it is when path is NULL. `path` is copied. Returns 0, or -1
 * with errno set when the file cannot be opened (stderr unchanged). */
int lithd_log_open(const char *path, int level);

/* "text" or "json" to its LITHD_LOG_ format; -1 for anything else. */
int lithd_log_format_parse(const char *name);

/* Write every later line in `format` (LITHD_LOG_TEXT, the default, or
 * LITHD_LOG_JSON). Any thread. */
void lithd_log_set_format(int format);

/* Open the log file again (no-op without one). Returns 0 or -1 (errno set;
 * the old descriptor stays in use). Any thread. */
int lithd_log_reopen(void);

/* 1 if a line of `level` would be written. */
int lithd_log_enabled(int level);

/* Write one line: timestamp (UTC, ms), level, the message (at most 2047
 * bytes kept). Any thread. */
void lithd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The line of one finished request, at debug: as text "METHOD PATH STATUS
 * USus BYTESB CLIENT", as JSON the fields above. The strings are the
 * caller's, read during the call. Any thread. */
void lithd_log_request(const char *method, const char *path, int status, uint64_t us, uint64_t bytes,
                       const char *client);

/* Forget the path (stderr stays where it is). */
void lithd_log_close(void);

#endif /* LITHD_LOG_H */
