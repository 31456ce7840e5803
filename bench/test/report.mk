# bench/test/report.mk — bench/report.py's own test (bench/test/test_report.py:
# the verdict rule, the record and drift, and a recorded run through the whole
# report), run by `make test` as one "test binary": a two-line script. The
# charts are drawn by gnuplot, which make deps installs so the test checks them.
#
#   BENCH_REPORT_TEST_BIN   the script, to add to TEST_BIN
#   BENCH_REPORT_DEBS       what make deps installs for it, BENCH_REPORT_CMDS
#                           the commands make deps looks for

BENCH_REPORT_TEST_BIN := $(B)/bench/test/test_report
BENCH_REPORT_DEBS     := gnuplot-nox
BENCH_REPORT_CMDS     := gnuplot

$(BENCH_REPORT_TEST_BIN): bench/test/test_report.py bench/report.py bench/controls.csv $(wildcard bench/test/recorded/*.jsonl)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec python3 "%s"\n' "$(abspath bench/test/test_report.py)" > $@
	@chmod +x $@
