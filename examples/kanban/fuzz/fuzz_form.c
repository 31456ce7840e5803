/*
 * libFuzzer harness: the application/x-www-form-urlencoded bodies the
 * kanban server reads (POST /signin, /signup, and /boards from a page), as
 * the routes read them: srv_auth_form (srv_form_parse, the name and
 * password checks), the new-board form's fields, then the sign-in page the
 * answer renders with the name refilled, and the sign-in throttle keyed by
 * that name.
 *
 * Input: byte 0 picks the route (0 sign-in, 1 sign-up, 2 new board), the
 * rest is the body, copied to a buffer of exactly its length (the HTTP
 * layer's NUL after it is not there, so a parser reading past the length
 * it was given is caught).
 *
 * Oracles: the accepted fields obey the checks (name 1..32 of
 * [A-Za-z0-9_.-], password length), srv_form_get gives each name's first
 * value, every value escapes for HTML reversibly, and the rendered page
 * holds no '<' a text brought in (check.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_pw.h"
#include "auth_throttle.h"
#include "check.h"
#include "srv_util.h"
#include "web_page.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each field's first occurrence is what srv_form_get returns. */
static void check_form(const srv_form *f) {
  int i, k;
  if (f->n < 0 || f->n > SRV_FORM_MAX)
    abort();
  for (i = 0; i < f->n; i++) {
    const char *first = NULL;
    for (k = 0; k <= i && first == NULL; k++)
      if (strcmp(f->name[k], f->name[i]) == 0)
        first = f->value[k];
    if (srv_form_get(f, f->name[i]) != first)
      abort();
    check_html_escape(f->name[i]);
    check_html_escape(f->value[i]);
  }
}

/* The sign-in page as the route answers it, against the same page with
 * the texts as "x". */
static void check_signin_page(const char *error, const char *name) {
  char *page = web_page_signin(error, name);
  char *plain = web_page_signin(error != NULL ? "x" : NULL, name != NULL ? "x" : NULL);
  if (page == NULL || plain == NULL || count_lt(page) != count_lt(plain))
    abort();
  free(page);
  free(plain);
}

/* Failed sign-ins under the name's key, as the route counts them: after
 * the free tries the key waits (at most 5 min), a success forgets it, and
 * other keys (the table holds 4) neither break nor lose it. */
static void check_throttle(const char *name) {
  auth_throttle *t = auth_throttle_new(4);
  char key[96], other[16];
  int64_t now = 1700000000000;
  int i;
  if (t == NULL)
    abort();
  snprintf(key, sizeof key, "n:%s", name);
  for (i = 0; i < 6; i++) {
    if (auth_throttle_wait(t, key, now) != 0)
      abort(); /* 5 free, each a second apart */
    auth_throttle_fail(t, key, 5, now);
    now += 1000;
  }
  auth_throttle_fail(t, key, 5, now);
  for (i = 0; i < 4; i++) { /* the 4th evicts the oldest: not `key`, which failed last */
    snprintf(other, sizeof other, "a:10.0.0.%d", i);
    auth_throttle_fail(t, other, 20, now - 1);
  }
  if (auth_throttle_wait(t, key, now) <= 0 || auth_throttle_wait(t, key, now) > 5 * 60 * 1000)
    abort();
  auth_throttle_forget(t, key);
  if (auth_throttle_wait(t, key, now) != 0)
    abort();
  auth_throttle_free(t);
}

static void signin_form(const char *body, size_t len, int signup) {
  srv_form f;
  const char *name = NULL, *pw = NULL, *why = NULL;
  size_t i, n;
  int st = srv_auth_form(&f, body, len, signup, &name, &pw, &why);

  if (st == 400) {
    check_signin_page("The form was malformed.", NULL);
  } else if (st == 422) {
    if (why == NULL || name == NULL || pw == NULL)
      abort();
    check_form(&f);
    check_signin_page(why, signup ? NULL : name);
  } else if (st == 0) {
    check_form(&f);
    n = strlen(name);
    if (n == 0 || n > KB_NAME_MAX || strlen(pw) > AUTH_PW_MAX || (signup && strlen(pw) < AUTH_PW_MIN))
      abort();
    for (i = 0; i < n; i++)
      if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i]) == NULL)
        abort();
    if (!signup) {
      check_signin_page("Wrong name or password.", name); /* the 401 */
      check_throttle(name);
    }
  } else {
    abort();
  }
  srv_form_free(&f);
}

/* POST /boards from the boards page: title and op. */
static void board_form(const char *body, size_t len) {
  srv_form f;
  if (srv_form_parse(&f, body, len) == 0) {
    check_form(&f);
    (void)srv_form_get(&f, "title");
    (void)srv_form_get(&f, "op");
  }
  srv_form_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *body;
  if (size < 1)
    return 0;
  body = malloc(size - 1 > 0 ? size - 1 : 1);
  if (body == NULL)
    return 0;
  memcpy(body, data + 1, size - 1);
  switch (data[0] % 3) {
  case 0: signin_form(body, size - 1, 0); break;
  case 1: signin_form(body, size - 1, 1); break;
  default: board_form(body, size - 1); break;
  }
  free(body);
  return 0;
}
