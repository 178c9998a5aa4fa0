#!/usr/bin/env bash
# Builds sprofil and runs every test (unit, integration, interop) in build/.
# In CI (CI=true), or with SPROFIL_ALL_BUILDS=1, it then builds the two other kinds of build
# once each and runs the suite there too: Release (what a user builds) and Debug with
# AddressSanitizer and UBSan on the host side (cmake/SprofilSanitize.cmake). The fuzz run
# (a clang libFuzzer build of its own, under ASan/UBSan whatever the build type) runs once, in
# the main build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/check-format.sh
run_suite() {
  (cd "$1" && ctest --output-on-failure -j "$(nproc)" --timeout 600 "${@:2}")
}
if [ "${CI:-}" = true ] || [ -n "${SPROFIL_ALL_BUILDS:-}" ]; then
  echo "== Release build (build-release/)"
  SPROFIL_BUILD_TYPE=Release scripts/build.sh build-release -DSPROFIL_BUILD_BENCH=OFF
  run_suite build-release -LE fuzz
  echo "== Debug build with ASan and UBSan (build-asan/)"
  SPROFIL_BUILD_TYPE=Debug scripts/build.sh build-asan -DSPROFIL_SANITIZE=ON \
    -DSPROFIL_BUILD_BENCH=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_suite build-asan \
    -LE fuzz
  echo "== RelWithDebInfo build (build/)"
fi
# The main build last, so that its result closes the log.
run_suite build
