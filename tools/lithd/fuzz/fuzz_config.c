/*
 * libFuzzer harness: lithd's config file (--config), from arbitrary bytes,
 * through lithd_opts_parse as lithd's main calls it — the file's lines
 * become long options and go through the same getopt table as the command
 * line. The reader takes a path, so each input is written to a memfd
 * first, read back through /proc/self/fd (a file on disk rewritten per
 * input cost 3 ms each: ext4 flushes a truncated-and-rewritten file at
 * close). What a parse accepts must hold together: a port in
 * range, a database path, every string it kept freed by lithd_opts_free.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static int fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fd < 0) {
    if ((fd = memfd_create("lithd-fuzz-config", 0)) < 0)
      abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
    abort();
  char *argv[] = {(char *)"lithd", (char *)"--config", path, NULL};
  lithd_opts o;
  int rc = lithd_opts_parse(3, argv, &o);
  if (rc == 0) {
    if (o.n_dbs < 1 || o.dbs[0].path == NULL || o.port < 0 || o.port > 65535 || o.max_memory_mib < 0)
      abort();
  } else if (rc != 1 && rc != 2) {
    abort();
  }
  lithd_opts_free(&o);
  return 0;
}
