# tools/docs.mk — the documentation's shell examples, run.
#
# tools/test-docs.py runs every ```sh block of DOCS_TESTED in a scratch
# directory with the built programs on PATH and compares what each prints
# with its `#>` lines (the format: the script's opening comment). Its own
# test, tools/test/docs.md, holds it to that: blocks that must pass, and
# blocks marked must-fail. Every document is tested: the README, each page
# of docs/ (a new page joins by being there), the kanban and the clients'
# READMEs.
#
#   DOCS_TEST_BIN   the script tools/run-tests.sh runs, to add to TEST_BIN
#   DOCS_PREFIX     lith as `make install PREFIX=` installs it, for the
#                   examples that build against the library (pkg-config);
#                   always the plain build's, so that a program a reader
#                   compiles links in every variant
#   DOCS_DEBS       what it and the examples need (make deps installs them),
#   DOCS_CMDS       the commands make deps looks for, DOCS_CHECK the rest
#   make test-docs  the same, alone

DOCS_TESTED   := tools/test/docs.md README.md $(sort $(wildcard docs/*.md)) examples/kanban/README.md \
                 clients/python/README.md clients/node/README.md
DOCS_TEST_BIN := $(B)/tools/test/test_docs
DOCS_DEBS     := python3 python3-venv curl
# where make deps-litestream puts litestream (docs/litestream.md needs it),
# and make deps-hrana's drizzle-kit (docs/ha.md, "Migrating on --dqlite")
DOCS_LITESTREAM_DIR := build/litestream/node_modules/@flydotio/litestream-linux-x64
DOCS_NPM_BIN_DIR    := build/hrana/node_modules/.bin
DOCS_CMDS     := python3 curl
# and what else make deps checks: the Python examples make a venv (Debian's
# python3 needs python3-venv for it); the Node examples run where node is
# (`needs node`: Debian's nodejs, which .ci/run installs)
DOCS_CHECK    := python3 -c 'import ensurepip, venv' 2>/dev/null
DOCS_PREFIX   := build/default/docs-prefix

# In the plain build the install's files are prerequisites, so that the
# make below finds them built (it must not build them beside this one).
$(DOCS_TEST_BIN): tools/test-docs.py $(DOCS_TESTED) $(LITHD_BIN) $(LITH_CLI_BIN) $(KANBAN_BIN) $(LITH_NODE_BIN) \
                  $(if $(SANITIZE),,$(LIBS) $(PCS))
	@mkdir -p $(dir $@)
	@$(MAKE) --no-print-directory install SANITIZE= B=build/default PREFIX="$(abspath $(DOCS_PREFIX))" DESTDIR= > /dev/null
	@printf '#!/bin/sh\nexec python3 "%s" --bin "%s" --path "%s" --path "%s" --src "%s" --prefix "%s" %s\n' \
	  "$(abspath tools/test-docs.py)" "$(abspath $(B))" "$(abspath $(DOCS_LITESTREAM_DIR))" \
	  "$(abspath $(DOCS_NPM_BIN_DIR))" "$(abspath .)" \
	  "$(abspath $(DOCS_PREFIX))" "$(abspath $(DOCS_TESTED))" > $@
	@chmod +x $@

test-docs: $(DOCS_TEST_BIN)
	@sh tools/run-tests.sh $(B) $(DOCS_TEST_BIN)

.PHONY: test-docs
