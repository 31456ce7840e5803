# tools/lithd/fuzz/fuzz.mk — libFuzzer harnesses for what lithd reads from
# outside: request bodies (its JSON reader, the statements decoder, the
# statement splitter, Hrana's cursor and pipeline bodies and WebSocket
# messages), bearer JWTs and
# the operator's files (named commands, schema
# steps, the config file).
#
#   make fuzz                  build each with clang (-fsanitize=fuzzer,
#                              address,undefined) and run it FUZZ_SECONDS
#                              (default 60); a crash stops with its input in
#                              build/fuzz/ (make it a regression test)
#   make fuzz FUZZ_SECONDS=10  what .ci/run does
#
# Seeds are committed in tools/lithd/fuzz/corpus/NAME; what the fuzzer finds
# goes to build/fuzz/corpus/NAME (kept between runs, not committed).

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_B       := build/fuzz
# Each harness NAME has its seed corpus in a directory named NAME; other
# fragments (http, kanban, the lith client) append theirs to FUZZ_SEEDS and
# add the rule for $(FUZZ_B)/fuzz_NAME. FUZZ_NAMES and FUZZ_BINS follow.
FUZZ_SEEDS   := $(addprefix tools/lithd/fuzz/corpus/,json batch commands schema config split cursor jwt hranaws)
FUZZ_NAMES    = $(notdir $(FUZZ_SEEDS))
FUZZ_BINS     = $(FUZZ_NAMES:%=$(FUZZ_B)/fuzz_%)
FUZZ_FLAGS    = -g -O1 -std=c11 -D_GNU_SOURCE -Iinclude $(LITHD_INC) \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
                $(PKG_CFLAGS) $(JANSSON_CFLAGS)
FUZZ_LIBS     = $(PKG_LIBS) $(JANSSON_LIBS) -pthread -lm

$(FUZZ_B)/fuzz_json: tools/lithd/fuzz/fuzz_json.c $(LITHD_JSON_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LITHD_JSON_SRC) -lm

$(FUZZ_B)/fuzz_batch: tools/lithd/fuzz/fuzz_batch.c $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(FUZZ_LIBS)

# cursor: a /v3/cursor body (and the same bytes as a pipeline's) through
# request/hrana.c's parsers and lithd_hrana_batch
$(FUZZ_B)/fuzz_cursor: tools/lithd/fuzz/fuzz_cursor.c $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(FUZZ_LIBS)

# hranaws: a Hrana over WebSocket message through request/hrana.c's
# lithd_hrana_ws_parse and what hrana_ws.c builds of it
$(FUZZ_B)/fuzz_hranaws: tools/lithd/fuzz/fuzz_hranaws.c $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(FUZZ_LIBS)

$(FUZZ_B)/fuzz_commands: tools/lithd/fuzz/fuzz_files.c tools/lithd/request/commands.c tools/lithd/request/commands.h tools/lithd/util/textfile.c $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< tools/lithd/request/commands.c tools/lithd/util/textfile.c $(LITHD_SQLJSON_SRC) $(LIB_SRC) $(FUZZ_LIBS)

# schema: the --schema reader, and its rule on a step's own BEGIN or COMMIT
# (sql/txctl.c, split.c)
FUZZ_SCHEMA_SRC = tools/lithd/sql/schema.c tools/lithd/util/textfile.c tools/lithd/sql/txctl.c tools/lithd/sql/split.c
$(FUZZ_B)/fuzz_schema: tools/lithd/fuzz/fuzz_files.c $(FUZZ_SCHEMA_SRC) tools/lithd/sql/schema.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -DFUZZ_SCHEMA -o $@ $< $(FUZZ_SCHEMA_SRC) $(FUZZ_LIBS)

# split: sql/split.c against sqlite3_complete (the oracle: test/split_ref.h)
$(FUZZ_B)/fuzz_split: tools/lithd/fuzz/fuzz_split.c tools/lithd/sql/split.c tools/lithd/sql/split.h tools/lithd/test/split_ref.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Itools/lithd/test -o $@ $< tools/lithd/sql/split.c $(FUZZ_LIBS)

# jwt: request/jwt.c, sqld's tokens: a token, claims, a token signed with
# the harness's key, a key file (libcrypto for Ed25519)
$(FUZZ_B)/fuzz_jwt: tools/lithd/fuzz/fuzz_jwt.c tools/lithd/request/jwt.c tools/lithd/request/jwt.h tools/lithd/util/textfile.c $(LITHD_JSON_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< tools/lithd/request/jwt.c tools/lithd/util/textfile.c $(LITHD_JSON_SRC) $(shell pkg-config --libs libcrypto 2>/dev/null) -lm

$(FUZZ_B)/fuzz_config: tools/lithd/fuzz/fuzz_config.c tools/lithd/options.c tools/lithd/options.h tools/lithd/ops/log.c tools/lithd/ops/log.h tools/lithd/util/textfile.c tools/lithd/util/utf8.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< tools/lithd/options.c tools/lithd/ops/log.c tools/lithd/util/textfile.c tools/lithd/util/utf8.c

.PHONY: fuzz
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_BINS)
	@for seeds in $(FUZZ_SEEDS); do \
	  n=$$(basename $$seeds); \
	  mkdir -p $(FUZZ_B)/corpus/$$n; \
	  echo "== fuzz_$$n for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_B)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(FUZZ_B)/$$n- \
	    $(FUZZ_B)/corpus/$$n $$seeds > $(FUZZ_B)/$$n.log 2>&1; \
	  status=$$?; \
	  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY)' $(FUZZ_B)/$$n.log; \
	  if [ "$$status" != 0 ]; then echo "fuzz_$$n failed ($$status): see $(FUZZ_B)/$$n.log and $(FUZZ_B)/$$n-*"; exit 1; fi; \
	done
