# Options that do not apply, exports that would overwrite, contradictory models and numbers that
# read wrong. Uses pipesched_cli_test() from cli_tests.cmake; the files are
# written at configure time into ${opt}.
set(opt ${CMAKE_CURRENT_BINARY_DIR}/options)
file(MAKE_DIRECTORY ${opt} ${opt}/dir)
set(m_ok ${data}/model_small.json)
set(g_ok ${data}/cluster_small.json)
file(WRITE ${opt}/lx.csv "4096\n2048\n1024\n512\n")
file(READ ${m_ok} model_text)
file(WRITE ${opt}/mm.costs.json "${model_text}")  # a model file named like an export's costs
string(REPLACE "\"heads\": 16,\n  \"kv_heads\": 16" "\"heads\": 15,\n  \"kv_heads\": 15" heads15
               "${model_text}")
file(WRITE ${opt}/heads15.json "${heads15}")
string(REPLACE "\"heads\": 16,\n  \"kv_heads\": 16" "\"heads\": 4096,\n  \"kv_heads\": 16" heads4096
               "${model_text}")
file(WRITE ${opt}/heads4096.json "${heads4096}")
string(REPLACE "\"tied_embeddings\": true" "\"tied_embeddings\": true, \"activation_bytes\": 3"
               bytes3 "${model_text}")
file(WRITE ${opt}/bytes3.json "${bytes3}")
file(READ ${g_ok} cluster_text)
string(REPLACE "362e12" "1e3" slow "${cluster_text}")
file(WRITE ${opt}/g_slow.json "${slow}")
string(REPLACE "51539607552" "1" tiny "${cluster_text}")
file(WRITE ${opt}/g_1b.json "${tiny}")
string(REPLACE "\"achieved_fraction\": 0.45" "\"achieved_fraction\": -0.5" neg "${cluster_text}")
file(WRITE ${opt}/g_neg.json "${neg}")
string(ASCII 27 esc)
file(WRITE ${opt}/l_ctrl.csv "100\n1${esc}[31m00\n")
# whatif: a memory model of p = 3 for a p = 4 schedule.
file(WRITE ${opt}/mem_p3.json
     [=[{"version":1,"stages":[{"activation":1,"weight_grad_input":0.5},{"activation":1,"weight_grad_input":0.5},{"activation":1,"weight_grad_input":0.5}]}]=])

set(plan_small plan --model ${m_ok} --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64)
set(pack_small pack --model ${m_ok} --gpu ${g_ok} --lengths ${opt}/lx.csv -p 2 -m 2)

# Options that do not apply are refused, naming the option and the rule.
pipesched_cli_test("options: whatif --memory-limit without --dynamic" 2
  "error: --memory-limit: only meaningful with --dynamic"
  whatif -s 1f1b -p 4 -m 8 --memory-limit 4)
pipesched_cli_test("options: whatif --dynamic --memory-limit" 0 "dynamic policy on 1f1b's placement"
  whatif -s 1f1b -p 4 -m 8 --memory-limit 4 --dynamic -n 2)
pipesched_cli_test("options: whatif memory file for another p" 2
  "error: --memory / --memory-file: whatif: memory model stages table \\(3 entries\\) must hold one entry per stage \\(p=4\\)"
  whatif -s 1f1b -p 4 -m 8 --memory-file ${opt}/mem_p3.json)
pipesched_cli_test("options: pack -v 0" 2
  "error: pack: --chunks: must be at least 1 \\(leave it unset for the schedule's default\\)"
  ${pack_small} -v 0)
pipesched_cli_test("options: pack --sequence-parallel with TP 1" 2
  "error: pack: --sequence-parallel: needs tp > 1 \\(it splits the activations over the tensor-parallel group\\), not tp=1"
  ${pack_small} --sequence-parallel)
pipesched_cli_test("options: plan --json -f text" 2 "error: --json: conflicts with --format text \\(use one\\)"
  ${plan_small} --json -f text)
pipesched_cli_test("options: plan --json -f svg" 2 "error: --json: conflicts with --format svg \\(use one\\)"
  ${plan_small} --json -f svg)
pipesched_cli_test("options: plan --json -f json" 0 "\"plans\": \\["
  ${plan_small} --json -f json --top 1)
pipesched_cli_test("options: pack --json -f text" 2 "error: --json: conflicts with --format text \\(use one\\)"
  ${pack_small} --json -f text)
pipesched_cli_test("options: whatif --json -f text" 2 "error: --json: conflicts with --format text \\(use one\\)"
  whatif -s 1f1b -p 2 -m 2 --json -f text)
pipesched_cli_test("options: pack --json alone" 0 "\"microbatches\": \\[" ${pack_small} --json)

# An export prefix must name files and overwrite nothing the command reads or writes.
pipesched_cli_test("options: plan --export dir/" 2
  "error: --export: \"${opt}/dir/\" is a directory: give a file name in it, such as ${opt}/dir/plan"
  ${plan_small} --export ${opt}/dir/)
pipesched_cli_test("options: plan --export of a directory" 2
  "error: --export: \"${opt}/dir\" is a directory: give a file name in it, such as ${opt}/dir/plan"
  ${plan_small} --export ${opt}/dir)
# An empty argument does not survive a CMake list: the shell passes it.
string(REPLACE ";" " " pack_small_line "${pack_small}")
add_test(NAME "cli: options: pack --export ''"
         COMMAND sh -c "'${cli}' ${pack_small_line} --export '' 2>&1; echo \"exit=$?\"")
set_tests_properties("cli: options: pack --export ''" PROPERTIES LABELS cli TIMEOUT 60
  PASS_REGULAR_EXPRESSION "error: --export: must not be empty \\(the files are PREFIX.csv, ...: give a name such as plan or out/plan\\)\nexit=2")
pipesched_cli_test("options: plan -o z.csv --export z" 2
  "error: --export: ${opt}/z.csv would overwrite --output ${opt}/z.csv: choose another prefix"
  ${plan_small} --top 1 -o ${opt}/z.csv --export ${opt}/z)
pipesched_cli_test("options: pack --lengths lx.csv --export lx" 2
  "error: --export: ${opt}/lx.csv would overwrite --lengths ${opt}/lx.csv: choose another prefix"
  ${pack_small} --export ${opt}/lx)
pipesched_cli_test("options: plan --model mm.costs.json --export mm" 2
  "error: --export: ${opt}/mm.costs.json would overwrite --model ${opt}/mm.costs.json"
  plan --model ${opt}/mm.costs.json --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64
  --top 1 --export ${opt}/mm)

# -o naming one of the command's inputs: exit 2 before anything is written (the input stays).
pipesched_cli_test("options: pack -o its --lengths file" 2
  "error: --output ${opt}/lx.csv: is also an input of this command"
  ${pack_small} -o ${opt}/lx.csv)
pipesched_cli_test("options: plan -o its --model file" 2
  "error: --output ${opt}/mm.costs.json: is also an input of this command"
  plan --model ${opt}/mm.costs.json --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64
  --top 1 -o ${opt}/mm.costs.json)
pipesched_cli_test("options: the lengths file -o refused to overwrite is intact" 0
  "4 sequences"
  ${pack_small})
set_tests_properties("cli: options: the lengths file -o refused to overwrite is intact"
                     PROPERTIES DEPENDS "cli: options: pack -o its --lengths file")

# A model whose heads do not divide hidden (no head_dim) is refused at its key.
pipesched_cli_test("options: model with 15 heads for hidden 2048" 2
  "error: --model: .*heads15.json: /heads: 15 must divide hidden \\(2048\\) unless head_dim is given"
  plan --model ${opt}/heads15.json --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64)
pipesched_cli_test("options: model with 4096 heads for hidden 2048" 2
  "error: --model: .*heads4096.json: /heads: 4096 must divide hidden \\(2048\\) unless head_dim is given"
  plan --model ${opt}/heads4096.json --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64)

# Numbers that read wrong.
pipesched_cli_test("options: no negative zero bubble" 0 "   1   1   4     1  2  1   64  zb-v .*\n\nplan 1 per stage"
  ${plan_small} --tp 1 --pp 4 -v 2 --schedule zb-v)
set_tests_properties("cli: options: no negative zero bubble" PROPERTIES FAIL_REGULAR_EXPRESSION "-0\\.0 %")
pipesched_cli_test("options: a 1e3 FLOP/s peak" 0 "achieved 45 % of the 1.00 kFLOP/s peak"
  plan --model ${m_ok} --gpu ${opt}/g_slow.json --gpus 4 --seq 2048 --global-batch 64 --top 1)
pipesched_cli_test("options: one byte of memory" 1
  "usable memory 0.85 B per GPU \\(85 % of 1 B\\).*error: no plan fits: the smallest need found is [0-9.]+ GiB per GPU, 0.85 B usable"
  plan --model ${m_ok} --gpu ${opt}/g_1b.json --gpus 4 --seq 2048 --global-batch 64)
pipesched_cli_test("options: --top -1 and 0 alike" 2 "error: --top: must be a whole number >= 1, got \"-1\""
  ${plan_small} --top -1)
pipesched_cli_test("options: --top 0" 2 "error: --top: must be a whole number >= 1, got 0"
  ${plan_small} --top 0)
pipesched_cli_test("options: cluster value -0.5" 2
  "error: --gpu: .*g_neg.json: /achieved_fraction: must be finite and > 0, not -0.5"
  plan --model ${m_ok} --gpu ${opt}/g_neg.json --gpus 4 --seq 2048 --global-batch 64)
pipesched_cli_test("options: activation_bytes 3 at its key" 2
  "error: --model: .*bytes3.json: /activation_bytes: must be 1, 2 or 4, not 3"
  plan --model ${opt}/bytes3.json --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64)
pipesched_cli_test("options: control bytes of a lengths file escaped" 2
  "error: --lengths: .*l_ctrl.csv line 2: \"1\\\\x1b\\[31m00\" is not a whole number of tokens"
  pack --model ${m_ok} --gpu ${g_ok} --lengths ${opt}/l_ctrl.csv -p 2 -m 1)

# Inputs that change nothing, or cannot be, are refused naming the option; nothing fitting is
# an answer (exit 1 with the report) in every format and with --export; no number prints as 0
# that is not 0, none in 300 digits.
file(WRITE ${opt}/lx_odd.csv "4096\n2047\n1024\n512\n")
string(REPEAT "100\n" 30000 many_lengths)
file(WRITE ${opt}/l30000.csv "${many_lengths}")
string(REPEAT "100\n" 70000 too_many_lengths)
file(WRITE ${opt}/l70000.csv "${too_many_lengths}")
string(REPLACE "51539607552" "1e300" g_huge "${cluster_text}")
string(REPLACE "362e12" "1e300" g_huge "${g_huge}")
file(WRITE ${opt}/g_huge.json "${g_huge}")
string(REPLACE "\"achieved_fraction\": 0.45" "\"achieved_fraction\": 1.0000001" g_over
               "${cluster_text}")
file(WRITE ${opt}/g_over1.json "${g_over}")
string(REPLACE "\"layers\": " "\"layers\": 0, \"x\": " m0_text "${model_text}")
pipesched_cli_test("options: pack --memory-limit above the GPU's memory" 2
  "error: pack: --memory-limit: 206158430208 bytes is more than the GPU's memory \\(memory_bytes 51539607552 bytes\\): a stage holds no more than its GPU"
  ${pack_small} --memory-limit 192GiB)
pipesched_cli_test("options: pack --memory-limit at the GPU's memory" 0 "limit 48.0 GiB"
  ${pack_small} --memory-limit 48GiB)
pipesched_cli_test("options: pack more lengths than one pipeline's batch" 2
  "error: pack: --lengths: 70000 sequences, more than 65536 in one global batch of one pipeline \\(max_plan_pipeline_sequences\\)"
  pack --model ${m_ok} --gpu ${g_ok} --lengths ${opt}/l70000.csv -p 2 -m 2)
pipesched_cli_test("options: pack -m over the schedule op cap" 2
  "error: pack: --microbatches: 30000 micro-batches on p=40, v=2 make PP·v·m·3 = 7200000 ops in one schedule, more than 4194304 \\(max_plan_schedule_ops\\)"
  pack --model llama3-70b --lengths ${opt}/l30000.csv -p 40 -s zb-v -m 30000)
pipesched_cli_test("options: pack a token budget over the schedule op cap" 2
  "error: pack: --tokens-per-microbatch: 30000 micro-batches on p=40, v=2 make PP·v·m·3 = 7200000 ops"
  pack --model llama3-70b --lengths ${opt}/l30000.csv -p 40 -s zb-v --tokens-per-microbatch 100)
pipesched_cli_test("options: pack --search-budget with no local search" 2
  "error: pack: --search-budget: only meaningful with a local search \\(0 search evaluations run the heuristics only\\)"
  ${pack_small} --search-evaluations 0 --search-budget 5)
pipesched_cli_test("options: pack --sequence-parallel with lengths TP does not divide" 2
  "error: pack: --sequence-parallel: sequence 1 \\(line 2\\) has 2047 tokens, not a multiple of tp=2: sequence parallelism splits each sequence's tokens over the tensor-parallel ranks \\(pad the lengths\\)"
  pack --model ${m_ok} --gpu ${g_ok} --lengths ${opt}/lx_odd.csv -p 2 -m 2 --tp 2 --sequence-parallel)
pipesched_cli_test("options: pack --json has no null" 0 "\"sequences\": 4,\n  \"stages\": 2,"
  ${pack_small} --json)
set_tests_properties("cli: options: pack --json has no null" PROPERTIES FAIL_REGULAR_EXPRESSION "null")
pipesched_cli_test("options: plan --search-evaluations with a schedule that does not search" 2
  "error: plan: search_evaluations is only meaningful for a schedule that searches \\(zb-v, zb-auto, zb-1p, zb-2p\\); 1f1b does not"
  ${plan_small} --schedule 1f1b --search-evaluations 10)
pipesched_cli_test("options: plan --search-evaluations for a baseline that searches" 0 "base "
  ${plan_small} --schedule 1f1b --search-evaluations 10 --baseline schedule=zb-v --top 1)
pipesched_cli_test("options: whatif --seed without noise" 2
  "error: --seed: only meaningful with noise \\(a cv, a link cv or stalls\\): without it every sample is the same"
  whatif -s 1f1b -p 4 -m 8 --seed 3)
pipesched_cli_test("options: whatif --seed with noise" 0 "100 samples, seed 3"
  whatif -s 1f1b -p 4 -m 8 --seed 3 --cv 0.1)
pipesched_cli_test("options: plan --sequence-parallel with a sequence TP does not divide" 2
  "error: plan: --sequence-parallel with --tp 2 needs a sequence length that is a multiple of TP, not 2047 tokens: sequence parallelism splits each sequence over the TP ranks"
  plan --model ${m_ok} --gpu ${g_ok} --gpus 4 --seq 2047 --global-batch 64 --tp 2
  --sequence-parallel)
pipesched_cli_test("options: plan searches no SP where TP does not divide the sequence" 0
  "search: "
  plan --model ${m_ok} --gpu ${g_ok} --gpus 4 --seq 2047 --global-batch 64 --tp 2 --top 20)
set_tests_properties("cli: options: plan searches no SP where TP does not divide the sequence"
  PROPERTIES FAIL_REGULAR_EXPRESSION " (none|selective|full) +on ")
pipesched_cli_test("options: plan --partition fixes PP·v for a searched v" 2
  "error: plan: no layout can run this job: TP1 PP4 v2: --partition lists 2 chunks, not PP·v = 8"
  ${plan_small} --pp 4 --tp 1 --schedule zb-v --partition 12,12)
pipesched_cli_test("options: plan --partition picks the v it fits" 0 "   1   1   4     1  2 "
  ${plan_small} --pp 4 --tp 1 --partition 3,3,3,3,3,3,3,3 --top 1)
pipesched_cli_test("options: a fraction just above 1 says so" 2
  "error: --gpu: .*g_over1.json: /achieved_fraction: must be at most 1, not 1.0000001"
  plan --model ${m_ok} --gpu ${opt}/g_over1.json --gpus 4 --seq 2048 --global-batch 64)
pipesched_cli_test("options: --usable-fraction just above 1 says so" 2
  "error: --usable-fraction: must be in \\(0, 1\\], got 1.0000001"
  ${plan_small} --usable-fraction 1.0000001)
pipesched_cli_test("options: huge memory and peak print in powers of ten" 0
  "usable memory [0-9.]+e\\+290 GiB per GPU \\(85 % of 9.31e\\+290 GiB\\).* of the 1e\\+300 FLOP/s peak.*busy\n +0 +[0-9]+ +[^\n]* [0-9.]+e-[0-9]+ s\n"
  plan --model ${m_ok} --gpu ${opt}/g_huge.json --gpus 4 --seq 2048 --global-batch 64 --top 1)
pipesched_cli_test("options: plan --export when nothing fits" 1
  "no plan fits: .*error: no plan fits: .*--export: nothing written: no plan fits"
  plan --model ${m_ok} --gpu ${opt}/g_1b.json --gpus 4 --seq 2048 --global-batch 64
  --export ${opt}/nothing)
pipesched_cli_test("options: plan -f svg when nothing fits" 1
  "<svg .*no plan fits: the smallest need found is [0-9.]+ GiB per GPU, 0.85 B usable</text>"
  plan --model ${m_ok} --gpu ${opt}/g_1b.json --gpus 4 --seq 2048 --global-batch 64 -f svg)
pipesched_cli_test("options: pack --export when nothing fits" 1
  "does not fit.*error: no packing and order fits the memory limit.*--export: nothing written: no packing fits"
  ${pack_small} --memory-limit 1GiB --export ${opt}/nothing_pack)
string(REPLACE "\"name\": \"" "\"name\": \"x\\u001b[31m" m_ctrl "${model_text}")
file(WRITE ${opt}/model_ctrl.json "${m_ctrl}")
pipesched_cli_test("options: a model name with control characters" 2
  "error: --model: .*model_ctrl.json: /name: must hold no control characters \\(it is printed in reports\\), not \"x\\\\u001b\\[31m"
  plan --model ${opt}/model_ctrl.json --gpu ${g_ok} --gpus 4 --seq 2048 --global-batch 64)
