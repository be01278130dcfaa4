#!/usr/bin/env bash
# Regenerates the README's pictures with the pipesched CLI itself (build first).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPESCHED_BIN:-build/bin/pipesched}
for s in 1f1b zb-h1 zb-h2; do
  "$bin" simulate --schedule "$s" --stages 4 --microbatches 8 --format svg --output "docs/img/$s.svg"
done
"$bin" simulate --schedule zb-h1 --stages 4 --microbatches 8 --format chrome --output docs/img/zb-h1.trace.json
echo "wrote docs/img/{1f1b,zb-h1,zb-h2}.svg and docs/img/zb-h1.trace.json"
