# tools/test/runner.mk — tools/run-tests.sh's own test (its time limit,
# tools/test/test_runner.sh), run by `make test` as one "test binary": a
# two-line script that runs it with the runner's path. It prints cmocka's
# closing lines, which the runner adds up.
#
#   RUNNER_TEST_BIN   the script, to add to TEST_BIN

RUNNER_TEST_BIN := $(B)/tools/test/test_runner

$(RUNNER_TEST_BIN): tools/test/test_runner.sh tools/run-tests.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s"\n' "$(abspath tools/test/test_runner.sh)" \
	  "$(abspath tools/run-tests.sh)" > $@
	@chmod +x $@
