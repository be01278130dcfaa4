#!/bin/bash
# alternate base / new, pinned to CPU 0; JSON per round
# BASE, NEW: the two checkouts; run in an empty folder
for r in 1 2 3 4 5 6 7; do
  for which in base new; do
    if [ $which = base ]; then d=$BASE/build-rel/bin; else d=$NEW/build-rel/bin; fi
    o=$which-$r
    taskset -c 0 $d/bench_simulate --benchmark_filter='^(simulate|simulate_stats)/(1f1b|zb-h1|zb-v|interleaved-1f1b)/p:(64/m:1024|32/m:256)' --benchmark_format=json > $o-sim.json 2>/dev/null
    taskset -c 0 $d/bench_memory --benchmark_filter='^check_memory/(1f1b|zb-h1|zb-v)/p:(64/m:1024|32/m:256)' --benchmark_format=json > $o-mem.json 2>/dev/null
    taskset -c 0 $d/bench_zb_auto --benchmark_filter='bm_zb_auto_search_1thread/32/256/2|bm_zb_v_search|bm_zb_auto_paper' --benchmark_format=json > $o-zb.json 2>/dev/null
    taskset -c 0 $d/bench_comm_lowering --benchmark_filter='zb_h1_eager|one_f_one_b_eager/32/1024' --benchmark_format=json > $o-comm.json 2>/dev/null
    for sc in zb-h1 1f1b; do /usr/bin/time -f "%U %S %M" -o $o-scale-$sc.time taskset -c 0 $d/scale $sc > $o-scale-$sc.out 2>&1; done
  done
  echo round $r done $(date +%T)
done
echo ALLDONE
