#!/usr/bin/env bash
# Builds sprofil, profiles the bundled demo program and prints where its time went.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build/bin/sprofil record -o build/demo.sprof -- build/bin/sprofil-demo
build/bin/sprofil report build/demo.sprof
