# http/fuzz/fuzz.mk — the libFuzzer harness of the HTTP layer's request path
# (http/fuzz/fuzz_http.c): bytes on a connection to a real server, through
# h2o, the framing guard, the router and a few handlers.
#
# Included by the main Makefile after tools/lithd/fuzz/fuzz.mk (FUZZ_*
# variables, `make fuzz`); seeds in http/fuzz/corpus/http.

FUZZ_SEEDS += http/fuzz/corpus/http

$(FUZZ_B)/fuzz_http: http/fuzz/fuzz_http.c $(HTTP_SRC) $(HTTP_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Ihttp $(HTTP_CFLAGS) -o $@ $< $(HTTP_SRC) $(HTTP_LIBS) $(FUZZ_LIBS)
