#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds a consumer against it, once with
# find_package(sprofil) and once with pkg-config; both must build, link and run.
set -euo pipefail
build=$1 src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir "$tmp/app"
cp "$src/consumer.cpp" "$tmp/app/"
cp "$src/CMakeLists.consumer.txt" "$tmp/app/CMakeLists.txt"
cmake -S "$tmp/app" -B "$tmp/app/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/app/b" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app/b/consumer" | grep -q "HP-UX profcnt max 65536"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs sprofil)
g++ -std=c++20 "$src/consumer.cpp" $flags -o "$tmp/pc"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc" | grep -q "HP-UX profcnt max 65536"
# The installed tool finds the installed runtime.
"$tmp/prefix/bin/sprofil" record -F 200 -o "$tmp/p.sprof" -- true 2>/dev/null
test -s "$tmp/p.sprof"
echo "install: find_package, pkg-config and the installed tool all work"
