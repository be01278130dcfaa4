# `pipesched plan` and `pack` refuse what no layout can run (exit 2 naming the rule), instead of
# "no plan fits" with a batch of 0, a hang or std::bad_alloc; the baseline is checked like the
# plan and shown when it does not fit. The limits are the planner's (docs/errors.md, "Limits").
set(layout_405b plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192
    --global-batch-tokens 16777216 --tp 8 --pp 16)
set(layout_8b plan --model llama3-8b --gpu h100-sxm-80gb --gpus 16 --seq 4096 --global-batch 64)
set(layout_70b plan --model llama3-70b --gpu h100-sxm-80gb --gpus 64 --seq 8192 --global-batch 64)

# Invalid layouts: exit 2 naming the rule (no "0 sequences", no "0 candidates").
pipesched_cli_test("plan: PP·v above the layers + 2 (-v 9)" 2
  "error: plan: --pp 16 and -v 9 make PP·v = 144 chunks for 126 layers: each chunk needs at least one layer, but at PP > 1 the first and the last"
  ${layout_405b} -v 9 --partition even)
pipesched_cli_test("plan: PP·v above the layers + 2 (-v 9, JSON)" 2
  "error: plan: --pp 16 and -v 9 make PP·v = 144 chunks for 126 layers"
  ${layout_405b} -v 9 --partition even --json)
# PP·v = the layers + 2 (Llama 3 405B's layout): the end chunks hold only the embedding and
# only the head, one layer in every other chunk.
pipesched_cli_test("plan: PP·v = layers + 2, the end chunks only the embedding and the head" 0
  "\"partition\": \\[\n *0,\n *1,\n"
  ${layout_405b} -v 8 --partition even --schedule interleaved-1f1b --recompute full
  --micro-batch 1 --json)
pipesched_cli_test("plan: PP·v above the layers (-v 16)" 2
  "error: plan: --pp 16 and -v 16 make PP·v = 256 chunks for 126 layers"
  ${layout_405b} -v 16)
pipesched_cli_test("plan: PP·v above the layers (-v 81)" 2
  "error: plan: --pp 16 and -v 81 make PP·v = 1296 chunks for 126 layers"
  ${layout_405b} -v 81)
pipesched_cli_test("plan: 1f1b takes v = 1" 2
  "error: plan: no layout can run this job: --schedule 1f1b does not take -v 2 at PP 16: 1f1b: chunks \\(v=2\\) must be 1 for this schedule"
  ${layout_405b} --schedule 1f1b -v 2)
pipesched_cli_test("plan: zb-v takes v = 2" 2
  "error: plan: no layout can run this job: --schedule zb-v does not take -v 1 at PP 16: zb-v: chunks \\(v=1\\) must be 2 for this schedule"
  ${layout_405b} -v 1 --schedule zb-v)
# A layout whose schedule its generator refuses says the generator's rule, not a count.
pipesched_cli_test("plan: a refused schedule names its generator's rule" 2
  "error: plan: the layout's schedule cannot be generated: dualpipev: microbatches \\(m=8\\) must be at least 2\\*stages \\(2p=16\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 4096 --global-batch 64 --dp 1
  --schedule dualpipev --pp 8 --tp 1 --micro-batch 8 -v 2 --recompute none
  --no-sequence-parallel)
pipesched_cli_test("plan: refused schedules name the first one's rule" 2
  "error: plan: every one of the 3 candidates was refused by its generator \\(the first: dualpipev: microbatches \\(m=8\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 4096 --global-batch 64 --dp 1
  --schedule dualpipev --pp 8 --tp 1 --micro-batch 8 -v 2 --no-sequence-parallel)
pipesched_cli_test("plan: DP not dividing the GPUs" 2
  "error: plan: --dp 3 does not divide the 16 GPUs \\(TP·PP·DP = GPUs\\)"
  ${layout_8b} --dp 3)
pipesched_cli_test("plan: DP 0" 2 "error: --dp: must be a whole number >= 1, got 0" ${layout_8b} --dp 0)
pipesched_cli_test("plan: micro-batch above the global batch" 2
  "error: plan: --micro-batch 128 does not divide the global batch \\(64 sequences\\)"
  ${layout_8b} --micro-batch 128)
pipesched_cli_test("plan: more GPUs than the planner takes" 2
  "error: plan: gpus \\(4294967296\\) must be at most 16777216 \\(max_plan_gpus\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 4294967296 --seq 4096 --global-batch 64)
pipesched_cli_test("plan: one layer cannot fill two chunks" 2
  "error: plan: -v 2 makes PP·v = 2 chunks for 1 layers even at PP 1"
  plan --model ${data}/model_one_layer.json --gpu ${data}/cluster_small.json --gpus 8 -v 2
  --seq 2048 --global-batch 64)

# Caps named as caps, with a micro-batch size fixed or searched.
pipesched_cli_test("plan: sequences per pipeline above the cap (fixed micro-batch)" 2
  "error: plan: the global batch \\(4294967296 sequences\\) over DP \\(16\\) is 268435456 sequences per pipeline, more than 65536 \\(max_plan_pipeline_sequences\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 16 --seq 1 --global-batch 4294967296
  --tp 1 --pp 1 --micro-batch 1)
pipesched_cli_test("plan: sequences per pipeline above the cap (searched micro-batch)" 2
  "error: plan: the global batch \\(4294967296 sequences\\) over DP \\(16\\) is 268435456 sequences per pipeline, more than 65536 \\(max_plan_pipeline_sequences\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 16 --seq 1 --global-batch 4294967296
  --tp 1 --pp 1)
pipesched_cli_test("plan: ops of one candidate above the cap" 2
  "error: plan: no layout can run this job: TP1 PP32 v1 b1: PP·v·m·3 = 32·1·65536·3 = 6291456 ops in one schedule, more than 4194304 \\(max_plan_schedule_ops\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 32 --tp 1 --pp 32 --micro-batch 1 --seq 1024
  --global-batch 65536)
pipesched_cli_test("plan: tokens per step above the cap" 2
  "error: plan: the global batch \\(16777216 sequences of 8192 tokens\\) must be at most 4294967296 tokens per step \\(max_plan_step_tokens\\)"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192 --global-batch 16777216)

# No hang, no unbounded memory: the rate and the model's size are checked first.
pipesched_cli_test("plan: a peak too slow for finite op times" 2
  "error: plan: peak_flops_bf16 \\(1e-300 FLOP/s\\) × achieved_fraction \\(0.45\\) makes the layers' work of one step take more seconds than a double holds"
  plan --model ${data}/model_small.json --gpu ${data}/cluster_slow_peak.json --gpus 8 --seq 2048
  --global-batch 64)
pipesched_cli_test("plan: an achieved fraction too small for finite op times" 2
  "error: plan: peak_flops_bf16 \\(3.62e\\+14 FLOP/s\\) × achieved_fraction \\([0-9.e-]+\\) makes the layers' work"
  plan --model ${data}/model_small.json --gpu ${data}/cluster_small.json --gpus 8 --seq 2048
  --global-batch 64 --achieved-fraction 1e-320)
pipesched_cli_test("plan: a model with more layers than the planner takes" 2
  "error: --model: .*model_layers_huge.json: /layers: must be between 1 and 4096, not 2147483648"
  plan --model ${data}/model_layers_huge.json --gpu ${data}/cluster_small.json --gpus 8 --seq 2048
  --global-batch 64)
pipesched_cli_test("pack: a model with more layers than the planner takes" 2
  "error: --model: .*model_layers_huge.json: /layers: must be between 1 and 4096, not 2147483648"
  pack --model ${data}/model_layers_huge.json --gpu ${data}/cluster_small.json -s 1f1b -p 4
  --lengths ${data}/lengths_long_tail.txt --microbatches 4)

# The baseline: checked like the plan, in its own keys; shown when it does not fit.
pipesched_cli_test("plan: baseline 1f1b with v = 3" 2
  "error: plan: baseline: no layout can run this job: schedule=1f1b does not take v=3 at PP 4: 1f1b: chunks \\(v=3\\) must be 1 for this schedule"
  ${layout_70b} --baseline tp=4,pp=4,v=3,schedule=1f1b)
pipesched_cli_test("plan: baseline that does not fit is shown" 0
  "\nbase +1 +1 +64 .* none .*\\(does not fit\\)\n\nplan 1 is [0-9.]+x the baseline's speed: .*\\(the baseline does not fit in memory\\)"
  ${layout_70b} --baseline tp=1,pp=1,recompute=none)
pipesched_cli_test("plan: baseline that does not fit is in the JSON" 0
  "\"baseline\": \\{\n +\"bubble_rate\": .*\"fits\": false,.*\"dp\": 64,"
  ${layout_70b} --baseline tp=1,pp=1,recompute=none --json)
pipesched_cli_test("plan: baseline key given twice" 2
  "error: --baseline: tp is given twice \\(tp=4 and tp=8\\)"
  ${layout_70b} --baseline tp=4,tp=8)
# An empty argument does not survive expect_exit.cmake's list: the CLI runs directly (exit 2 is
# in the message's "error:" prefix; ctest matches the output only).
add_test(NAME "cli: plan: empty baseline" COMMAND ${cli} ${layout_70b} --baseline "")
set_tests_properties("cli: plan: empty baseline" PROPERTIES LABELS cli TIMEOUT 60
  PASS_REGULAR_EXPRESSION
  "^error: --baseline: give key=value choices \\(e.g. tp=8,pp=16,schedule=1f1b\\), not an empty text")
pipesched_cli_test("plan: baseline layout not dividing the GPUs" 2
  "error: plan: baseline: dp=3 does not divide the 64 GPUs"
  ${layout_70b} --baseline dp=3)

# When nothing fits, the text still shows the baseline it evaluated (the JSON keeps it too).
pipesched_cli_test("plan: nothing fits, the baseline row is still shown" 1
  "no plan fits: the smallest need found is [0-9.]+ GiB per GPU.*\nbase +8 +1 [^\n]*\\(does not fit\\)"
  plan --model llama3-70b --gpu h100-sxm-80gb --gpus 8 --seq 8192 --global-batch 64
  --baseline tp=8,pp=1)

# Sequence parallelism asked for rules TP 1 out of the search (it was planned with SP off).
pipesched_cli_test("plan: --baseline sp=on searches only TP > 1" 0
  "base +[2-9][0-9]* .* on +[0-9.]+ s"
  ${layout_8b} --baseline sp=on --top 1)
pipesched_cli_test("plan: --sequence-parallel on one GPU names the rule" 2
  "error: plan: no layout can run this job: TP1 PP1: --sequence-parallel needs TP > 1"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 1 --seq 4096 --global-batch 8
  --sequence-parallel)

# Context parallelism: 2·CP must divide the sequence; Llama 3 405B's long-context layout (TP 8,
# CP 16, PP 16, DP 8 on 16,384 GPUs, 131,072-token sequences: arXiv 2407.21783 Table 4) is
# expressed and evaluated; CP is searched for long sequences.
pipesched_cli_test("plan: --cp not dividing the sequence" 2
  "error: plan: --cp 3: CP 3 cuts each sequence into 6 pieces \\(2·CP\\), which must divide the sequence \\(4096 tokens\\)"
  ${layout_8b} --cp 3)
pipesched_cli_test("plan: --cp 0" 2 "error: --cp: must be a whole number >= 1, got 0" ${layout_8b} --cp 0)
pipesched_cli_test("plan: --cp -1 states the range 0 is also outside" 2
  "error: --cp: must be a whole number >= 1, got \"-1\"" ${layout_8b} --cp -1)
pipesched_cli_test("plan: --achieved-fraction out of range names the option" 2
  "error: --achieved-fraction: must be in \\(0, 1\\], got 2" ${layout_8b} --achieved-fraction 2)
pipesched_cli_test("plan: baseline cp=0" 2
  "error: --baseline: cp must be between 1 and 4294967295, not 0" ${layout_8b} --baseline cp=0)
pipesched_cli_test("plan: Llama 3 405B at CP 16, 128K tokens" 0
  "\"cp\": 16,\n *\"dp\": 8,.*\"pp\": 16,.*\"tp\": 8"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 131072
  --global-batch-tokens 16777216 --tp 8 --cp 16 --pp 16 --schedule interleaved-1f1b
  --optimizer-sharding gradients --tp-comm-overlap all --json --top 1)
pipesched_cli_test("plan: CP searched for 128K-token sequences" 0
  "TP8 CP[0-9]+ PP"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 131072 --global-batch 8 --tp 8
  --schedule 1f1b --recompute full --micro-batch 1 --json --top 1)

# Interleaved 1F1B at fewer micro-batches per round than stages (Llama 3's N below PP): Meta's
# 405B layout at 8,192 GPUs (32 sequences per pipeline, no recompute) does not fit at N = PP
# with norms that keep their inputs, and fits at N = 8, the group size the planner finds itself.
pipesched_cli_test("plan: Llama 3 405B at 8192 GPUs fits at a group size below PP" 0
  "\"fits\": true,\n *\"flops_per_iteration\": [^\n]*\n *\"group_size\": 8,\n *\"layout\": \\{[^}]*\"pp\": 16,[^}]*\"tp\": 8,[^}]*\"v\": 8"
  plan --model llama3-405b --gpu h100-sxm-80gb --gpus 8192 --seq 8192
  --global-batch-tokens 16777216 --optimizer-sharding gradients --tp 8 --pp 16 -v 8
  --schedule interleaved-1f1b --recompute none --json)
# With each stage's input freed as Meta did (norms that read their output): the layout fits at
# both sizes at the v and N the planner finds, and scales as Meta measured it.
pipesched_cli_check("plan: Llama 3 405B as Meta ran it fits at 8192 and 16384 GPUs and scales as measured"
  llama3_scaling_check.cmake 120 "llama3 scaling ok")
pipesched_cli_test("plan: --memory-efficient-norm needs the tensor activation model" 2
  "error: --memory-efficient-norm needs --activation-model tensors"
  plan --model llama3-8b --gpu h100-sxm-80gb --gpus 8 --seq 4096 --global-batch 16
  --memory-efficient-norm --activation-model megatron)
# A group size above the global batch can never be taken: exit 2 naming it, not "no plan fits".
pipesched_cli_test("plan: --group-size above the global batch" 2
  "error: --group-size: 17 must be between 1 and the micro-batches per pipeline, at most the global batch \\(16 sequences\\)"
  plan --model llama3-8b --gpu h100-sxm-80gb --seq 4096 --gpus 8 --global-batch 16 --pp 8
  -s interleaved-1f1b -v 4 --group-size 17)

# --layer-times: one layer on TP·CP GPUs, without --gpus or a batch; an option that would shape a
# pipeline or a search is refused, not ignored.
pipesched_cli_test("plan --layer-times needs no --gpus or batch" 0 "\"layout\": {\n *\"cp\": 1,"
  plan --model llama3-8b --gpu h100-sxm-80gb --seq 4096 --tp 2 --layer-times)
set(layer_8b plan --model llama3-8b --gpu h100-sxm-80gb --seq 4096 --layer-times)
pipesched_cli_test("plan --layer-times refuses --gpus" 2 "error: --gpus excludes --layer-times"
  ${layer_8b} --tp 8 --gpus 1)
pipesched_cli_test("plan --layer-times refuses a batch" 2
  "error: --global-batch excludes --layer-times" ${layer_8b} --global-batch 3 --micro-batch 4)
pipesched_cli_test("plan --layer-times refuses --pp" 2 "error: --pp excludes --layer-times"
  ${layer_8b} --tp 2 --pp 4)
pipesched_cli_test("plan --layer-times refuses --export" 2 "error: --export excludes --layer-times"
  ${layer_8b} --tp 2 --export lt)
pipesched_cli_test("plan --layer-times refuses --top" 2 "error: --top excludes --layer-times"
  ${layer_8b} --top 3)
pipesched_cli_test("plan --layer-times refuses -f svg" 2
  "error: --format: --layer-times prints JSON, not svg" ${layer_8b} -f svg)
# Each micro-batch's weight gradients added after their GEMM, not inside it: W ends with one pass
# over the layer's weights on the rank, 2 bytes read fresh and 4 read and 4 written accumulated
# (fp32 gradients) for llama3-8b's 27.27 M weights a layer at TP 8.
pipesched_cli_test("plan: --gradient-accumulation-fusion off adds the accumulation to W" 0
  "\"bytes\": 272711680.0,\n *\"flops\": 0.0,\n *\"kind\": \"memory_bound\",\n *\"name\": \"gradient accumulation\""
  plan --model llama3-8b --gpu h100-sxm-80gb --seq 4096 --tp 8 --micro-batch 1 --layer-times
  --gradient-accumulation-fusion off)
pipesched_cli_test("plan: --gradient-accumulation-fusion must be on or off" 2
  "error: --gradient-accumulation-fusion: must be on or off, not \"maybe\""
  plan --model llama3-8b --gpu h100-sxm-80gb --seq 4096 --gpus 8 --global-batch 16
  --gradient-accumulation-fusion maybe)
