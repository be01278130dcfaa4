# `pipesched plan`: a model, a cluster and a batch in, the fastest plan that fits out.
pipesched_cli_test("plan: Llama 3 405B on 16384 H100s against Meta's layout" 0
  "2048 sequences \\(16.8 M tokens\\) per step.*\n +1 +8 .*\nbase +8 +16 +128 .*interleaved-1f1b.*plan 1 is [0-9.]+x the baseline's speed: [0-9.]+ % of each step, [0-9]+ GPUs' worth of time recovered at 16384 GPUs"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192
  --global-batch-tokens 16777216 --optimizer-sharding gradients
  --baseline tp=8,pp=16,dp=128,schedule=interleaved-1f1b,recompute=none)
pipesched_cli_test("plan: JSON contract" 0
  "\"plans\": \\[\n +\\{\n +\"bubble_rate\":.*\"flops_per_iteration\":.*\"layout\": \\{\n +\"cp\": 1,\n +\"dp\":.*\"micro_batch\".*\"microbatches\".*\"pp\".*\"tp\".*\"v\".*\"memory_bytes\": \\{\n +\"activations\".*\"gradients\".*\"optimizer\".*\"total\".*\"weights\""
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 8192 --global-batch 64 --top 2 --json)
pipesched_cli_test("plan: one layout that does not fit" 1
  "\"fits\": false.*error: the plan does not fit: it needs [0-9.]+ GiB per GPU, [0-9.]+ GiB usable"
  plan --model llama3-70b --gpu h100-sxm-80gb --seq 8192 --tp 8 --pp 2 --dp 4 --schedule zb-h2
  --micro-batch 2 --microbatches 4 --recompute none --json)
pipesched_cli_test("plan: one layout that fits" 0
  "   1   8   4     2  1  2    8  1f1b +selective on "
  plan --model llama3-70b --gpu h100-sxm-80gb --seq 8192 --tp 8 --pp 4 --dp 2 --schedule 1f1b
  --micro-batch 2 --global-batch 32 --recompute selective --sequence-parallel)
pipesched_cli_test("plan: nothing fits" 1
  "no plan fits: the smallest need found is [0-9.]+ GiB per GPU, 72.0 GiB usable"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch 16)
pipesched_cli_test("plan: model and cluster files" 0
  "gpt-small on 16 x l40s-48gb.*usable memory 40.8 GiB per GPU \\(85 % of 48.0 GiB\\)"
  plan --model ${data}/model_small.json --gpu ${data}/cluster_small.json --gpus 16 --seq 2048
  --global-batch 64 --top 1)
pipesched_cli_test("plan: the frontier as SVG" 0 "<svg .*usable 72.0 GiB.*best: .*</svg>"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 8192 --global-batch 64 --format svg)
# Bad input: exit 2 naming the values.
pipesched_cli_test("plan: TP not dividing the KV heads" 2
  "error: plan: --tp 16 must divide the heads \\(128\\) and the KV heads \\(8\\)"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192 --global-batch 2048 --tp 16)
pipesched_cli_test("plan: PP above the layers" 2
  "error: plan: --pp 200 must be between 1 and the layers \\(126\\)"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 1600 --seq 8192 --global-batch 2048 --tp 8 --pp 200)
pipesched_cli_test("plan: batch not divisible" 2
  "error: plan: the global batch \\(100 sequences\\) must be a multiple of DP \\(128\\)"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192 --global-batch 100 --tp 8 --pp 16)
pipesched_cli_test("plan: tokens not whole sequences" 2
  "error: plan: global_batch_tokens \\(1000\\) must be a positive multiple of seq \\(8192\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch-tokens 1000)
pipesched_cli_test("plan: GPUs and layout disagree" 2
  "error: plan: --dp 64 with --tp 8 --pp 16 needs 8192 GPUs, not 16384"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192 --global-batch 2048 --tp 8 --pp 16 --dp 64)
pipesched_cli_test("plan: unknown model" 2
  "error: --model: unknown model \"llama4\" \\(presets: llama3-8b, llama3-70b, llama3-405b, gpt3-175b, deepseek-v3, mixtral-8x7b, or a model JSON file\\)"
  plan --model llama4 --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch 8)
pipesched_cli_test("plan: bad model file" 2
  "error: --model: .*model_bad_mlp.json: /mlp: must be \"gelu\" or \"swiglu\", not \"relu\""
  plan --model ${data}/model_bad_mlp.json --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch 8)
pipesched_cli_test("plan: no batch" 2
  "error: plan: give the batch: --global-batch, --global-batch-tokens or --microbatches"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 8192)
pipesched_cli_test("plan: bad partition" 2
  "error: --partition: must be even, balanced or layers per chunk L1,L2,..., not \"evn\""
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch 8 --partition evn)
pipesched_cli_test("plan: bad baseline" 2
  "error: --baseline: unknown key \"tensor\""
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch 8 --baseline tensor=8)
pipesched_cli_check("plan: the exported plan reads back and reproduces its makespan and peaks"
  plan_export_check.cmake 120 "plan export ok" -DWORK=${CMAKE_CURRENT_BINARY_DIR}/plan_export
  "-DARGS=--model;llama3-70b;--gpu;h100-sxm-80gb;--gpus;1024;--seq;8192;--global-batch-tokens;4194304;--pp;4")
add_test(NAME "docs: README plan example is current"
         COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:pipesched_cli> -DREADME=${PROJECT_SOURCE_DIR}/README.md
                 "-DARGS=--model;llama3-405b;--gpu;h100-sxm-80gb;--gpus;16384;--seq;8192;--global-batch-tokens;16777216;--optimizer-sharding;gradients;--memory-efficient-norm;--baseline;tp=8,pp=16,dp=128,schedule=interleaved-1f1b,recompute=none"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/check_readme_example.cmake)
set_tests_properties("docs: README plan example is current" PROPERTIES
  LABELS "cli;docs" TIMEOUT 120 PASS_REGULAR_EXPRESSION "readme plan-example ok")
# The achieved fraction a measured run shows, against the plan it ran (analyze --planned-costs).
pipesched_cli_check("plan: analyze calibrates the achieved fraction against an exported plan"
  plan_calibrate_check.cmake 120 "plan calibration ok"
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/plan_calibrate)
pipesched_cli_test("analyze: calibration options only together" 2
  "error: --planned-costs, --planned-fraction and --seconds-per-unit: only meaningful together"
  analyze ${PROJECT_SOURCE_DIR}/examples/robustness/straggler_run.csv --planned-fraction 0.5)
pipesched_cli_check("plan: each pipeline link is timed by where its stages are"
  plan_links_check.cmake 120 "plan links ok" -DWORK=${CMAKE_CURRENT_BINARY_DIR}/plan_links)
pipesched_cli_check("plan: more usable memory never gives a slower plan"
  plan_memory_monotone_check.cmake 300 "memory monotone ok")
pipesched_cli_check(
  "plan: the best plan depends on neither --top nor --baseline and never falls with memory"
  plan_search_consistency_check.cmake 300 "search consistency ok")
