/*
 * lithd log — leveled, timestamped lines on stderr or in a log file.
 *
 * With a file, the file is made lithd's stderr (dup2 onto descriptor 2), so
 * whatever else writes to stderr — h2o's own warnings, a sanitizer report —
 * lands in the same place. lithd_log_reopen() (on SIGHUP) opens the path
 * again and swaps it in: after logrotate renamed the old file, lithd writes
 * to a new one without a restart. Each line goes out in one write(2) on an
 * O_APPEND descriptor, so lines from several threads never interleave.
 */
#ifndef LITHD_LOG_H
#define LITHD_LOG_H

enum { LITHD_LOG_ERROR = 0, LITHD_LOG_WARN = 1, LITHD_LOG_INFO = 2, LITHD_LOG_DEBUG = 3 };

/* "error", "warn", "info" or "debug" to its level; -1 for anything else. */
int lithd_log_level_parse(const char *name);

/* Log lines up to `level` (lines above it are dropped) to `path`, or to
 * stderr as it is when path is NULL. `path` is copied. Returns 0, or -1
 * with errno set when the file cannot be opened (stderr unchanged). */
int lithd_log_open(const char *path, int level);

/* Open the log file again (no-op without one). Returns 0 or -1 (errno set;
 * the old descriptor stays in use). Any thread. */
int lithd_log_reopen(void);

/* 1 if a line of `level` would be written. */
int lithd_log_enabled(int level);

/* Write one line: timestamp (UTC, ms), level, the message. Any thread. */
void lithd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the path (stderr stays where it is). */
void lithd_log_close(void);

#endif /* LITHD_LOG_H */
