# `pipesched pack`: one global batch's sequence lengths in, the packing into
# micro-batches and their order chosen by simulating them, against the naive baseline.
set(pack_lengths ${data}/lengths_long_tail.txt)
pipesched_cli_test("pack: report with units" 0
  "llama3-8b on 4 x h100-sxm-80gb \\(TP 1, PP 4\\), zb-h1: 32 sequences \\([0-9.]+ k tokens\\) in 8 micro-batches\nstep time [0-9.]+ s, naive baseline \\(file order, equal counts, 8 micro-batches\\) [0-9.]+ s: [0-9.]+x its speed\npeak memory per stage [0-9.]+ GiB, [0-9.]+ GiB, [0-9.]+ GiB, [0-9.]+ GiB \\(limit [0-9.]+ GiB\\)\n.* slot micro-batch +tokens +sum L\\^2 \\(tok\\^2\\) +sequences"
  pack --model llama3-8b --lengths ${pack_lengths} -m 8 --stages 4 --schedule zb-h1)
pipesched_cli_test("pack: JSON contract" 0
  "\"baseline_step_time\": [0-9.e-]+,.*\"memory_limit\": [0-9.e+]+,\n +\"microbatches\": \\[\n +\\{\n +\"sequences\": \\[[0-9,\n ]+\\],\n +\"squares\": [0-9.e+]+,\n +\"tokens\": [0-9]+\n.*\"order\": \\[.*\"peak_memory\": \\[.*\"step_time\": [0-9.e-]+,.*\"version\": 1\n}"
  pack --model llama3-8b --lengths ${pack_lengths} -m 8 --stages 4 --schedule 1f1b --json)
pipesched_cli_test("pack: a token budget" 0
  "\"tokens_per_microbatch\": 16384"
  pack --model llama3-8b --lengths ${pack_lengths} --tokens-per-microbatch 16384 --stages 4
  --schedule zb-auto --search-evaluations 20 --json)
pipesched_cli_test("pack: a memory limit nothing meets" 1
  "\"fits\": false.*error: no packing and order fits the memory limit: the smallest peak found is [0-9.]+ GiB per GPU, the limit 18.63 GiB"
  pack --model llama3-8b --lengths ${pack_lengths} -m 8 --stages 4 --memory-limit 20GB
  --search-evaluations 4 --json)
# Bad input: exit 2 naming the value.
# A bad lengths file: exit 2, naming --lengths, the file and (after it) what is wrong.
function(pack_bad_lengths name file after_file)
  pipesched_cli_test("pack: ${name}" 2 "error: --lengths: .*${file}${after_file}"
    pack --model llama3-8b --lengths ${data}/${file} -m 2 --stages 4)
endfunction()
pack_bad_lengths("a negative length" lengths_negative.txt
  " line 3: -5 tokens: a sequence length must be at least 1")
pack_bad_lengths("a zero length" lengths_zero.txt
  " line 2: 0 tokens: a sequence length must be at least 1")
pack_bad_lengths("a fractional length" lengths_fraction.txt
  " line 2: \"1536.5\" is not a whole number of tokens \\(one length per line\\)")
pack_bad_lengths("no lengths" lengths_empty.txt
  ": no sequence lengths \\(one whole number of tokens per line\\)")
pipesched_cli_test("pack: a sequence longer than the token budget" 2
  "error: pack: --tokens-per-microbatch: sequence 2 \\(line 3\\) has 9000 tokens, more than the budget of 8192 tokens per micro-batch"
  pack --model llama3-8b --lengths ${data}/lengths_long_one.txt --tokens-per-microbatch 8192 --stages 4)
pipesched_cli_test("pack: more micro-batches than sequences" 2
  "error: pack: --microbatches: m=5 is more than the 4 sequences \\(each micro-batch holds at least one\\)"
  pack --model llama3-8b --lengths ${data}/lengths_long_one.txt -m 5 --stages 4)
pipesched_cli_test("pack: neither a budget nor a count" 2
  "error: pack: --microbatches: give either --tokens-per-microbatch"
  pack --model llama3-8b --lengths ${data}/lengths_long_one.txt --stages 4)
pipesched_cli_test("pack: a bad memory limit" 2
  "error: --memory-limit: must be a number of bytes > 0 with an optional unit .*, not \"-3GiB\""
  pack --model llama3-8b --lengths ${data}/lengths_long_one.txt -m 2 --stages 4 --memory-limit -3GiB)
pipesched_cli_test("pack: no such lengths file" 2
  "error: --lengths: .*does_not_exist.txt: cannot open file"
  pack --model llama3-8b --lengths ${data}/does_not_exist.txt -m 2 --stages 4)
pipesched_cli_check("pack: the exported schedule reads back and reproduces its step time and peaks"
  pack_export_check.cmake 120 "pack export ok" -DWORK=${CMAKE_CURRENT_BINARY_DIR}/pack_export
  "-DARGS=--model;llama3-8b;--lengths;${pack_lengths};-m;8;--stages;4;--schedule;zb-h1")
# Per-micro-batch factors from a cost model file: micro-batch 1 twice as long.
pipesched_cli_test("simulate: per-micro-batch cost factors from the costs file" 0
  "makespan 16 cost units,"
  simulate -s 1f1b -p 2 -m 3 --costs ${data}/costs_microbatches.json)
pipesched_cli_check("pack: more memory or a faster link never gives a slower result"
  pack_monotone_check.cmake 300 "pack monotone ok" -DWORK=${CMAKE_CURRENT_BINARY_DIR}/pack_monotone
  -DLENGTHS=${CMAKE_CURRENT_SOURCE_DIR}/testdata/lengths_long_tail.txt)
# The README's pack example shows what `pipesched pack` prints now.
add_test(NAME "docs: README pack example is current"
         COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:pipesched_cli> -DREADME=${PROJECT_SOURCE_DIR}/README.md
                 -DCOMMAND=pack -DMARKER=pack-example
                 "-DARGS=--model;llama3-8b;--lengths;${CMAKE_CURRENT_SOURCE_DIR}/testdata/lengths_long_tail.txt;-m;8;--stages;4;--schedule;zb-h1"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/check_readme_example.cmake)
set_tests_properties("docs: README pack example is current" PROPERTIES
  LABELS "cli;docs" TIMEOUT 120 PASS_REGULAR_EXPRESSION "readme pack-example ok")
