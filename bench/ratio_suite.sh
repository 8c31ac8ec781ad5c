#!/bin/bash
# Ratios of tezip on every dataset of datasets/fetch and the bundled samples, lossless and abs 2,
# each archive verified against its input (max error printed). One line per run:
#   LABEL DATA MODE ratio R SECONDS max_error=E
# Usage: bench/ratio_suite.sh LABEL [tezip compress options...]   (e.g. --coder best, --profile max)
# vtest is its first 100 frames (as in docs/defaults.md). Needs build/tezip (or the binary in
# $TEZIP) and datasets/fetch's datasets in .cache/datasets.
set -euo pipefail
cd "$(dirname "$0")/.."
label=${1:-default}
tezip=${TEZIP:-./build/tezip}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/v100"
n=0
for f in $(ls .cache/datasets/vtest | sort); do
  [ $n -lt 100 ] || break
  ln -s "$PWD/.cache/datasets/vtest/$f" "$work/v100/$f"
  n=$((n + 1))
done
for d in .cache/datasets/mire2 .cache/datasets/mmnist/mmnist.npy .cache/datasets/castle "$work/v100" \
         datasets/sample/vtest datasets/sample/mire datasets/sample/castle16; do
  [ -e "$d" ] || { echo "$label $d missing (datasets/fetch)"; continue; }
  for m in lossless "abs --bound 2"; do
    s=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$tezip" compress "$d" -o "$work/x.tzp" -f --mode $m -q -T 2 "$@"
    e=$(date +%s.%N)
    r=$("$tezip" info "$work/x.tzp" | grep -m1 -o "ratio [0-9.]*")
    v=$("$tezip" verify -T 2 "$work/x.tzp" --against "$d" 2>&1 | grep -o "max_error=[0-9]*\|error.*" | head -1)
    name=$d
    [ "$d" = "$work/v100" ] && name="vtest (100 frames)"
    printf "%-8s %-36s %-8s %s %.1fs %s\n" "$label" "$name" "${m%% *}" "$r" "$(echo "$e - $s" | bc)" "$v"
  done
done
