/*
 * Online backup: copy one snapshot of a live database to a file while the
 * writer keeps committing, through SQLite's backup API on a fresh read-only
 * connection (sqlite3_backup_step(-1) copies every page inside a single read
 * transaction). The copy goes to a temporary file beside the destination,
 * is synced, and renamed over it.
 */
#ifndef LITH_SQLITE_BACKUP_H
#define LITH_SQLITE_BACKUP_H

#include "lith.h"

/* new_only: dest_path must not exist, and the copy is linked into place
 * (never replacing anything) instead of renamed over it. */
int lith__backup_run(const char *src_path, const lith_options *opt, const char *dest_path, int new_only);

#endif
