# clients/clients.mk — the Python and Node clients' tests, and lithd's Hrana
# suite with the real libSQL client and Drizzle (tools/lithd/test/hrana, its
# npm modules from make deps-hrana), run by `make test` against the lithd
# just built.
#
# Included by the main Makefile after tools/lithd/lithd.mk (LITHD_BIN). Each
# client's suite is one "test binary" for tools/run-tests.sh: a two-line
# script that runs clients/run-client-tests.sh, which starts the suite with
# LITHD set and prints cmocka's closing lines, so the runner's
# "N passed, N failed" counts the clients' tests too. A suite whose
# interpreter is missing (python3 < 3.9, node < 18) is skipped with the
# reason; so is the Hrana suite without build/hrana/node_modules.
#
#   CLIENT_TEST_BIN   the three scripts, to add to TEST_BIN
#   CLIENT_DEBS       what make deps installs for them, CLIENT_CHECK its test:
#                     Debian's SQLAlchemy for tests/test_sqlalchemy.py (run
#                     with /usr/bin/python3 when PATH's python3 has none)

CLIENT_DEBS  := python3-sqlalchemy
CLIENT_CHECK := dpkg -s python3-sqlalchemy >/dev/null 2>&1

CLIENT_TEST_BIN := $(B)/clients/test_python $(B)/clients/test_node $(B)/clients/test_hrana

CLIENT_PY_SRC   := $(wildcard clients/python/src/lith/*.py clients/python/tests/*.py clients/python/_build/*.py) \
                   clients/python/pyproject.toml clients/test-certs.sh
CLIENT_NODE_SRC := $(wildcard clients/node/*.js clients/node/test/*.js) clients/node/package.json clients/test-certs.sh

$(B)/clients/test_python: clients/run-client-tests.sh $(LITHD_BIN) $(CLIENT_PY_SRC)
$(B)/clients/test_node: clients/run-client-tests.sh $(LITHD_BIN) $(CLIENT_NODE_SRC)
# drizzle.test.js runs docs/hrana.md's Drizzle program; dqlite.test.js a
# lith-node beside lithd (dqlite/dqlite.mk's, named here: included later)
CLIENT_HRANA_SRC := $(wildcard tools/lithd/test/hrana/*.js) docs/hrana.md clients/test-certs.sh
$(B)/clients/test_hrana: clients/run-client-tests.sh $(LITHD_BIN) $(CLIENT_HRANA_SRC) $(B)/tools/lith-node/lith-node
$(CLIENT_TEST_BIN): $(B)/clients/test_%:
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" %s "%s" "%s"\n' "$(abspath clients/run-client-tests.sh)" $* \
	  "$(abspath clients)" "$(abspath $(LITHD_BIN))" > $@
	@chmod +x $@
