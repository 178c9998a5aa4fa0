#!/usr/bin/env bash
# Configures and builds sprofil. Default: build/ (build/bin, build/lib), RelWithDebInfo.
#   scripts/build.sh [BUILD_DIR] [extra cmake arguments...]
# SPROFIL_BUILD_TYPE picks another CMake build type. Warnings are errors here.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
dir="${1:-build}"
shift || true
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${SPROFIL_BUILD_TYPE:-RelWithDebInfo}" \
  -DSPROFIL_WERROR=ON "${launcher[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
