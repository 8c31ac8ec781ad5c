#!/usr/bin/env bash
# Sweeps the choices the CLI's defaults come from (GOP length, quantizer per mode, zstd level) on
# real data, printing archive ratios. Usage: bench/defaults.sh DATASET_DIR... (e.g. .cache/datasets/mire2)
set -euo pipefail
tezip=${TEZIP:-build/tezip}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ratio() { "$tezip" compress "$1" -o "$work/a.tzp" -f -q "${@:2}" && "$tezip" info "$work/a.tzp" | awk '/^raw:/ {print $NF}'; }
for data in "$@"; do
  echo "## $data"
  echo "gop length (lossless, previous):"
  for g in 1 4 8 16 32 64; do printf '  gop %-3s %s\n' "$g" "$(ratio "$data" --gop "$g")"; done
  echo "dynamic windows (lossless, previous, at most 64 frames):"
  for t in 50 100 200 400; do printf '  mse-threshold %-4s %s\n' "$t" "$(ratio "$data" --mse-threshold "$t")"; done
  echo "quantizer per mode (previous, gop 16):"
  for m in "abs 1" "abs 2" "abs 4" "rel 0.01" "absrel 2,0.01" "pwrel 0.05"; do
    set -- $m
    printf '  %-14s linear %s interval %s\n' "$m" "$(ratio "$data" --mode "$1" --bound "$2" --quantizer linear)" \
      "$(ratio "$data" --mode "$1" --bound "$2" --quantizer interval)"
  done
  echo "zstd level (lossless, zstd only):"
  for l in 1 3 9 19; do printf '  level %-3s %s\n' "$l" "$(ratio "$data" --coder zstd --level "$l")"; done
done
