#!/usr/bin/env bash
# Usage: test_man.sh BUILD_DIR SOURCE_DIR
# Every expected page is in BUILD_DIR/share/man, renders with `man -l` and groff without a
# warning, has NAME and SYNOPSIS sections, carries the project's version in its header (the
# version in CMakeLists.txt's project()), and `cmake --install --component doc` installs that
# copy under share/man/man1 and man3.
set -u
build=$1
src=$2
fail=0
pages="man1/sprofil.1 man1/sprofil-record.1 man1/sprofil-report.1 man1/sprofil-merge.1
  man1/sprofil-serve.1 man1/sprofil-fetch.1 man1/sprofil-gperf.1 man1/sprofil-top.1
  man1/sprofil-list.1 man1/sprofil-diff.1 man1/sprofil-annotate.1
  man3/sprofil.3 man3/hpux_sprofil.3 man3/sysv_profil.3 man3/bsd_profil.3 man3/tru64_profil.3
  man3/aix_profil.3 man3/osProfileInit.3"
for p in $pages; do
  f=$build/share/man/$p
  if [ ! -f "$f" ]; then
    echo "FAIL: $f missing"
    fail=1
    continue
  fi
  out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" 2>"$build/man_warnings.txt")
  warn=$(cat "$build/man_warnings.txt")
  gwarn=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww "$f" 2>&1 >/dev/null)
  if [ -n "$warn$gwarn" ]; then
    echo "FAIL: $p renders with warnings: $warn $gwarn"
    fail=1
  fi
  for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
    if ! grep -q "^$section\$" <<<"$out"; then
      echo "FAIL: $p has no $section section"
      fail=1
    fi
  done
  # The .TH line names the version CMake stamped in (no placeholder left).
  version=$(sed -n 's/^project(sprofil VERSION \([0-9.]*\).*/\1/p' "$src/../CMakeLists.txt")
  if [ -z "$version" ] || ! grep -q "^\.TH .*\"sprofil $version\"" "$f"; then
    echo "FAIL: $p does not carry the version ${version:-?} in its .TH line"
    fail=1
  fi
  # The page's own name is in its NAME line.
  base=$(basename "$p")
  base=${base%.*}
  if ! grep -A1 '^NAME$' <<<"$out" | grep -q -- "${base/-/.}"; then
    echo "FAIL: $p does not name $base"
    fail=1
  fi
done
rm -f "$build/man_warnings.txt"

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
if ! cmake --install "$build" --prefix "$prefix" --component doc >/dev/null; then
  echo "FAIL: cmake --install --component doc"
  fail=1
fi
for p in $pages; do
  if [ ! -f "$prefix/share/man/$p" ]; then
    echo "FAIL: not installed: share/man/$p"
    fail=1
  elif ! cmp -s "$prefix/share/man/$p" "$build/share/man/$p"; then
    echo "FAIL: installed share/man/$p differs from the build's copy"
    fail=1
  fi
done
[ $fail = 0 ] && echo "all $(wc -w <<<"$pages") pages render without warnings and install"
exit $fail
