# dqlite/fuzz/fuzz.mk — the libFuzzer harness of the dqlite client's
# response decoding (dqlite/fuzz/fuzz_dq_response.c over dqlite/wire.c): a
# node is not trusted to send well-formed frames.
#
# Included by the main Makefile after tools/lithd/fuzz/fuzz.mk (FUZZ_*
# variables, `make fuzz`); seeds in dqlite/fuzz/corpus/dq_response, real
# answers of a lith-node captured with dqlite/fuzz/capture.py.

FUZZ_SEEDS += dqlite/fuzz/corpus/dq_response

$(FUZZ_B)/fuzz_dq_response: dqlite/fuzz/fuzz_dq_response.c dqlite/wire.c dqlite/wire.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Idqlite -o $@ $< dqlite/wire.c
