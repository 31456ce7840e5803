# examples/kanban/server.mk — the kanban web server, its HTTP test and its
# browser test.
#
# Included by the main Makefile after http/http.mk and examples/kanban/board.mk
# (it uses HTTP_OBJ, HTTP_HDRS, KANBAN_BOARD_OBJ and KANBAN_BOARD_HDRS).
#
#   KANBAN_BIN       the server, $(B)/examples/kanban/kanban (self-contained:
#                    the assets/ files are compiled in by web_embed.sh)
#   KANBAN_TEST_BIN  the HTTP test (test/test_http.c, named test_kanban_http
#                    beside http/'s tests; answers read by http/h1client.c),
#                    to add to TEST_BIN; it spawns
#                    KANBAN_BIN (absolute path compiled in: tests run in a
#                    scratch dir)
#   KANBAN_PKGS, KANBAN_DEBS  what `make deps` checks and installs
#   make test-browser  the headless Chromium test (needs chromium, python3)

KANBAN_PKGS := libh2o libuv jansson sqlite3 libsodium
KANBAN_DEBS := libsodium-dev libjansson-dev libh2o-dev
KANBAN_CFLAGS = $(shell pkg-config --cflags $(KANBAN_PKGS) 2>/dev/null)
KANBAN_LIBS   = $(shell pkg-config --libs $(KANBAN_PKGS) 2>/dev/null)

KANBAN_SRV_SRC  := examples/kanban/server.c examples/kanban/srv_routes.c \
                   examples/kanban/srv_live.c examples/kanban/srv_util.c \
                   examples/kanban/auth_pw.c examples/kanban/auth_session.c \
                   examples/kanban/auth_throttle.c \
                   examples/kanban/web_page.c
KANBAN_SRV_HDRS := $(wildcard examples/kanban/srv_*.h examples/kanban/auth_*.h examples/kanban/web_*.h)
KANBAN_ASSETS   := layout.html signin.html boards.html board.html app.css board.js favicon.svg
KANBAN_GEN      := $(B)/examples/kanban/web_assets_gen.c
KANBAN_BIN      := $(B)/examples/kanban/kanban
KANBAN_TEST_BIN := $(B)/examples/kanban/test/test_kanban_http
KANBAN_TEST_DEF  = -DKANBAN_PATH='"$(abspath $(KANBAN_BIN))"'

$(KANBAN_GEN): examples/kanban/web_embed.sh $(addprefix examples/kanban/assets/,$(KANBAN_ASSETS))
	@mkdir -p $(dir $@)
	sh examples/kanban/web_embed.sh $@ examples/kanban/assets $(KANBAN_ASSETS)

$(KANBAN_BIN): $(KANBAN_SRV_SRC) $(KANBAN_GEN) $(KANBAN_BOARD_OBJ) $(HTTP_OBJ) $(B)/liblith_uv.a $(B)/liblith.a \
               $(HDRS) $(HTTP_HDRS) $(KANBAN_SRV_HDRS) $(KANBAN_BOARD_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp -Iexamples/kanban $(KANBAN_CFLAGS) $(CFLAGS) -o $@ \
	  $(KANBAN_SRV_SRC) $(KANBAN_GEN) $(KANBAN_BOARD_OBJ) $(HTTP_OBJ) $(B)/liblith_uv.a $(B)/liblith.a $(KANBAN_LIBS) $(HTTP_LIBS) $(LDFLAGS)

$(KANBAN_TEST_BIN): examples/kanban/test/test_http.c $(H1C_OBJ) http/h1client.h $(KANBAN_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ihttp $(PKG_CFLAGS) $(TEST_CFLAGS) $(CFLAGS) $(KANBAN_TEST_DEF) -o $@ $< $(H1C_OBJ) \
	  $(shell pkg-config --libs jansson 2>/dev/null) $(TEST_LIBS) $(LDFLAGS)

# Two headless Chromium pages on one board: a card dragged in one appears in
# the other; writes $(B)/examples/kanban/kanban-board.png.
test-browser: $(KANBAN_BIN)
	python3 examples/kanban/test/browser_test.py --server $(KANBAN_BIN) \
	  --out $(B)/examples/kanban

.PHONY: test-browser
