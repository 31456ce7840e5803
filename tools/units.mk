# tools/units.mk — the systemd units `make install` installs, and their test.
#
# The units are templates (*.service.in): install-units writes each with
# its paths filled in by sed, at install time, so that PREFIX and DESTDIR
# apply as to every other file (nothing is built for them: `make` has
# nothing to do):
#
#   @BINDIR@      $(PREFIX)/bin, where lithd and lith-node are installed
#   @LITESTREAM@  LITESTREAM, the Litestream binary (not lith's; Litestream's
#                 .deb puts it in /usr/bin)
#
#   UNITDIR       where the units go, default $(PREFIX)/lib/systemd/system
#                 (systemd reads /usr/local/lib/systemd/system; with another
#                 PREFIX give UNITDIR=/etc/systemd/system, or `systemctl link`)
#   SYSUSERSDIR   where lith.conf goes, the units' users (sysusers.d(5)),
#                 default $(PREFIX)/lib/sysusers.d
#
#   UNITS_TEST_BIN  tools/test/test_units.sh, to add to TEST_BIN: it runs
#                   `make install DESTDIR=... PREFIX=/opt/lith` and
#                   `systemd-analyze verify` on each unit installed
#   UNITS_DEBS      what it needs, UNITS_CMDS the commands make deps looks for

UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
LITESTREAM  ?= /usr/bin/litestream
UNIT_SRC    := tools/lithd/lithd.service.in tools/lithd/lithd-litestream.service.in \
               tools/lith-node/lith-node@.service.in
UNIT_NAMES  := $(notdir $(UNIT_SRC:.in=))
UNITS_DEBS  := systemd
UNITS_CMDS  := systemd-analyze systemd-sysusers
UNITS_TEST_BIN := $(B)/tools/test/test_units

# make splits its words at spaces: a path with one is cut in two (`make
# install PREFIX="/opt/a b"` made ./b/lib/... in the current directory, then
# failed), so it is refused before anything is built or made.
ifneq ($(filter install install-units uninstall uninstall-units,$(MAKECMDGOALS)),)
ifneq ($(words $(DESTDIR)$(PREFIX)$(UNITDIR)$(SYSUSERSDIR)),1)
$(error a space in DESTDIR, PREFIX, UNITDIR or SYSUSERSDIR: make cannot install there)
endif
endif

# A template's @NAME@ left unfilled fails the install (a new one must be
# added here).
install-units:
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	@set -e; for f in $(UNIT_SRC); do \
	  out=$(DESTDIR)$(UNITDIR)/$$(basename $$f .in); \
	  echo "sed $$f > $$out"; \
	  sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@LITESTREAM@|$(LITESTREAM)|g' $$f > $$out.tmp; \
	  if grep -n '@[A-Z_]*@' $$out.tmp; then echo "install-units: $$f: unfilled" >&2; rm -f $$out.tmp; exit 1; fi; \
	  chmod 644 $$out.tmp && mv $$out.tmp $$out; \
	done
	install -m 644 tools/lith.sysusers $(DESTDIR)$(SYSUSERSDIR)/lith.conf

uninstall-units:
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNIT_NAMES)) $(DESTDIR)$(SYSUSERSDIR)/lith.conf

# The test installs what this build built (B, SANITIZE): they are its
# prerequisites, so that its `make install` builds nothing.
$(UNITS_TEST_BIN): tools/test/test_units.sh $(UNIT_SRC) tools/lith.sysusers tools/units.mk \
                   $(LIBS) $(LITHD_BIN) $(LITH_CLI_BIN) $(LITH_NODE_BIN)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec sh "%s" "%s" "%s" "%s"\n' "$(abspath tools/test/test_units.sh)" \
	  "$(abspath .)" "$(B)" "$(SANITIZE)" > $@
	@chmod +x $@

.PHONY: install-units uninstall-units
