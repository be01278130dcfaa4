#!/bin/sh
# What the zero-bubble schedules gain over 1F1B on a real run (docs/torch_pipeline.md, "The
# gain, measured"): p = 2, one thread per stage (torch_pipeline) and one process per stage
# (torch_pipeline_mpi, 2 ranks), m = 8 and 16. Each run profiles 1F1B (--split store), writes
# the costs, generates ZB-H1, ZB-H2, ZB-2p and ZB-V from them, checks their gradients, and
# times all of them and 1F1B with a fused backward in alternating runs (REPEAT each, medians).
# Before each run it waits (up to QUIET_WAIT seconds) until no compiler runs and the 1-minute
# load is below LOAD_MAX, and it records the load before and after.
#
#   examples/torch_pipeline/measure_gain.sh [BUILD_DIR [OUT_DIR]]
#   REPEAT=9 MS="8 16" MODES="threads mpi" LOAD_MAX=0.5 QUIET_WAIT=1200 measure_gain.sh build
#
# NICE=-10 runs the programs at that priority (root only): on a machine that cannot be made
# quiet, the other processes then get little of the cores while they run. The load is recorded
# either way.
#
# OUT_DIR (default measure_gain) gets one log per run and summary.md, the table of the docs.
set -eu
build=${1:-build}
out=${2:-measure_gain}
repeat=${REPEAT:-7}
ms=${MS:-8 16}
modes=${MODES:-threads mpi}
load_max=${LOAD_MAX:-0.5}
quiet_wait=${QUIET_WAIT:-1200}
priority=${NICE:+nice -n $NICE}
# The model: 4 pre-LN blocks of d_model 128 (2 per stage in 1F1B, 1 per chunk in ZB-V),
# 128 tokens per micro-batch, double precision: ops of tens of milliseconds.
model="--layers 4 --d-model 128 --heads 4 --seq 32 --batch 4 --vocab 256"
schedules=zb-h1,zb-h2,zb-2p,zb-v
mpirun=${MPIRUN:-mpiexec --allow-run-as-root --oversubscribe}

export OMP_NUM_THREADS=1
mkdir -p "$out"
# Open MPI's shared-memory transport moves a large message by the receiver reading the
# sender's memory (CMA) when the system allows it; otherwise through copies that need the
# sender to call MPI again (after its next op). Use CMA when a short run works with it.
if [ -z "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" ] && echo "$modes" | grep -q mpi; then
  if OMPI_MCA_btl_vader_single_copy_mechanism=cma $mpirun -n 2 "$build/bin/torch_pipeline_mpi" \
       --schedule 1f1b --microbatches 2 --d-model 64 --seq 32 > "$out/cma-probe.log" 2>&1; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=cma
  else
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
  fi
fi

load1() { cut -d' ' -f1 /proc/loadavg; }
compilers() { pgrep -c cc1plus || true; }
wait_quiet() {
  waited=0
  while [ "$(compilers)" -gt 0 ] || [ "$(awk -v l="$(load1)" -v x="$load_max" \
        'BEGIN { print (l >= x) }')" = 1 ]; do
    if [ "$waited" -ge "$quiet_wait" ]; then
      echo "measure_gain: not quiet after ${quiet_wait} s (load $(load1), $(compilers) compilers);" \
           "measuring anyway" >&2
      return
    fi
    sleep 10
    waited=$((waited + 10))
  done
}

summary="$out/summary.md"
{
  echo "| run | m | schedule | measured gain vs 1F1B store / fused | predicted gain |" \
       "measured / predicted (vs store, vs fused) | measured / simulated from the profile |" \
       "load before, after |"
  echo "|---|---:|---|---:|---:|---:|---:|---|"
} > "$summary"

for m in $ms; do
  for mode in $modes; do
    log="$out/$mode-m$m.log"
    wait_quiet
    before="$(cat /proc/loadavg), $(compilers) compilers"
    if [ "$mode" = mpi ]; then
      cmd="$mpirun -n 2 $build/bin/torch_pipeline_mpi"
    else
      cmd="$build/bin/torch_pipeline --stages 2"
    fi
    # shellcheck disable=SC2086  # word splitting of the option strings is intended
    $priority $cmd --schedule 1f1b --microbatches "$m" $model --split store --repeat "$repeat" \
      --profile "$out/costs-$mode-m$m.json" --replan "$schedules" --fused-baseline > "$log" 2>&1
    after="$(cat /proc/loadavg), $(compilers) compilers"
    echo "load before: $before" >> "$log"
    echo "load after: $after" >> "$log"
    # One row per re-planned schedule, from the program's "gain" and "after:" lines.
    awk -v run="$mode" -v m="$m" -v lb="$(echo "$before" | cut -d' ' -f1)" \
        -v la="$(echo "$after" | cut -d' ' -f1)" '
      /^gain / {
        split($0, a, " -> "); split(a[2], b, ":"); to = b[1]
        fused = (a[1] ~ /fused/)
        match($0, /measured -?[0-9.]+ %/); meas = substr($0, RSTART + 9, RLENGTH - 11)
        match($0, /predicted -?[0-9.]+ %/); pred = substr($0, RSTART + 10, RLENGTH - 12)
        match($0, /measured\/predicted -?[0-9.]+/); ratio = substr($0, RSTART + 19)
        if (fused) { gf[to] = meas; rf[to] = ratio } else { gs[to] = meas; rs[to] = ratio;
          pr[to] = pred; order[++n] = to }
      }
      /^after: / {
        name = $0; sub(/^after: +/, "", name); sub(/: measured makespan.*/, "", name)
        match($0, /measured\/simulated [0-9.]+/); ms[name] = substr($0, RSTART + 19, RLENGTH - 19)
      }
      END {
        for (i = 1; i <= n; ++i) {
          t = order[i]
          printf "| %s | %s | %s | %s %% / %s %% | %s %% | %s, %s | %s | %s, %s |\n", run, m, t,
                 gs[t], gf[t], pr[t], rs[t], rf[t], ms[t], lb, la
        }
      }' "$log" >> "$summary"
    grep -q '^max_grad_rel_diff=0$' "$log" || echo "measure_gain: $log: gradients not exact" >&2
  done
done
echo "Priority: ${NICE:-default}" >> "$summary"
echo "Open MPI single-copy mechanism: ${OMPI_MCA_btl_vader_single_copy_mechanism:-(threads only)}" \
  >> "$summary"
cat "$summary"
