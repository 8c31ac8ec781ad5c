#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks, builds tezip, and runs the main job on the bundled
# sample: compress, decompress, verify, print ratio and max error.
#   ./setup.sh              everything
#   ./setup.sh --deps-only  only the Debian packages
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake pkg-config libzstd-dev liblzma-dev libxxhash-dev libopencv-dev libcxxopts-dev catch2
          nlohmann-json3-dev nettle-dev                             # dataset index, SHA-256 of model weights
          libopenmpi-dev openmpi-bin python3-mpi4py                 # batch jobs, the chunk exchange (MPI optional at build time)
          pybind11-dev python3-dev python3-numpy                    # the Python loader module
          python3-pil                                               # bench/loader_python.py: the PNG reader it is measured against
          python3-setuptools python3-wheel python3-pip python3-venv # pip install ./python, offline
          libtorch-dev python3-torch                                # PredNet, libtorch adapter, tezip.torch
          zstd xz-utils ffmpeg clang libclang-rt-14-dev)            # peers in tests/benchmarks, fuzzing
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "${1:-}" = "--deps-only" ] && exit 0

echo "== building"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target tezip

echo "== main job on the bundled sample (datasets/sample)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for seq in vtest mire castle16; do
  for predictor in auto prednet; do
    for mode in "lossless" "abs --bound 2"; do
      label=${mode/ --bound /}
      name="$seq-$predictor-$label"
      # PredNet: the shipped model (models/prednet-small.tzm), exact integer arithmetic.
      ./build/tezip compress "datasets/sample/$seq" -o "$work/$name.tzp" --predictor $predictor --mode $mode -q
      ./build/tezip decompress "$work/$name.tzp" -o "$work/$name" -q
      ./build/tezip verify "$work/$name.tzp" --against "$work/$name" -q  # the files written hold the decoded pixels
      raw=$(./build/tezip info "$work/$name.tzp" | awk '/^raw:/ {print $NF}')
      original=$(./build/tezip verify "$work/$name.tzp" --against "datasets/sample/$seq" | grep -o 'max_error=[^ ]*')
      printf '%-10s %-9s %-9s ratio %-8s %s against the original\n' "$seq" "$predictor" "$label" "$raw" "$original"
    done
  done
done
echo "== done: ./build/tezip --help"
