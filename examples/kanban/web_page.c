/*
 * web_page — pages, board JSON and static files (see web_page.h).
 *
 * Design:
 *   - Templates are the embedded .html files of assets/. A template names its
 *     holes as {{key}} (the value is HTML-escaped) or {{{key}}} (the value is
 *     markup made here, inserted as is). A hole without a value is left
 *     empty. Every page is a body template inserted into layout.html.
 *   - Anything that came from a user (names, titles, descriptions) goes
 *     through srv_str_html on its way into HTML, and through jansson into
 *     JSON; the JSON placed inside <script> has every '<' written as \u003c,
 *     so no text can close the script element.
 */
#include "web_page.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "srv_util.h"

/* ---- Assets ------------------------------------------------------------------ */

const web_asset *web_asset_find(const char *name) {
  const web_asset *a;
  for (a = web_assets; a->name != NULL; a++)
    if (strcmp(a->name, name) == 0)
      return a;
  return NULL;
}

const char *web_asset_type(const char *name) {
  const char *dot = strrchr(name, '.');
  if (dot == NULL)
    return "application/octet-stream";
  if (strcmp(dot, ".css") == 0)
    return "text/css; charset=utf-8";
  if (strcmp(dot, ".js") == 0)
    return "text/javascript; charset=utf-8";
  if (strcmp(dot, ".svg") == 0)
    return "image/svg+xml";
  if (strcmp(dot, ".html") == 0)
    return "text/html; charset=utf-8";
  return "application/octet-stream";
}

/* ---- Templates ------------------------------------------------------------------- */

typedef struct kv {
  const char *key;
  const char *value; /* NULL: empty */
} kv;

static const char *lookup(const kv *vals, const char *key, size_t klen) {
  const kv *p;
  for (p = vals; p->key != NULL; p++)
    if (strlen(p->key) == klen && memcmp(p->key, key, klen) == 0)
      return p->value;
  return NULL;
}

/* Render template `name` with vals (ending with key NULL) into out. */
static void render(srv_str *out, const char *name, const kv *vals) {
  const web_asset *a = web_asset_find(name);
  const char *p, *end;
  if (a == NULL) {
    out->failed = 1;
    return;
  }
  p = (const char *)a->data;
  end = p + a->len;
  while (p < end) {
    const char *open = strstr(p, "{{");
    int raw;
    const char *key, *close, *v;
    if (open == NULL) {
      srv_str_add(out, p, (size_t)(end - p));
      break;
    }
    srv_str_add(out, p, (size_t)(open - p));
    raw = open[2] == '{';
    key = open + (raw ? 3 : 2);
    close = strstr(key, raw ? "}}}" : "}}");
    if (close == NULL) { /* not a hole: keep the text */
      srv_str_add(out, open, 2);
      p = open + 2;
      continue;
    }
    v = lookup(vals, key, (size_t)(close - key));
    if (v != NULL) {
      if (raw)
        srv_str_cat(out, v);
      else
        srv_str_html(out, v);
    }
    p = close + (raw ? 3 : 2);
  }
}

static char *finish(srv_str *s) {
  if (s->failed || s->p == NULL) {
    srv_str_free(s);
    return NULL;
  }
  return s->p;
}

/* The top bar's right side for a viewer. */
static void nav(srv_str *s, const web_viewer *v) {
  if (v == NULL)
    return;
  srv_str_cat(s, "<span class=\"who\">Signed in as <strong>");
  srv_str_html(s, v->name);
  srv_str_cat(s, "</strong></span><form method=\"post\" action=\"/signout\">"
                 "<button class=\"link\" type=\"submit\">Sign out</button></form>");
}

/* layout.html around `main`. */
static char *page(const web_viewer *v, const char *title, const char *crumb, const char *main) {
  srv_str out = {0}, navs = {0};
  nav(&navs, v);
  {
    kv vals[] = {{"title", title}, {"v", web_assets_version},
                 {"crumb", crumb}, {"nav", navs.failed ? NULL : navs.p},
                 {"main", main},   {NULL, NULL}};
    render(&out, "layout.html", vals);
  }
  if (navs.failed)
    out.failed = 1;
  srv_str_free(&navs);
  return finish(&out);
}

static void error_box(srv_str *s, const char *error) {
  if (error == NULL)
    return;
  srv_str_cat(s, "<p class=\"error\" role=\"alert\">");
  srv_str_html(s, error);
  srv_str_cat(s, "</p>");
}

char *web_page_signin(const char *error, const char *name) {
  srv_str body = {0}, err = {0};
  char *out = NULL;
  error_box(&err, error);
  {
    kv vals[] = {{"error", err.p}, {"name", name}, {NULL, NULL}};
    render(&body, "signin.html", vals);
  }
  if (!body.failed && !err.failed)
    out = page(NULL, "Sign in", NULL, body.p);
  srv_str_free(&body);
  srv_str_free(&err);
  return out;
}

char *web_page_boards(const web_viewer *v, const kb_board_summary *boards, int n, const char *error,
                      const char *op) {
  srv_str body = {0}, tiles = {0}, err = {0};
  char *out = NULL;
  int i;
  for (i = 0; i < n; i++) {
    srv_str_printf(&tiles, "<a class=\"board-tile\" href=\"/boards/%" PRId64 "\">", boards[i].id);
    srv_str_html(&tiles, boards[i].title);
    srv_str_cat(&tiles, "</a>");
  }
  if (n == 0)
    srv_str_cat(&tiles, "<p class=\"empty\">No boards yet: create one below, or ask a "
                        "colleague to add you to theirs.</p>");
  error_box(&err, error);
  {
    kv vals[] = {{"error", err.p}, {"tiles", tiles.p}, {"op", op}, {NULL, NULL}};
    render(&body, "boards.html", vals);
  }
  if (!body.failed && !tiles.failed && !err.failed)
    out = page(v, "Boards", NULL, body.p);
  srv_str_free(&body);
  srv_str_free(&tiles);
  srv_str_free(&err);
  return out;
}

/* The lists of a board, as board.js renders them. */
static void board_lists(srv_str *s, const kb_board *b) {
  int i, j;
  for (i = 0; i < b->n_lists; i++) {
    const kb_list *l = &b->lists[i];
    int shown = 0;
    if (l->archived)
      continue;
    for (j = 0; j < l->n_cards; j++)
      shown += !l->cards[j].archived;
    srv_str_printf(s,
                   "<section class=\"list\" data-list=\"%" PRId64 "\"><header class=\"list-head\">"
                   "<h2 class=\"list-heading\"><button class=\"list-title\" type=\"button\" "
                   "title=\"Rename or archive the list\">",
                   l->id);
    srv_str_html(s, l->title);
    srv_str_printf(s,
                   "</button></h2><span class=\"count\">%d</span><button class=\"icon-btn list-menu\" "
                   "type=\"button\" aria-label=\"List actions\">&#8943;</button></header>"
                   "<ol class=\"cards\" data-list=\"%" PRId64 "\">",
                   shown, l->id);
    for (j = 0; j < l->n_cards; j++) {
      const kb_card *c = &l->cards[j];
      if (c->archived)
        continue;
      /* The list item stays one (the list says how many cards it holds);
       * inside it the card is a button named by its title. */
      int described = c->description != NULL && c->description[0] != '\0';
      srv_str_printf(s,
                     "<li class=\"card\" draggable=\"true\" data-card=\"%" PRId64 "\" data-version=\"%" PRId64
                     "\"><div class=\"card-open\" role=\"button\" tabindex=\"0\" aria-label=\"",
                     c->id, c->version);
      srv_str_html(s, c->title);
      if (described)
        srv_str_cat(s, " (has a description)");
      srv_str_cat(s, "\"><span class=\"card-title\">");
      srv_str_html(s, c->title);
      srv_str_cat(s, "</span>");
      if (described)
        srv_str_cat(
            s, "<span class=\"card-badge\" title=\"Has a description\" aria-hidden=\"true\">&#9776;</span>");
      srv_str_cat(s, "</div></li>");
    }
    srv_str_cat(s, "</ol><button class=\"add-card\" type=\"button\">+ Add a card</button></section>");
  }
  srv_str_cat(s, "<section class=\"list add-list\"><button class=\"add-list-btn\" type=\"button\">"
                 "+ Add a list</button></section>");
}

static unsigned name_hue(const char *name) {
  unsigned x = 0;
  const unsigned char *p;
  for (p = (const unsigned char *)name; *p; p++)
    x = (x * 31 + *p) % 360;
  return x;
}

/* JSON safe inside <script>: every '<' as \u003c. */
static void script_json(srv_str *s, const char *json) {
  const char *run = json, *p;
  for (p = json; *p; p++) {
    if (*p != '<')
      continue;
    srv_str_add(s, run, (size_t)(p - run));
    srv_str_cat(s, "\\u003c");
    run = p + 1;
  }
  srv_str_add(s, run, (size_t)(p - run));
}

char *web_page_board(const web_viewer *v, const kb_board *b) {
  srv_str body = {0}, lists = {0}, members = {0}, data = {0}, crumb = {0};
  char id[24], me[24];
  char *json = web_board_json(b, v->user_id), *out = NULL;
  int i;

  if (json == NULL)
    return NULL;
  board_lists(&lists, b);
  for (i = 0; i < b->n_members; i++) {
    const char *n = b->members[i].name;
    char two[3] = {n[0], n[0] ? n[1] : '\0', '\0'};
    srv_str_printf(&members, "<span class=\"avatar\" title=\"");
    srv_str_html(&members, n);
    srv_str_printf(&members, "\" style=\"background:hsl(%u,55%%,45%%)\">", name_hue(n));
    srv_str_html(&members, two);
    srv_str_cat(&members, "</span>");
  }
  script_json(&data, json);
  srv_str_cat(&crumb, "<a class=\"crumb\" href=\"/boards\">&larr; All boards</a>");
  snprintf(id, sizeof id, "%" PRId64, b->id);
  snprintf(me, sizeof me, "%" PRId64, v->user_id);
  {
    kv vals[] = {{"board_title", b->title}, {"board_id", id},   {"me", me},
                 {"members", members.p},    {"lists", lists.p}, {"board_json", data.p},
                 {"v", web_assets_version}, {NULL, NULL}};
    render(&body, "board.html", vals);
  }
  if (!body.failed && !lists.failed && !members.failed && !data.failed && !crumb.failed)
    out = page(v, b->title, crumb.p, body.p);
  free(json);
  srv_str_free(&body);
  srv_str_free(&lists);
  srv_str_free(&members);
  srv_str_free(&data);
  srv_str_free(&crumb);
  return out;
}

char *web_board_json(const kb_board *b, int64_t me) {
  json_t *root = NULL, *members, *lists;
  char *out = NULL;
  int i, j;

  root = json_pack("{s:I, s:s, s:I, s:I, s:[], s:[]}", "id", (json_int_t)b->id, "title", b->title, "version",
                   (json_int_t)b->version, "me", (json_int_t)me, "members", "lists");
  if (root == NULL)
    return NULL;
  members = json_object_get(root, "members");
  lists = json_object_get(root, "lists");
  for (i = 0; i < b->n_members; i++)
    if (json_array_append_new(members, json_pack("{s:I, s:s}", "id", (json_int_t)b->members[i].user_id,
                                                 "name", b->members[i].name)) != 0)
      goto out;
  for (i = 0; i < b->n_lists; i++) {
    const kb_list *l = &b->lists[i];
    json_t *jl, *cards;
    if (l->archived)
      continue;
    jl = json_pack("{s:I, s:s, s:[]}", "id", (json_int_t)l->id, "title", l->title, "cards");
    if (jl == NULL || json_array_append_new(lists, jl) != 0)
      goto out;
    cards = json_object_get(jl, "cards");
    for (j = 0; j < l->n_cards; j++) {
      const kb_card *c = &l->cards[j];
      if (c->archived)
        continue;
      if (json_array_append_new(cards,
                                json_pack("{s:I, s:s, s:s, s:I}", "id", (json_int_t)c->id, "title", c->title,
                                          "description", c->description != NULL ? c->description : "",
                                          "version", (json_int_t)c->version)) != 0)
        goto out;
    }
  }
  out = json_dumps(root, JSON_COMPACT);
out:
  json_decref(root);
  return out;
}

char *web_page_error(const web_viewer *v, int status, const char *message) {
  srv_str body = {0};
  char *out;
  srv_str_printf(&body, "<main class=\"page\"><h1>%d</h1><p>", status);
  srv_str_html(&body, message);
  srv_str_cat(&body, "</p><p><a href=\"/\">Back to your boards</a></p></main>");
  if (body.failed) {
    srv_str_free(&body);
    return NULL;
  }
  out = page(v, "Error", NULL, body.p);
  srv_str_free(&body);
  return out;
}
