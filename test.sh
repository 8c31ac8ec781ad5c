#!/usr/bin/env bash
# Builds tezip and its tests, then runs the whole suite through ctest.
#   ./test.sh              the default build (with libtorch) in build/
#   ./test.sh --no-torch   the torch-free build (-DTEZIP_TORCH=OFF) in build-notorch/: every test
#                          that does not need libtorch, against a core that never links it
set -euo pipefail
cd "$(dirname "$0")"
build=build
flags=()
if [ "${1:-}" = "--no-torch" ]; then
  build=build-notorch
  flags=(-DTEZIP_TORCH=OFF)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
cmake --build "$build" -j2
ctest --test-dir "$build" --output-on-failure -j2
