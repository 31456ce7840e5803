/*
 * A test VFS that simulates a power loss: "lith_crash", a shim over SQLite's
 * default (unix) VFS. See crashvfs.c for what a crash does to the files.
 *
 * Use: t_crashvfs_register(), then t_crashvfs_arm(seed, n, 0) and open the
 * database with lith_options.vfs = T_CRASHVFS_NAME. The n-th xSync (on any
 * file, any thread, counted from the arm) does not complete: the files are
 * put in a state the disk may be in after losing power there, and the
 * process ends with _exit(T_CRASHVFS_EXIT).
 */
#ifndef LITH_TEST_CRASHVFS_H
#define LITH_TEST_CRASHVFS_H

#include <stdint.h>

#define T_CRASHVFS_NAME "lith_crash"
#define T_CRASHVFS_SECTOR 512 /* what xSectorSize says, and the unit of a torn write */
#define T_CRASHVFS_EXIT 86    /* the exit status of a simulated power loss */

enum {
  /* The device: without this flag a torn sector may come back as garbage
   * whole, bytes the write never touched included, and the VFS reports no
   * SQLITE_IOCAP_POWERSAFE_OVERWRITE; with it, garbage stays within the
   * bytes written and the VFS reports POWERSAFE_OVERWRITE (as SQLite's unix
   * VFS does by default). */
  T_CRASHVFS_PSOW = 4,
  /* Ways to lie, for a test that the checker notices a VFS that lies; never
   * for a real test. LIE_SYNC: xSync makes nothing durable (nor the
   * directory), so a crash may drop or tear anything written since the file
   * was opened. LIE_PSOW: POWERSAFE_OVERWRITE reported by a device without
   * it. */
  T_CRASHVFS_LIE_SYNC = 1,
  T_CRASHVFS_LIE_PSOW = 2
};

/* Register the VFS (not as the default); again is a no-op. Returns an
 * SQLite result code. */
int t_crashvfs_register(void);

/* Count xSync calls from zero and crash inside the crash_at-th (0: never).
 * `seed` drives every choice the crash makes; `flags` is 0 or
 * T_CRASHVFS_PSOW, or a T_CRASHVFS_LIE_*. Call before opening files through
 * the VFS. */
void t_crashvfs_arm(uint64_t seed, int crash_at, int flags);

/* xSync calls counted since t_crashvfs_arm. */
int t_crashvfs_syncs(void);

#endif
