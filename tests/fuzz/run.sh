#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz (clang, ASan + UBSan), makes a seed corpus from
# synthetic archives, and runs each target for SECONDS (default 60). Exits non-zero when any target
# finds a crash, a leak, a sanitizer report, an allocation over the limit or a timeout; the
# reproducer is left in build-fuzz/artifacts/.
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     targets: archive index symbols chunk roundtrip (default: all)
# The targets link a torch-free core (tests/fuzz/CMakeLists.txt), so no libtorch is compiled here.
set -euo pipefail

seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(archive index symbols chunk roundtrip)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build-fuzz"
jobs="${TEZIP_FUZZ_JOBS:-2}"

# Without libtorch (clang 14 cannot compile its headers) and without the Python module: the core is
# torch-free, and PredNet archives are refused with a message, which the targets exercise too.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DTEZIP_FUZZ=ON -DTEZIP_TORCH=OFF -DTEZIP_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fuzzers=()
for t in "${targets[@]}"; do fuzzers+=("fuzz_$t"); done
cmake --build "$build" -j"$jobs" --target fuzz_seeds "${fuzzers[@]}"

seeds="$build/seeds"
rm -rf "$seeds"
# Leak checking is off for the seed maker only: it is a short-lived tool, not a target.
ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz/fuzz_seeds" "$seeds"

mkdir -p "$build/artifacts"
status=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus" "$seeds/$t"  # the round trip has no seeds: any 10 bytes are a valid input
  log="$build/fuzz_$t.log"
  echo "== fuzz_$t for ${seconds}s (log: $log)"
  set +e
  "$build/tests/fuzz/fuzz_$t" "$corpus" "$seeds/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 \
    -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [ $rc -ne 0 ]; then
    status=1
    summary+=("fuzz_$t: FAILED (exit $rc), see $log and $build/artifacts/")
    grep -m1 -E 'ERROR|SUMMARY|terminate called|runtime error' "$log" || true
  else
    summary+=("fuzz_$t: ok, ${execs:-?} runs, ${speed:-?} exec/s, ${cov:-cov: ?}")
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
