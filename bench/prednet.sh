#!/usr/bin/env bash
# PredNet against the classical predictors, in one run (BENCHMARKS.md, "Learned predictor"):
# ratio at lossless and abs 2, encode and decode frames/s on 2 threads, per dataset.
#   bench/prednet.sh [OUT.md]    (datasets from datasets/fetch; vtest capped at its first 100 frames)
# Decode is `tezip verify` (every GOP decoded to memory and checked: the loader's path).
set -euo pipefail
cd "$(dirname "$0")/.."
TEZIP=${TEZIP:-./build/tezip}
CACHE=${TEZIP_CACHE:-.cache/datasets}
OUT=${1:-/dev/stdout}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=PASSIVE

# vtest: the first 100 frames, as in bench/run.
mkdir -p "$work/vtest100"
for f in $(ls "$CACHE/vtest"/frame_*.png | sort | head -100); do ln -s "$(realpath "$f")" "$work/vtest100/"; done

now() { date +%s.%N; }
{
echo "| data | predictor | mode | ratio | encode frames/s | decode frames/s | max error |"
echo "|---|---|---|--:|--:|--:|--:|"
for data in "mire2:$CACHE/mire2" "vtest100:$work/vtest100" "sample/mire:datasets/sample/mire" "sample/vtest:datasets/sample/vtest"; do
  name=${data%%:*}; input=${data#*:}
  frames=$(ls "$input" | wc -l)
  for predictor in previous linear motion "prednet --arithmetic exact" "prednet --arithmetic float32"; do
    for mode in "lossless" "abs --bound 2"; do
      archive="$work/a.tzp"
      t0=$(now); $TEZIP compress "$input" -o "$archive" --predictor $predictor --mode $mode -T 2 -q -f; t1=$(now)
      line=$($TEZIP verify "$archive" --against "$input" -T 2); t2=$(now)
      raw=$($TEZIP info "$archive" | awk '/^raw:/ {print $NF}')
      maxerr=$(echo "$line" | sed -n 's/.*max_error=\([0-9.e+-]*\).*/\1/p')
      # verify also reads the originals: time a plain verify for the decode rate.
      t3=$(now); $TEZIP verify "$archive" -T 2 -q; t4=$(now)
      printf "| %s | %s | %s | %s | %.1f | %.1f | %s |\n" "$name" "${predictor/ --arithmetic /, }" "${mode/ --bound /}" "$raw" \
        "$(echo "$frames / ($t1 - $t0)" | bc -l)" "$(echo "$frames / ($t4 - $t3)" | bc -l)" "$maxerr"
    done
  done
done
} > "$OUT"
