/*
 * libFuzzer harness: the operator's files lithd reads at startup — named
 * commands (--commands) and schema steps (--schema) — from arbitrary bytes
 * (built twice: -DFUZZ_SCHEMA picks the schema reader). The readers take a
 * path, so each input is written to a memfd first, read back through
 * /proc/self/fd (a file on disk rewritten per input waits for ext4's flush
 * at close).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef FUZZ_SCHEMA
#include "schema.h"
#else
#include "commands.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static int fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fd < 0) {
    if ((fd = memfd_create("lithd-fuzz-file", 0)) < 0)
      abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
    abort();
  char err[256];
#ifdef FUZZ_SCHEMA
  lithd_schema s = {0};
  if (lithd_schema_load(path, &s, err, sizeof err) == 0) {
    for (int i = 0; i < s.n; i++)
      if (s.steps[i] == NULL)
        abort();
    lithd_schema_free(&s);
  }
#else
  lithd_commands *c = NULL;
  if (lithd_commands_load(path, &c, err, sizeof err) == 0) {
    if (c == NULL || lithd_commands_count(c) < 0)
      abort();
    lithd_commands_free(c);
  } else if (c != NULL) {
    abort();
  }
#endif
  return 0;
}
