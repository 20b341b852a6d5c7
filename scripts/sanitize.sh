#!/usr/bin/env bash
# Builds with AddressSanitizer + UndefinedBehaviorSanitizer (LATHE_SANITIZE=ON) into
# build-asan/ and runs the test suite there. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-asan
if [ ! -f $B/build.ninja ]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATHE_SANITIZE=ON -DLATHE_BENCH=OFF
fi
cmake --build $B -j "$(nproc)"
cd $B
LSAN_OPTIONS=suppressions=$PWD/../scripts/lsan.supp ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(nproc)" "$@"
