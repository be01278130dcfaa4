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

# DualPipe in the planner, and DeepSeek-V3's published layout (PP 16, EP 64, no TP, ZeRO-1 on
# 2,048 H800) evaluated under dualpipe, dualpipev, 1f1b and zb-1p, one --baseline each, beside
# the search's best (README, "Mixtures of experts").
# --recompute full keeps the search to about 3 s (every recomputation: about 50 s, most of it
# in the searching generators at their memory rungs).
set(moe_deepseek plan --model deepseek-v3 --gpu h800-sxm-80gb --gpus 2048 --seq 4096
    --global-batch 15360 --recompute full)
set(moe_ds_layout tp=1,pp=16,ep=64,micro-batch=1)
pipesched_cli_test("plan: DeepSeek-V3's layout under four schedules, the best plan fits" 0
  "\n +1 +1 +[0-9]+ +[0-9]+ +[0-9]+ .*\nbase +1 +16 +128 +64 +2 +1 +120 +dualpipe .*\n +b2 +1 +16 +128 +64 +2 +1 +120 +dualpipev .*\n +b3 +1 +16 +128 +64 +1 +1 +120 +1f1b .*\n +b4 +1 +16 +128 +64 +1 +1 +120 +zb-1p .*plan 1 is [0-9.]+x the baseline's speed.*plan 1 is [0-9.]+x baseline b4's speed"
  ${moe_deepseek} --top 3
  --baseline ${moe_ds_layout},schedule=dualpipe --baseline ${moe_ds_layout},schedule=dualpipev
  --baseline ${moe_ds_layout},schedule=1f1b --baseline ${moe_ds_layout},schedule=zb-1p)
set_tests_properties("cli: plan: DeepSeek-V3's layout under four schedules, the best plan fits"
                     PROPERTIES TIMEOUT 300)
pipesched_cli_test("plan: dualpipe's rank 0 holds the first stage of one route, the last of the other" 0
  "\"schedule\": \"dualpipe\",.*\"chunks\": \\[\n *0,\n *31\n *\\],"
  plan --model mixtral-8x7b --gpu h100-sxm-80gb --gpus 32 --seq 4096 --global-batch 64 --tp 2
  --pp 16 --ep 1 --schedule dualpipe --micro-batch 1 --recompute full --json)
# Megatron-LM's arguments carry the experts and MLA (framework_export_tests.cmake reads them);
# torchtitan's would train a dense model: not written for experts or MLA yet.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/moe_export)
pipesched_cli_test("plan: Megatron arguments for a mixture of experts, no torchtitan ones yet" 0
  "note: [^\n]*moe_export/plan.torchtitan.args and [^\n]*moe_export/plan.torchtitan.py not written: the model has experts, whose torchtitan arguments \\(experts, top-k, expert parallelism, MLA ranks\\) are not written yet"
  ${moe_mixtral} --ep 4 --export ${CMAKE_CURRENT_BINARY_DIR}/moe_export/plan)
set_tests_properties(
  "cli: plan: Megatron arguments for a mixture of experts, no torchtitan ones yet"
  PROPERTIES FAIL_REGULAR_EXPRESSION "megatron.args not written")
pipesched_cli_test("plan: Megatron arguments for MLA and experts, no torchtitan ones yet" 0
  "note: [^\n]*moe_export/ds.torchtitan.args and [^\n]*moe_export/ds.torchtitan.py not written: the model has experts, whose torchtitan arguments \\(experts, top-k, expert parallelism, MLA ranks\\) are not written yet"
  ${moe_deepseek} --tp 1 --pp 16 --ep 64 --micro-batch 1 --schedule 1f1b
  --export ${CMAKE_CURRENT_BINARY_DIR}/moe_export/ds)
set_tests_properties(
  "cli: plan: Megatron arguments for MLA and experts, no torchtitan ones yet"
  PROPERTIES FAIL_REGULAR_EXPRESSION "megatron.args not written")
# The README's DeepSeek-V3 table (the output's lines 5 to 12) is what `pipesched plan` prints now.
add_test(NAME "docs: README DeepSeek-V3 example is current"
         COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:pipesched_cli> -DREADME=${PROJECT_SOURCE_DIR}/README.md
                 -DMARKER=deepseek-example -DSKIP=4
                 "-DARGS=--model;deepseek-v3;--gpu;h800-sxm-80gb;--gpus;2048;--seq;4096;--global-batch;15360;--recompute;full;--top;3;--baseline;tp=1,pp=16,ep=64,micro-batch=1,schedule=dualpipe;--baseline;tp=1,pp=16,ep=64,micro-batch=1,schedule=dualpipev;--baseline;tp=1,pp=16,ep=64,micro-batch=1,schedule=1f1b;--baseline;tp=1,pp=16,ep=64,micro-batch=1,schedule=zb-1p"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/check_readme_example.cmake)
set_tests_properties("docs: README DeepSeek-V3 example is current" PROPERTIES
  LABELS "cli;docs" TIMEOUT 120 PASS_REGULAR_EXPRESSION "readme deepseek-example ok")
