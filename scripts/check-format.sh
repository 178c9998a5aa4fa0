#!/usr/bin/env bash
# Fails when any C or C++ source differs from clang-format's output.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.cpp' '*.h' '*.hpp' 2>/dev/null || true)
[ -n "$files" ] || exit 0
bad=0
for f in $files; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then echo "not clang-formatted: $f"; bad=1; fi
done
exit $bad
