/*
 * Online backup: copy one snapshot of a live database to a file while the
 * writer keeps committing, through SQLite's backup API on a fresh read-only
 * connection. The source's read transaction is opened first and held to
 * the end, so the copy is one snapshot even though it is made in steps of
 * BACKUP_STEP_PAGES (a step inside a held read transaction does not restart
 * when the writer commits); between steps the backup looks at *interrupts
 * and stops when it moved (lith_interrupt). The copy goes to a temporary
 * file beside the destination, is synced, and renamed (or linked) into
 * place; an interrupted or failed copy is removed.
 *
 * The source's snapshot keeps the WAL from starting over as a read's does,
 * so the read pool knows of it (lith__pool_backup_begin): the backup waits
 * behind a hold before it opens its connection, and no hold begins while
 * it runs (a WAL the hold copied whole that still does not start over is
 * then read by a connection lith does not own: wal_restart_blocked).
 */
#ifndef LITH_SQLITE_BACKUP_H
#define LITH_SQLITE_BACKUP_H

#include <stdatomic.h>
#include <stdint.h>

#include "lith.h"
#include "read_pool.h"

/* new_only: dest_path must not exist, and the copy is linked into place
 * (never replacing anything) instead of renamed over it. pool: the
 * handle's read pool (NULL: none to tell). */
int lith__backup_run(const char *src_path, const lith_options *opt, const char *dest_path, int new_only,
                     _Atomic uint32_t *interrupts, lith__pool *pool);

#endif
