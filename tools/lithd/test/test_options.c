/*
 * test_options — options.c's table of options, walked row by row, so that
 * an option cannot be declared in one place and missing from another:
 *
 *   - every row is in --help: its own line "  --NAME", its help text, its
 *     default;
 *   - every row with a config key is taken by the config file under that
 *     key, in every mode the row accepts (a row without one is refused
 *     there as an unknown setting);
 *   - every row is taken on the command line in every mode it accepts, and
 *     refused, exit 2 with a message naming it, in every mode it does not
 *     (on the command line and in the config file); which those are is
 *     pinned in refused[], so a row's modes do not change unnoticed.
 *
 * That docs/lithd.md's option table lists every option --help prints, and
 * none it does not, is checked by tools/test-docs.py (its `options` mark),
 * which runs the documentation's examples too.
 *
 * Design: lithd_opts_parse runs in this process (no lithd is spawned),
 * with stdout and stderr caught in files. The value each option is given
 * comes from `samples` below: a row without one fails the test, so a new
 * option gets a value to be tried with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

/* A value each option takes (NULL: given bare) and what the parse then
 * returns (1: it answered, as --help does). */
static const struct {
  const char *name, *value;
  int rc;
} samples[] = {
    {"db", "other.db", 0},
    {"default", "main", 0},
    {"listen", "127.0.0.1:0", 0},
    {"unix", "t.sock", 0},
    {"synchronous", "full", 0},
    {"checkpoint", "external", 0},
    {"checkpoint-pages", "500", 0},
    {"wal-hold-ms", "20", 0},
    {"litestream", NULL, 0},
    {"readers", "2", 0},
    {"cache-kib", "2048", 0},
    {"mmap-mib", "16", 0},
    {"max-batch", "8", 0},
    {"max-queue", "64", 0},
    {"file-mode", "0640", 0},
    {"queue-wait-ms", "10", 0},
    {"schema", "s.sql", 0},
    {"commands", "main=c.sql", 0},
    {"only-named", NULL, 0},
    {"token-file", "t.txt", 0},
    {"auth-jwt-key-file", "k.pub", 0},
    {"tls-cert", "c.pem", 0}, /* alone: lith_http_server_create refuses it */
    {"tls-key", "k.pem", 0},
    {"request-timeout-ms", "3000", 0},
    {"allow-origin", "*", 0},
    {"allow-host", "proxy.example", 0},
    {"backup-dir", "bk", 0},
    {"max-body", "4096", 0},
    {"max-statements", "3", 0},
    {"max-sql", "200", 0},
    {"max-rows", "5", 0},
    {"max-result-mib", "16", 0},
    {"max-run-ms", "150", 0},
    {"tx-idle-ms", "700", 0},
    {"tx-max-ms", "9000", 0},
    {"stream-idle-ms", "4000", 0},
    {"max-value-bytes", "2048", 0},
    {"max-like-pattern", "20", 0},
    {"max-memory-mib", "64", 0},
    {"stop-grace-ms", "100", 0},
    {"write-timeout-ms", "2500", 0},
    {"max-answer-mib", "16", 0},
    {"log-level", "debug", 0},
    {"log", "t.log", 0},
    {"log-format", "json", 0},
    {"config", "empty.conf", 0},
    {"restore", "other-backup.db", 0},
    {"force", NULL, 0},
    {"dqlite", "127.0.0.1:9002", 0},
    {"dqlite-db", "other", 0},
    {"dqlite-failover-ms", "500", 0},
    {"help", NULL, 1},
    {"version", NULL, 1},
};

/* Each mode, the option that makes it (NULL: none) and the least command
 * line in it. */
static const struct {
  unsigned mode;
  const char *option;
  const char *args[5];
} modes[] = {
    {LITHD_MODE_FILE, NULL, {"--db", "t.db", NULL}},
    {LITHD_MODE_DQLITE, "dqlite", {"--dqlite", "127.0.0.1:9001", NULL}},
    {LITHD_MODE_RESTORE, "restore", {"--restore", "backup.db", "--db", "t.db", NULL}},
    {LITHD_MODE_DQLITE_RESTORE, "restore", {"--dqlite", "127.0.0.1:9001", "--restore", "backup.db", NULL}},
};
#define N_MODES (sizeof modes / sizeof modes[0])

static int sample_of(const lithd_opt *r) {
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
    if (strcmp(samples[i].name, r->name) == 0)
      return (int)i;
  print_error("--%s has no sample value: add one to samples[] in %s\n", r->name, __FILE__);
  fail();
  return -1;
}

static char *slurp(FILE *f) {
  long n;
  char *s;
  fflush(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  return s;
}

/* lithd_opts_parse("lithd", args...), its stdout in *out and stderr in
 * *err (malloc'd). Returns its rc. */
static int parse(const char *const *args, char **out, char **err) {
  char *argv[32];
  int argc = 0, rc, fd1, fd2;
  FILE *o = tmpfile(), *e = tmpfile();
  lithd_opts opts;

  assert_non_null(o);
  assert_non_null(e);
  argv[argc++] = (char *)"lithd";
  for (; *args != NULL; args++) {
    assert_true(argc < 31);
    argv[argc++] = (char *)*args;
  }
  argv[argc] = NULL;
  fflush(stdout);
  fflush(stderr);
  fd1 = dup(1);
  fd2 = dup(2);
  assert_true(fd1 >= 0 && fd2 >= 0);
  assert_int_not_equal(dup2(fileno(o), 1), -1);
  assert_int_not_equal(dup2(fileno(e), 2), -1);
  rc = lithd_opts_parse(argc, argv, &opts);
  fflush(stdout);
  fflush(stderr);
  dup2(fd1, 1);
  dup2(fd2, 2);
  close(fd1);
  close(fd2);
  lithd_opts_free(&opts);
  *out = slurp(o);
  *err = slurp(e);
  fclose(o);
  fclose(e);
  return rc;
}

/* Whether `text` names --NAME (not a longer option that begins so). */
static int names(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(text, "--"); p != NULL; p = strstr(p + 2, "--")) {
    char next = p[2 + n];
    if ((p == text || p[-1] != '-') && strncmp(p + 2, name, n) == 0 &&
        !((next >= 'a' && next <= 'z') || (next >= '0' && next <= '9') || next == '-'))
      return 1;
  }
  return 0;
}

/* The mode's base command line, then `extra` (NULL-terminated), into v. */
static void args_in(size_t mode, const char *const *extra, const char **v) {
  int n = 0;
  for (const char *const *a = modes[mode].args; *a != NULL; a++)
    v[n++] = *a;
  for (; *extra != NULL; extra++)
    v[n++] = *extra;
  v[n] = NULL;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* "--name=value" or "--name" for row r's sample, into buf. */
static const char *option_arg(const lithd_opt *r, char *buf, size_t cap) {
  const char *v = samples[sample_of(r)].value;
  if (v != NULL)
    snprintf(buf, cap, "--%s=%s", r->name, v);
  else
    snprintf(buf, cap, "--%s", r->name);
  return buf;
}

/* The config file line of row r's sample, written to cfg.conf. */
static void config_line(const lithd_opt *r) {
  char line[256];
  const char *v = samples[sample_of(r)].value;
  if (v != NULL)
    snprintf(line, sizeof line, "%s = %s\n", r->key, v);
  else
    snprintf(line, sizeof line, "%s\n", r->key);
  write_file("cfg.conf", line);
}

/* Every row says what it is, and why it is refused where it is. */
static void test_table_rows_are_whole(void **state) {
  (void)state;
  assert_true(lithd_opt_count > 0);
  for (int i = 0; i < lithd_opt_count; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    int makes_mode = 0;
    assert_non_null(r->name);
    assert_non_null(r->help);
    assert_non_null(r->set);
    assert_true(r->modes != 0 && (r->modes & ~LITHD_MODE_ALL) == 0);
    assert_true(r->arg == no_argument || r->arg == required_argument || r->arg == optional_argument);
    assert_true(r->arg == required_argument ? r->meta != NULL : r->meta == NULL);
    assert_true(!r->def_applied || r->def != NULL);
    sample_of(r);
    for (int k = 0; k < i; k++)
      assert_string_not_equal(lithd_opt_table[k].name, r->name);
    for (size_t m = 0; m < N_MODES; m++)
      makes_mode |= modes[m].option != NULL && strcmp(modes[m].option, r->name) == 0;
    /* What refuses it: "goes with" what it needs, or the mode's reason
     * (the options that make a mode are refused through the others'). */
    if (!makes_mode && (r->modes & LITHD_MODE_FILE) == 0 && r->needs == NULL) {
      print_error("--%s is refused with local files but does not say what it needs (.needs)\n", r->name);
      fail();
    }
    if (!makes_mode && r->modes != LITHD_MODE_ALL && r->needs == NULL && r->why == NULL) {
      print_error("--%s is refused in a mode but gives no reason (.why)\n", r->name);
      fail();
    }
  }
}

/* Each row has its own line in --help, with its help text and default. */
static void test_help_shows_every_row(void **state) {
  char *out, *err, *flat, *w;
  const char *args[] = {"--help", NULL};
  (void)state;
  assert_int_equal(parse(args, &out, &err), 1);
  assert_string_equal(err, "");
  /* The help text with its line breaks and indents as single spaces. */
  flat = strdup(out);
  assert_non_null(flat);
  w = flat;
  for (const char *p = out; *p != '\0'; p++)
    if (*p != ' ' && *p != '\n')
      *w++ = *p;
    else if (w > flat && w[-1] != ' ')
      *w++ = ' ';
  *w = '\0';
  for (int i = 0; i < lithd_opt_count; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    char want[256];
    const char *p;
    int found = 0;
    snprintf(want, sizeof want, "\n  --%s", r->name);
    for (p = strstr(out, want); p != NULL && !found; p = strstr(p + 1, want)) {
      char next = p[strlen(want)];
      found = next == ' ' || next == '\n' || next == '[';
    }
    if (!found || strstr(flat, r->help) == NULL) {
      print_error("--help has no line for --%s, or not its help text\n", r->name);
      fail();
    }
    snprintf(want, sizeof want, "(default %s)", r->def != NULL ? r->def : "");
    if (r->def != NULL && strstr(flat, want) == NULL) {
      print_error("--help does not show --%s's default: %s\n", r->name, want);
      fail();
    }
  }
  free(flat);
  free(out);
  free(err);
}

/* Each row with a key is a config file line in every mode it accepts;
 * one without is an unknown setting there. */
static void test_config_file_takes_every_key(void **state) {
  const char *cfg[] = {"--config", "cfg.conf", NULL};
  const char *v[16];
  char *out, *err;
  (void)state;
  write_file("empty.conf", "");
  for (int i = 0; i < lithd_opt_count; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    if (r->key == NULL) {
      char line[128];
      snprintf(line, sizeof line, "%s = x\n", r->name);
      write_file("cfg.conf", line);
      args_in(0, cfg, v);
      assert_int_equal(parse(v, &out, &err), 2);
      assert_non_null(strstr(err, "unknown setting"));
      free(out);
      free(err);
      continue;
    }
    config_line(r);
    for (size_t m = 0; m < N_MODES; m++) {
      int rc;
      if ((r->modes & modes[m].mode) == 0)
        continue;
      args_in(m, cfg, v);
      rc = parse(v, &out, &err);
      if (rc != samples[sample_of(r)].rc || strcmp(err, "") != 0) {
        print_error("config file \"%s\" in the mode of %s: rc %d, stderr: %s\n", r->key, modes[m].args[0], rc,
                    err);
        fail();
      }
      free(out);
      free(err);
    }
  }
}

/* Each row on the command line in every mode it accepts. */
static void test_command_line_takes_every_row(void **state) {
  const char *v[16];
  char arg[256], *out, *err;
  (void)state;
  write_file("empty.conf", "");
  for (int i = 0; i < lithd_opt_count; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    const char *extra[] = {option_arg(r, arg, sizeof arg), NULL};
    for (size_t m = 0; m < N_MODES; m++) {
      int rc, in_base = 0;
      if ((r->modes & modes[m].mode) == 0)
        continue;
      for (const char *const *a = modes[m].args; *a != NULL; a++)
        in_base |= (*a)[0] == '-' && strcmp(*a + 2, r->name) == 0;
      if (in_base)
        continue; /* given twice: the config file test has it */
      args_in(m, extra, v);
      rc = parse(v, &out, &err);
      if (rc != samples[sample_of(r)].rc || strcmp(err, "") != 0) {
        print_error("%s in the mode of %s: rc %d, stderr: %s\n", arg, modes[m].args[0], rc, err);
        fail();
      }
      free(out);
      free(err);
    }
  }
}

/* What lithd refuses today, pinned: the table may change it, this test
 * must then be told (test_lithd_dqlite, test_lithd_backup check some end to
 * end). --dqlite refuses what needs a local file; --force and --dqlite-db
 * go with their modes only; --dqlite itself makes --db refused, and
 * --restore with it loads into the cluster (LITHD_MODE_DQLITE_RESTORE). */
static const struct {
  const char *name;
  unsigned mode;
} refused[] = {
    {"db", LITHD_MODE_DQLITE},
    {"default", LITHD_MODE_DQLITE},
    {"checkpoint", LITHD_MODE_DQLITE},
    {"checkpoint-pages", LITHD_MODE_DQLITE},
    {"litestream", LITHD_MODE_DQLITE},
    {"file-mode", LITHD_MODE_DQLITE},
    {"wal-hold-ms", LITHD_MODE_DQLITE},
    {"cache-kib", LITHD_MODE_DQLITE},
    {"mmap-mib", LITHD_MODE_DQLITE},
    {"force", LITHD_MODE_FILE},
    {"force", LITHD_MODE_DQLITE},
    {"dqlite", LITHD_MODE_FILE},
    {"dqlite", LITHD_MODE_RESTORE},
    {"dqlite-db", LITHD_MODE_FILE},
    {"dqlite-db", LITHD_MODE_RESTORE},
    /* --dqlite --restore: as --dqlite, and --force empties no cluster */
    {"db", LITHD_MODE_DQLITE_RESTORE},
    {"default", LITHD_MODE_DQLITE_RESTORE},
    {"checkpoint", LITHD_MODE_DQLITE_RESTORE},
    {"checkpoint-pages", LITHD_MODE_DQLITE_RESTORE},
    {"litestream", LITHD_MODE_DQLITE_RESTORE},
    {"file-mode", LITHD_MODE_DQLITE_RESTORE},
    {"wal-hold-ms", LITHD_MODE_DQLITE_RESTORE},
    {"cache-kib", LITHD_MODE_DQLITE_RESTORE},
    {"mmap-mib", LITHD_MODE_DQLITE_RESTORE},
    {"force", LITHD_MODE_DQLITE_RESTORE},
};

static int expected_refusal(const char *name, unsigned mode) {
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (strcmp(refused[i].name, name) == 0 && refused[i].mode == mode)
      return 1;
  return 0;
}

/* Each row, in each mode it does not accept: exit 2, named. */
static void test_refused_where_the_table_says(void **state) {
  const char *cfg[] = {"--config", "cfg.conf", NULL};
  const char *v[16];
  char arg[256], *out, *err;
  int refusals = 0;
  (void)state;
  for (int i = 0; i < lithd_opt_count; i++) {
    const lithd_opt *r = &lithd_opt_table[i];
    const char *extra[] = {option_arg(r, arg, sizeof arg), NULL};
    for (size_t m = 0; m < N_MODES; m++) {
      int rc;
      if ((r->modes & modes[m].mode) != 0)
        continue;
      if (!expected_refusal(r->name, modes[m].mode)) {
        print_error("--%s is refused in the mode of %s: not in refused[] (a change of behaviour?)\n", r->name,
                    modes[m].args[0]);
        fail();
      }
      args_in(m, extra, v);
      rc = parse(v, &out, &err);
      if (rc != 2 || !names(err, r->name)) {
        print_error("%s in the mode of %s: rc %d (want 2), stderr: %s(want it named)\n", arg,
                    modes[m].args[0], rc, err);
        fail();
      }
      free(out);
      free(err);
      refusals++;
      if (r->key == NULL)
        continue;
      config_line(r);
      args_in(m, cfg, v);
      rc = parse(v, &out, &err);
      if (rc != 2 || !names(err, r->name)) {
        print_error("config \"%s\" in the mode of %s: rc %d (want 2), stderr: %s(want it named)\n", r->key,
                    modes[m].args[0], rc, err);
        fail();
      }
      free(out);
      free(err);
    }
  }
  assert_int_equal(refusals, (int)(sizeof refused / sizeof refused[0]));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_rows_are_whole),
      cmocka_unit_test(test_help_shows_every_row),
      cmocka_unit_test(test_config_file_takes_every_key),
      cmocka_unit_test(test_command_line_takes_every_row),
      cmocka_unit_test(test_refused_where_the_table_says),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
