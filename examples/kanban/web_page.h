/*
 * web_page — everything the kanban server sends that a person looks at: the
 * HTML pages (from the templates in assets/, embedded in the binary), the
 * board as JSON for the page's script, and the static files.
 *
 * Why templates plus C: the page skeletons are plain HTML files a designer
 * can edit; the repeated parts (boards, lists, cards) are rendered here with
 * every text escaped. The JSON of a board is what board.js renders from, with
 * the same markup as web_board_lists, so the first paint (server) and every
 * later one (script) look the same.
 *
 * Every function returns a malloc'd NUL-terminated string (the caller frees
 * it) or NULL when out of memory.
 */
#ifndef KANBAN_WEB_PAGE_H
#define KANBAN_WEB_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include "board.h"

/* An embedded file (assets/), from the generated web_assets_gen.c. */
typedef struct web_asset {
  const char *name;          /* "app.css" */
  const unsigned char *data; /* NUL-terminated after len bytes */
  size_t len;
} web_asset;

extern const web_asset web_assets[];    /* ends with name NULL */
extern const char web_assets_version[]; /* a checksum of them all, for ?v= */

const web_asset *web_asset_find(const char *name);
/* The Content-Type for an asset's name (by extension). */
const char *web_asset_type(const char *name);

/* Who is looking (NULL: nobody signed in). */
typedef struct web_viewer {
  int64_t user_id;
  const char *name;
} web_viewer;

/* The sign-in page. `error` (NULL: none) is shown above the forms, `name`
 * refills the sign-in name field. */
char *web_page_signin(const char *error, const char *name);

/* The list of `v`'s boards with a form for a new one (op: a fresh op id). */
char *web_page_boards(const web_viewer *v, const kb_board_summary *boards, int n, const char *error,
                      const char *op);

/* A whole board page. */
char *web_page_board(const web_viewer *v, const kb_board *b);

/* The board as JSON: {"id","title","version","me","members":[{"id","name"}],
 * "lists":[{"id","title","cards":[{"id","title","description","version"}]}]}
 * (archived lists and cards left out). */
char *web_board_json(const kb_board *b, int64_t me);

/* A short page for an error status (404, 403, ...) with a way back. */
char *web_page_error(const web_viewer *v, int status, const char *message);

#endif
