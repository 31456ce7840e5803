#!/bin/sh
# The systemd units as `make install` installs them (tools/units.mk). Run
# by `make test` in its scratch directory:
#
#   test_units.sh SRC B SANITIZE
#
# `make install DESTDIR=./dest PREFIX=/opt/lith` (of the build B, which
# make test built first), then for each unit: installed, mode 0644, every
# @NAME@ filled in, ExecStart naming /opt/lith/bin (no /usr/local), the
# program it names installed; and `systemd-analyze verify` clean on it. The
# units name /opt/lith, which is not on this machine: verify checks that
# each ExecStart exists, so the units are verified as copies with /opt/
# read as ./dest/opt/ (the paths then resolve into the install; the
# Litestream binary, not lith's, is a stub there). verify exits 0 on a
# unit it warns about (an unknown key is "ignoring"), so any output fails a
# test too; and a unit broken on purpose (a misspelt key, a missing
# program) must fail it, or the check proves nothing. The users the units
# run as are made by systemd-sysusers from the installed lith.conf, into a
# scratch root. Then `make uninstall` removes every file of them.
#
# Needs systemd-analyze and systemd-sysusers (Debian's systemd: make deps
# installs it); without them it says so and skips. Closes with cmocka's
# lines, which tools/run-tests.sh adds up.
set -u
src=$1
b=$2
sanitize=$3
here=$(pwd)
dest=$here/dest
n_ok=0
n_bad=0
check() { # check WHAT COMMAND...: one test
  what=$1
  shift
  if "$@"; then
    echo "[       OK ] $what"
    n_ok=$((n_ok + 1))
  else
    echo "[  FAILED  ] $what"
    n_bad=$((n_bad + 1))
  fi
}
finish() {
  echo "[  PASSED  ] $n_ok test(s)."
  if [ "$n_bad" -gt 0 ]; then
    echo "[  FAILED  ] $n_bad test(s)"
    exit 1
  fi
  exit 0
}

for cmd in systemd-analyze systemd-sysusers; do
  if ! command -v $cmd >/dev/null; then
    echo "test_units: SKIPPED: no $cmd on this machine (Debian's systemd package; make deps installs it)"
    finish
  fi
done

units="lithd.service lithd-litestream.service lith-node@.service"
unitdir=$dest/opt/lith/lib/systemd/system
# The make of `make test` runs this one: its jobserver is not ours.
unset MAKEFLAGS MFLAGS MAKELEVEL
rm -rf "$dest" verify broken sysroot
make -C "$src" --no-print-directory install B="$b" SANITIZE="$sanitize" DESTDIR="$dest" PREFIX=/opt/lith \
  LITESTREAM=/opt/litestream/bin/litestream >install.log 2>&1
status=$?
check "make install DESTDIR=$dest PREFIX=/opt/lith (exit $status)" [ "$status" -eq 0 ]
[ "$status" -eq 0 ] || {
  tail -20 install.log
  finish
}

# mode of $1 (GNU stat)
mode() { stat -c %a "$1"; }
# the program of the line "$2=..." of unit $1, without its arguments
program() { sed -n "s/^$2=\([^ ]*\).*/\1/p" "$1"; }
for u in $units; do
  f=$unitdir/$u
  check "$u installed in \$PREFIX/lib/systemd/system, mode 644" [ -f "$f" ] && [ "$(mode "$f")" = 644 ]
  check "$u: no @NAME@ left, no /usr/local" sh -c "! grep -v '^#' '$f' | grep -n -e '@[A-Z_]*@' -e /usr/local"
done
check "lithd.service runs /opt/lith/bin/lithd" [ "$(program "$unitdir/lithd.service" ExecStart)" = /opt/lith/bin/lithd ]
check "lith-node@.service runs /opt/lith/bin/lith-node" \
  [ "$(program "$unitdir/lith-node@.service" ExecStart)" = /opt/lith/bin/lith-node ]
check "lithd-litestream.service runs \$(LITESTREAM)" \
  [ "$(program "$unitdir/lithd-litestream.service" ExecStart)" = /opt/litestream/bin/litestream ]
for p in lithd lith-node; do
  check "$p is installed where the units run it" [ -x "$dest/opt/lith/bin/$p" ]
done

# The copies verified: /opt/ read as $dest/opt/; Litestream a stub.
mkdir -p verify "$dest/opt/litestream/bin"
printf '#!/bin/sh\nexit 0\n' >"$dest/opt/litestream/bin/litestream"
chmod 755 "$dest/opt/litestream/bin/litestream"
for u in $units; do
  sed "s|/opt/|$dest/opt/|g" "$unitdir/$u" >"verify/$u"
done
# verify UNIT-FILE: its output (verify's warnings and errors) and exit code
# in verify.out; 0 when clean (exit 0, nothing said)
verify() {
  systemd-analyze verify "$1" >verify.out 2>&1
  s=$?
  if [ "$s" -ne 0 ] || [ -s verify.out ]; then
    echo "systemd-analyze verify $1: exit $s"
    cat verify.out
    return 1
  fi
  return 0
}
for u in $units; do
  check "systemd-analyze verify $u" verify "verify/$u"
done
# ... and it sees a broken one: a misspelt key (a warning, exit 0), a
# program not installed (an error).
unclean() { ! verify "$1" >/dev/null; }
mkdir -p broken
sed 's/^KillSignal=/KilSignal=/' verify/lithd.service >broken/lithd.service
check "a misspelt key fails the check" unclean broken/lithd.service
sed "s|$dest/opt/lith/bin/lith-node|$dest/opt/lith/bin/lith-nod|" "verify/lith-node@.service" >"broken/lith-node@.service"
check "a program not installed fails the check" unclean "broken/lith-node@.service"
check "... saying which" grep -q "lith-nod is not executable" verify.out

# The users the units name, made from the installed lith.conf.
mkdir -p sysroot/etc
systemd-sysusers --root="$here/sysroot" "$dest/opt/lith/lib/sysusers.d/lith.conf" >sysusers.out 2>&1
status=$?
check "systemd-sysusers on \$PREFIX/lib/sysusers.d/lith.conf (exit $status)" [ "$status" -eq 0 ]
for u in $units; do
  user=$(sed -n 's/^User=//p' "$unitdir/$u")
  check "$u runs as $user, a user lith.conf makes" grep -q "^$user:" sysroot/etc/passwd
done

# A path with a space: refused before anything is made (make cuts it in
# two: install -d made ./b/lib/... in the current directory).
rm -rf spaced b
make -C "$src" --no-print-directory install B="$b" SANITIZE="$sanitize" DESTDIR="$here/spaced" \
  "PREFIX=/opt/a b" >spaced.log 2>&1
status=$?
check "make install PREFIX='/opt/a b' fails (exit $status)" [ "$status" -ne 0 ]
check "... saying why" grep -q "a space in DESTDIR, PREFIX" spaced.log
check "... and makes nothing" sh -c "[ ! -e '$here/spaced' ] && [ ! -e '$src/b' ] && [ ! -e b ]"

make -C "$src" --no-print-directory uninstall B="$b" SANITIZE="$sanitize" DESTDIR="$dest" PREFIX=/opt/lith \
  >uninstall.log 2>&1
left=$(find "$dest" -type f ! -path "$dest/opt/litestream/*" | sed "s|^$dest||")
check "make uninstall leaves no file${left:+ (left: $left)}" [ -z "$left" ]
finish
