#!/bin/sh
# Cost fidelity of the store split: zb-h1 --split store against 1f1b --split fused, alternating.
B=${BUILD:-build}/bin/torch_pipeline  # from the repository root
model="--layers 4 --d-model 128 --heads 4 --seq 32 --batch 4 --vocab 256"
export OMP_NUM_THREADS=1
for i in 1 2 3; do
  for s in "zb-h1 store" "1f1b fused"; do
    set -- $s
    echo "== run $i $1 $2 load $(cut -d' ' -f1 /proc/loadavg)"
    nice -n -10 $B --schedule $1 --stages 2 --microbatches 8 $model --split $2 --repeat 7 --profile ${TMPDIR:-/tmp}/fid-$1-$i.json | grep -E "stage [01]:|sum over stages"
  done
done
