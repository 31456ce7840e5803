# tools/lith/fuzz/fuzz.mk — the libFuzzer harness of the `lith` client:
# lithd's answer as the CLI reads it (client.c, http/h1client.c) and
# decodes it (main.c).
#
# Included by the main Makefile after tools/lithd/fuzz/fuzz.mk (FUZZ_*
# variables, `make fuzz`); seeds in tools/lith/fuzz/corpus/lith_answer.

FUZZ_SEEDS += tools/lith/fuzz/corpus/lith_answer

$(FUZZ_B)/fuzz_lith_answer: tools/lith/fuzz/fuzz_answer.c tools/lith/main.c tools/lith/client.c \
                            http/h1client.c tools/lithd/util/token.c tools/lithd/util/textfile.c $(LITH_CLI_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Itools/lith -Ihttp $(LITH_CLI_CFLAGS) -o $@ $< tools/lith/client.c \
	  http/h1client.c tools/lithd/util/token.c tools/lithd/util/textfile.c $(LITH_CLI_LIBS) -lm
