#!/usr/bin/env bash
# Configures and builds sprofil into build/ (build/bin, build/lib).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${SPROFIL_BUILD_TYPE:-RelWithDebInfo}" \
  -DSPROFIL_WERROR=ON >/dev/null
cmake --build build -j "$(nproc)"
