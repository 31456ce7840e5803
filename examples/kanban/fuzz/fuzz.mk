# examples/kanban/fuzz/fuzz.mk — libFuzzer harnesses for what the kanban
# server reads from clients, and for its model.
#
#   kanban_form     form bodies: sign-in, sign-up, new board (srv_util.c,
#                   the sign-in page, the throttle)
#   kanban_action   a board action's path and JSON body (srv_util.c)
#   kanban_request  path, Cookie, Host/Origin/Referer, Content-Type
#                   (srv_util.c, auth_session.c; fake_req.c stands in for
#                   the HTTP layer's request)
#   kanban_board    sequences of actions on a real database (board.c,
#                   board_read.c), the board read back and rendered
#
# Included by the main Makefile after tools/lithd/fuzz/fuzz.mk (FUZZ_*
# variables, `make fuzz`) and examples/kanban/server.mk (KANBAN_ASSETS);
# seeds in examples/kanban/fuzz/corpus/NAME.

KANBAN_FUZZ_NAMES := kanban_form kanban_action kanban_request kanban_board
FUZZ_SEEDS += $(addprefix examples/kanban/fuzz/corpus/,$(KANBAN_FUZZ_NAMES))

KANBAN_FUZZ_FLAGS = $(FUZZ_FLAGS) -Iexamples/kanban -Iexamples/kanban/fuzz -Ihttp \
                    $(shell pkg-config --cflags jansson libsodium libuv 2>/dev/null)
KANBAN_FUZZ_LIBS  = $(shell pkg-config --libs jansson libsodium 2>/dev/null) $(FUZZ_LIBS)
KANBAN_FUZZ_GEN  := $(FUZZ_B)/kanban/web_assets_gen.c
KANBAN_FUZZ_DEPS  = examples/kanban/fuzz/fake_req.c examples/kanban/fuzz/fake_req.h \
                    examples/kanban/fuzz/check.h examples/kanban/srv_util.c \
                    $(KANBAN_SRV_HDRS) $(KANBAN_BOARD_HDRS) $(HTTP_HDRS)
KANBAN_FUZZ_SRC   = examples/kanban/fuzz/fake_req.c examples/kanban/srv_util.c

# The pages' templates, embedded as the server embeds them.
$(KANBAN_FUZZ_GEN): examples/kanban/web_embed.sh $(addprefix examples/kanban/assets/,$(KANBAN_ASSETS))
	@mkdir -p $(dir $@)
	sh examples/kanban/web_embed.sh $@ examples/kanban/assets $(KANBAN_ASSETS)

$(FUZZ_B)/fuzz_kanban_form: examples/kanban/fuzz/fuzz_form.c examples/kanban/auth_throttle.c \
                            examples/kanban/web_page.c $(KANBAN_FUZZ_GEN) $(KANBAN_FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(KANBAN_FUZZ_FLAGS) -o $@ $< examples/kanban/auth_throttle.c \
	  examples/kanban/web_page.c $(KANBAN_FUZZ_GEN) $(KANBAN_FUZZ_SRC) $(KANBAN_FUZZ_LIBS)

$(FUZZ_B)/fuzz_kanban_action: examples/kanban/fuzz/fuzz_action.c $(KANBAN_FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(KANBAN_FUZZ_FLAGS) -o $@ $< $(KANBAN_FUZZ_SRC) $(KANBAN_FUZZ_LIBS)

# auth_session.c takes lith_clock_ms from the library.
$(FUZZ_B)/fuzz_kanban_request: examples/kanban/fuzz/fuzz_request.c examples/kanban/auth_session.c \
                               examples/kanban/web_page.c $(KANBAN_FUZZ_GEN) $(KANBAN_FUZZ_DEPS) \
                               $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(KANBAN_FUZZ_FLAGS) -o $@ $< examples/kanban/auth_session.c \
	  examples/kanban/web_page.c $(KANBAN_FUZZ_GEN) $(KANBAN_FUZZ_SRC) $(LIB_SRC) $(KANBAN_FUZZ_LIBS)

$(FUZZ_B)/fuzz_kanban_board: examples/kanban/fuzz/fuzz_board.c $(KANBAN_BOARD_SRC) \
                             examples/kanban/web_page.c $(KANBAN_FUZZ_GEN) $(KANBAN_FUZZ_DEPS) \
                             $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(KANBAN_FUZZ_FLAGS) -o $@ $< $(KANBAN_BOARD_SRC) examples/kanban/web_page.c \
	  $(KANBAN_FUZZ_GEN) $(KANBAN_FUZZ_SRC) $(LIB_SRC) $(KANBAN_FUZZ_LIBS)
