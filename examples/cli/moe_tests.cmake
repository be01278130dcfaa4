# Mixtures of experts in `pipesched plan` (docs/model.md §10.6): expert parallelism in the
# layout, its rules (exit 2 naming the value), the load imbalance.
set(moe_mixtral plan --model mixtral-8x7b --gpu h100-sxm-80gb --gpus 32 --seq 4096
    --global-batch 64 --tp 2 --pp 4 --schedule 1f1b --micro-batch 1 --recompute full)
pipesched_cli_test("plan: EP in the layout, an EP column" 0
  "  EP  v +b +m +schedule[^\n]*\n +1 +2 +4 +4 +4 +1 +1 +16 +1f1b"
  ${moe_mixtral} --ep 4)
pipesched_cli_test("plan: EP in the JSON layout and the experts' parameters" 0
  "\"ep\": 4,.*\"parameters\": {\n *\"embedding\": [0-9.e+]+,\n *\"experts\": [1-9]"
  ${moe_mixtral} --ep 4 --json)
pipesched_cli_test("plan: EP must divide the routed experts" 2
  "error: plan: --ep 3: EP 3 must divide the routed experts \\(8\\): each rank holds an equal share"
  ${moe_mixtral} --ep 3)
pipesched_cli_test("plan: EP must divide DP·CP" 2
  "error: plan: --ep 8: EP 8 must divide the data-parallel ranks DP·CP \\(4\\)"
  ${moe_mixtral} --ep 8)
pipesched_cli_test("plan: EP needs experts" 2
  "error: plan: --ep 2: EP 2 needs a model with experts: \"llama3-8b\" is dense"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 16 --seq 4096 --global-batch 64 --ep 2)
pipesched_cli_test("plan: the baseline's EP is checked before the search" 2
  "error: plan: baseline: ep=7: EP 7 must divide the routed experts \\(8\\)"
  plan --model mixtral-8x7b --gpu h100-sxm-80gb --gpus 32 --seq 4096 --global-batch 64
  --baseline tp=2,pp=4,ep=7)
pipesched_cli_test("plan: --moe-imbalance below 1" 2
  "error: --moe-imbalance: 0.5 must be at least 1" ${moe_mixtral} --moe-imbalance 0.5)
pipesched_cli_test("plan: --moe-imbalance on a dense model" 2
  "error: --moe-imbalance: 2 needs a model with experts; \"llama3-8b\" is dense"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 16 --seq 4096 --global-batch 64
  --moe-imbalance 2)
