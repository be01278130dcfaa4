#!/usr/bin/env bash
# Regenerates the README's pictures with the pipesched CLI itself (build first).
# With --check, writes them to a temporary directory instead and fails when one differs from
# docs/img (the ctest "docs: README pictures are made by the tool" runs that).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPESCHED_BIN:-build/bin/pipesched}
out=docs/img
if [ "${1:-}" = "--check" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
for s in 1f1b zb-h1 zb-h2 v-half v-min dualpipev; do
  "$bin" simulate --schedule "$s" --stages 4 --microbatches 8 --format svg --output "$out/$s.svg"
done
"$bin" simulate --schedule zb-h1 --stages 4 --microbatches 8 --format chrome --output "$out/zb-h1.trace.json"
# The README's plan example (pipesched plan, deterministic: only its text report times itself).
"$bin" plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192 \
  --global-batch-tokens 16777216 --optimizer-sharding gradients --memory-efficient-norm \
  --baseline tp=8,pp=16,dp=128,schedule=interleaved-1f1b,recompute=none \
  --format svg --output "$out/plan-llama3-405b.svg"
if [ "$out" = docs/img ]; then
  echo "wrote docs/img/{1f1b,zb-h1,zb-h2,v-half,v-min,dualpipev,plan-llama3-405b}.svg and docs/img/zb-h1.trace.json"
  exit 0
fi
stale=0
for f in "$out"/*; do
  if ! cmp -s "$f" "docs/img/$(basename "$f")"; then
    echo "docs/img/$(basename "$f") is not what the tool draws now: run scripts/make_pictures.sh"
    stale=1
  fi
done
[ "$stale" = 0 ] && echo "pictures ok: $(ls "$out" | wc -l) files match docs/img"
exit "$stale"
