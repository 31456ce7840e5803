# bench/test/test.mk — the benchmarks' own tests, run by `make test`:
# bench/test/test_harness.c (bench/harness.h's loop, storage and results file,
# cmocka) and bench/report.py's (bench/test/test_report.py: the verdict rule,
# the record and drift, and a recorded run through the whole report, as one
# "test binary": a two-line script). The charts are drawn by gnuplot, which
# make deps installs so the test checks them.
#
#   BENCH_REPORT_TEST_BIN   the two, to add to TEST_BIN
#   BENCH_REPORT_DEBS       what make deps installs for it, BENCH_REPORT_CMDS
#                           the commands make deps looks for

BENCH_REPORT_TEST_BIN := $(B)/bench/test/test_report $(B)/bench/test/test_harness
BENCH_REPORT_DEBS     := gnuplot-nox
BENCH_REPORT_CMDS     := gnuplot

$(B)/bench/test/test_report: bench/test/test_report.py bench/report.py bench/controls.csv $(wildcard bench/test/recorded/*.jsonl)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec python3 "%s"\n' "$(abspath bench/test/test_report.py)" > $@
	@chmod +x $@

# BENCH_CPPFLAGS and BENCH_SQLITE_LIBS: bench/bench.mk's, read when the rule runs.
$(B)/bench/test/test_harness: bench/test/test_harness.c bench/harness.c bench/harness.h bench/common.c bench/common.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) $(TEST_CFLAGS) $(CFLAGS) -o $@ $< bench/harness.c bench/common.c \
	  $(BENCH_SQLITE_LIBS) $(TEST_LIBS) $(LDFLAGS) -lm
