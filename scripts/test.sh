#!/usr/bin/env bash
# Builds sprofil and runs every test (unit, integration, interop).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/check-format.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 600
