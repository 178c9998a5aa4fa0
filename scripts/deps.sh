#!/usr/bin/env bash
# Installs the Debian packages sprofil needs to build, test and benchmark.
# Idempotent: runs apt-get only when something is missing.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkgconf g++-12 clang-format clang libclang-rt-14-dev
      libdw-dev libelf-dev libdebuginfod-dev zlib1g-dev nlohmann-json3-dev libcli11-dev
      libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev libbenchmark-dev
      binutils ccache golang-go linux-perf google-perftools libgoogle-perftools-dev hyperfine
      groff-base man-db chromium libcpp-httplib-dev libcapstone-dev time
      golang-github-google-pprof-dev nodejs)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "sprofil: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
