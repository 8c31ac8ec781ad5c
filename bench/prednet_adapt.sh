#!/usr/bin/env bash
# PredNet adapted to the data it codes (`tezip compress --adapt`) against the classical predictors,
# in one run (docs/training.md, "Adapting to the input"): per dataset, the archive's size ratio
# (the embedded model counted) at lossless and abs 2, the adaptation's held-out next-frame MSE
# against the previous frame's, training and coding seconds.
#   bench/prednet_adapt.sh NAME:INPUT [NAME:INPUT...]     (env: BUDGETS="30 90", THREADS=1)
# Each variant adapts once (lossless run); the abs 2 run codes with the same model, taken out of
# the lossless archive, so both modes see the same network.
set -euo pipefail
cd "$(dirname "$0")/.."
TEZIP=${TEZIP:-./build/tezip}
BUDGETS=${BUDGETS:-"30 90"}
T=${THREADS:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=PASSIVE
now() { date +%s.%N; }
ratio() { $TEZIP info "$1" | awk '/^raw:/ {print $NF}'; }
# The embedded model, as a .tzm file (tezip convert-model extracts it).
extract_model() {
  $TEZIP convert-model "$1" -o "$2" -f -q
}
echo "| data | predictor | adapt s | val MSE / previous | lossless ratio | abs 2 ratio | lossless encode s | verify s |"
echo "|---|---|--:|--:|--:|--:|--:|--:|"
for data in "$@"; do
  name=${data%%:*}; input=${data#*:}
  for predictor in previous auto motion prednet; do
    t0=$(now); $TEZIP compress "$input" -o "$work/l.tzp" --predictor $predictor -T $T -q -f; t1=$(now)
    $TEZIP compress "$input" -o "$work/a.tzp" --predictor $predictor --mode abs --bound 2 -T $T -q -f
    t2=$(now); $TEZIP verify "$work/l.tzp" -T $T -q; t3=$(now)
    printf "| %s | %s | - | - | %s | %s | %.1f | %.1f |\n" "$name" "$predictor" "$(ratio "$work/l.tzp")" "$(ratio "$work/a.tzp")" \
      "$(echo "$t1 - $t0" | bc -l)" "$(echo "$t3 - $t2" | bc -l)"
  done
  for budget in $BUDGETS; do
    for variant in "fine-tune residual:" "fine-tune frame:--forecast frame" "scratch residual 1,4,8,16:--stack 1,4,8,16"; do
      label=${variant%%:*}; flags=${variant#*:}
      t0=$(now)
      out=$($TEZIP compress "$input" -o "$work/l.tzp" --predictor prednet --adapt $budget $flags --keep-adapted -T $T -f 2>&1)
      t1=$(now)
      extract_model "$work/l.tzp" "$work/m.tzm"
      $TEZIP compress "$input" -o "$work/a.tzp" --predictor prednet --model "$work/m.tzm" --embed-model --mode abs --bound 2 -T $T -q -f
      t2=$(now); $TEZIP verify "$work/l.tzp" -T $T -q; t3=$(now)
      secs=$(echo "$out" | sed -n 's/^adapted PredNet in \([0-9.]*\) s.*/\1/p')
      x=$(echo "$out" | sed -n 's/^adapted PredNet.*(x\([0-9.]*\)).*/\1/p')
      printf "| %s | %s, %s s | %s | %s | %s | %s | %.1f | %.1f |\n" "$name" "$label" "$budget" "$secs" "$x" "$(ratio "$work/l.tzp")" \
        "$(ratio "$work/a.tzp")" "$(echo "$t1 - $t0 - $secs" | bc -l)" "$(echo "$t3 - $t2" | bc -l)"
      echo "$out" | grep '^adapt: epoch' | sed "s/^/    [$name $label $budget] /" >&2
    done
  done
done
