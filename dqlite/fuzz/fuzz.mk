# dqlite/fuzz/fuzz.mk — the libFuzzer harnesses of the dqlite client's
# response decoding (dqlite/fuzz/fuzz_dq_response.c over dqlite/wire.c; and
# fuzz_dq_files.c, DUMP's FILES body decoded in pieces): a node is not
# trusted to send well-formed frames.
#
# Included by the main Makefile after tools/lithd/fuzz/fuzz.mk (FUZZ_*
# variables, `make fuzz`); seeds in dqlite/fuzz/corpus/dq_response, real
# answers of a lith-node captured with dqlite/fuzz/capture.py.

FUZZ_SEEDS += dqlite/fuzz/corpus/dq_response dqlite/fuzz/corpus/dq_files

$(FUZZ_B)/fuzz_dq_response: dqlite/fuzz/fuzz_dq_response.c dqlite/wire.c dqlite/wire.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Idqlite -o $@ $< dqlite/wire.c

# dq_files: seeds made by hand (a piece size byte, an early-end byte, a
# FILES body: two files, empty ones, a page and a WAL frame, trailing
# bytes, a count that lies, a short body).
$(FUZZ_B)/fuzz_dq_files: dqlite/fuzz/fuzz_dq_files.c dqlite/wire.c dqlite/wire.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Idqlite -o $@ $< dqlite/wire.c
