/*
 * lithd backups over HTTP — the handlers of /v1/backup (server.c routes them).
 *
 *   POST /v1/backup {"dest": "NAME"}  lithd_store_snapshot into --backup-dir,
 *       on libuv's thread pool, answered with the path, size and time. A
 *       client names a new file in the operator's directory, nothing else.
 *   GET /v1/backup                    the database itself, downloaded: one
 *       consistent snapshot (lithd_store_snapshot: a local file's
 *       lith_backup_new, a cluster leader's DUMP), application/vnd.sqlite3.
 *   GET /v1/backup?format=sql         the same snapshot as an SQL script
 *       (sqldump.h: a local file's in one lith_read; a cluster's read off
 *       its snapshot file, on a read-only connection), application/sql.
 * The same on every store: the routes know only store.h.
 *
 * A download: the snapshot is written on the thread pool (the loop never
 * waits for it) into a private directory (mkdtemp, mode 0700) beside the
 * database, opened, and unlinked at once with its directory: from then on
 * only the open descriptor holds it, so the file is gone whatever happens
 * next (the client leaves, lithd is killed). It is sent with
 * Content-Length and Content-Disposition in 64 KiB pieces read with
 * uv_fs_read (on the pool), a piece being read, from a uv_prepare handle,
 * only when the stream has less than a piece waiting
 * (lith_http_stream_queued): memory stays about 200 KiB a download
 * whatever the database's size. At most LITHD_MAX_DOWNLOADS run at once
 * in the process, whatever the database (the count is lithd_server's);
 * more get 503 with Retry-After. A client that stops reading frees its
 * slot after --write-timeout-ms (the HTTP layer's write timeout closes the
 * connection; the download sees the client gone).
 *
 * HEAD /v1/backup answers the headers of a download without making a
 * snapshot, so without Content-Length (which only the snapshot gives, and
 * which a HEAD answer may leave out but not estimate): no slot, no file.
 *
 * SIGTERM: a download is LITH_HTTP_STOP_FINISH (http.h), so the stop lets
 * it run (and start, if its snapshot was still being made) while
 * --stop-grace-ms lasts, like any request in flight; the deadline cuts
 * what is left (the client sees fewer than Content-Length bytes).
 *
 * Why beside the database and not in TMPDIR: the snapshot is as large as
 * the database, and the database's file system is the one sized for it,
 * whereas /tmp is often a tmpfs (RAM: a 10 GB database would take 10 GB of
 * memory) or, under systemd's PrivateTmp/ProtectSystem=strict, small or not
 * writable; lithd must be able to write beside its database anyway (the
 * -wal and -shm files). A lithd killed while writing a snapshot leaves a
 * directory .lithd-backup-XXXXXX there, which is safe to remove.
 *
 * On --dqlite there is no database file to sit beside: the snapshot goes
 * to --backup-dir when given (the one place the operator sized and made
 * writable for whole copies of the database, under the unit too), else to
 * $TMPDIR (absolute) or /tmp, the only places left that a process may
 * assume writable; docs/ha.md tells to give a large database a
 * --backup-dir.
 *
 * Auth and gates: the same as every route (the bearer token first).
 */
#ifndef LITHD_BACKUP_HTTP_H
#define LITHD_BACKUP_HTTP_H

#include "http.h"

/* Downloads (GET /v1/backup) running at once in the process, at most. */
#define LITHD_MAX_DOWNLOADS 2
/* POST /v1/backup running at once in the process, at most: each copies
 * the whole database on the thread pool (on --dqlite the leader holds it
 * twice in memory meanwhile); more get 503 with Retry-After. */
#define LITHD_MAX_POSTS 1

/* The handlers; arg is the database's lithd_dbsrv (server.h). */
int lithd_backup_post(lith_http_req *req, void *arg);
int lithd_backup_get(lith_http_req *req, void *arg);

#endif /* LITHD_BACKUP_HTTP_H */
