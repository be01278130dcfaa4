# "no number a user can misread": per-stage units, one picture of time, the
# simulation JSON v1 on stdout, shapes checked, no silent ignores, overflow as errors, input
# recognised by content. Uses pipesched_cli_test() from cli_tests.cmake; the runs that write a
# file or read standard input go through cmake/cli_roundtrip.cmake.
set(units ${CMAKE_CURRENT_BINARY_DIR}/units)
file(MAKE_DIRECTORY ${units})
set(check $<TARGET_FILE:read_simulation_check>)

# Runs `pipesched ARGN` expecting EXIT; OUT (optional) is shown afterwards, read back by
# read_simulation_check when READ is ON; STDIN (optional) feeds standard input.
function(pipesched_cli_run name expected_exit regex)
  cmake_parse_arguments(run "READ" "OUT;STDIN" "ARGS" ${ARGN})
  set(defs -DEXPECT=${expected_exit})
  if(run_OUT)
    list(APPEND defs -DOUT=${run_OUT})
  endif()
  if(run_READ)
    list(APPEND defs -DCHECK=${check})
  endif()
  if(run_STDIN)
    list(APPEND defs -DSTDIN=${run_STDIN})
  endif()
  add_test(NAME "cli: ${name}"
           COMMAND ${CMAKE_COMMAND} ${defs} -P ${PROJECT_SOURCE_DIR}/cmake/cli_roundtrip.cmake
                   ${cli} ${run_ARGS})
  set_tests_properties("cli: ${name}" PROPERTIES LABELS cli TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "${regex}.*run done, exit code ${expected_exit} as expected")
endfunction()

# 1. Costs and memory per stage: ZB-V and interleaved 1F1B at the same --cost / --memory as
# 1F1B (makespan 33, peak 4 = p·M_B). ZB-V: span 24 on every stage (6m ops of half a unit),
# makespan 25.5, peak 4; it was makespan 51 and peak 8 when the values were per chunk.
pipesched_cli_test("units: zb-v per stage" 0
  "\"makespan\": 25\\.5,.*\"peak_memory\": 4\\.0,\n      \"span\": 24\\.0"
  simulate -s zb-v -p 4 -m 8 --json)
pipesched_cli_test("units: interleaved per stage" 0 "makespan 28\\.5 cost units, bubble rate 0\\.1579"
  simulate -s interleaved-1f1b -p 4 -m 8)
pipesched_cli_test("units: zb-v within 1F1B's limit p*M_B" 0 "valid: zb-v"
  validate -s zb-v -p 4 -m 8 --memory-limit 4)
pipesched_cli_test("units: interleaved above p*M_B" 1
  "memory_budget: stage 0 exceeds its memory limit 4 .*peak 5\\.5"
  validate -s interleaved-1f1b -p 4 -m 8 --memory-limit 4)
pipesched_cli_test("units: 1f1b at its own peak" 0 "valid: 1f1b"
  validate -s 1f1b -p 4 -m 8 --memory-limit 4)

# 2. One picture of time: generate's timeline is timed with the same default costs as simulate
# (BW = T_B + T_W = 2), so both say makespan 33 for 1F1B (generate said 22: BW as one step).
pipesched_cli_test("time: generate and simulate agree (1f1b)" 0
  "1f1b  p=4 m=8 v=1  makespan 33 cost units  bubble rate 27\\.3%" generate -s 1f1b -p 4 -m 8)
pipesched_cli_test("time: generate uses --cost" 0 "zb-h1  p=4 m=8 v=1  makespan 54 "
  generate -s zb-h1 -p 4 -m 8 --cost 2,2,2)

# 3. simulate --json is the simulation result JSON v1, read back by read_simulation.
pipesched_cli_run("json: zb-auto round trip" 0
  "read ok: name=zb-auto p=4 m=8 v=1 makespan=27 bubble_rate=0\\.1111 utilization=0\\.8889 lower_bound=27 peak=4 stages=4 deadlock=no violations=0"
  OUT ${units}/zb_auto.json READ ARGS simulate -s zb-auto -p 4 -m 8 --json -o ${units}/zb_auto.json)
pipesched_cli_run("json: zb-v round trip" 0
  "read ok: name=zb-v p=4 m=8 v=2 makespan=25\\.5 .* peak=4 stages=4"
  OUT ${units}/zb_v.json READ ARGS simulate -s zb-v -p 4 -m 8 -f json -o ${units}/zb_v.json)
pipesched_cli_run("json: over budget still JSON, exit 1" 1
  "memory_budget: stage 0 exceeds its memory limit 3.*read ok: name=1f1b .*memory_limit=3 peak=4 .*violations=1"
  OUT ${units}/over.json READ
  ARGS simulate -s 1f1b -p 4 -m 8 --memory-limit 3 --json -o ${units}/over.json)
pipesched_cli_run("json: deadlock still JSON, exit 1" 1
  "read ok: name=deadlock p=2 .*deadlock=yes violations=3"
  OUT ${units}/deadlock.json READ
  ARGS simulate --input ${data}/deadlock.json --json -o ${units}/deadlock.json)
pipesched_cli_test("json: deadlock on stdout" 1
  "^\\{\n  \"bubble_rate\": .*\"deadlock\": \"deadlock: stage 0 blocked.*\"violations\": \\[\n    \"deadlock: "
  simulate --input ${data}/deadlock.json --json)
pipesched_cli_test("json: --json with --format svg" 2
  "error: --json: conflicts with --format svg" simulate -s 1f1b -p 2 -m 2 --json -f svg)

# 4. Shapes are checked, never guessed.
file(WRITE ${units}/costs_2_stages.json
  [=[{"version":1,"stages":[{"forward":1,"backward_input":1,"backward_weight":1},{"forward":2,"backward_input":2,"backward_weight":2}]}]=])
file(WRITE ${units}/costs_v2.json
  [=[{"version":1,"chunks":[[{"forward":1,"backward_input":1,"backward_weight":1},{"forward":1,"backward_input":1,"backward_weight":1}],[{"forward":1,"backward_input":1,"backward_weight":1},{"forward":1,"backward_input":1,"backward_weight":1}]]}]=])
file(WRITE ${units}/costs_links_3.json [=[{"version":1,"links":[[0,1,1],[1,0,1],[1,1,0]]}]=])
file(WRITE ${units}/memory_static_3.json [=[{"version":1,"static":[1,2,3]}]=])
pipesched_cli_test("shape: stages table shorter than p" 2
  "error: simulate: cost model stages table \\(2 entries\\) must hold one entry per stage \\(p=4\\)"
  simulate -s 1f1b -p 4 -m 8 --costs ${units}/costs_2_stages.json)
pipesched_cli_test("shape: chunks table v=2 on a v=1 schedule" 2
  "error: simulate: cost model chunks table \\(2 x 2\\) must be p x v \\(2 x 1\\)"
  simulate -s 1f1b -p 2 -m 4 --costs ${units}/costs_v2.json)
pipesched_cli_test("shape: chunks table fits zb-v" 0 "makespan "
  simulate -s zb-v -p 2 -m 4 --costs ${units}/costs_v2.json)
pipesched_cli_test("shape: links matrix 3x3 for p=2" 2
  "error: simulate: cost model links matrix \\(3 x 3\\) must be p x p \\(2 x 2\\)"
  simulate -s gpipe -p 2 -m 2 --costs ${units}/costs_links_3.json)
pipesched_cli_test("shape: static list of 3 for p=4" 2
  "error: check_memory: memory model static list \\(3 entries\\) must hold one entry per stage \\(p=4\\)"
  validate -s 1f1b -p 4 -m 8 --memory-file ${units}/memory_static_3.json --memory-limit 9)
pipesched_cli_test("shape: a generator checks too" 2
  "error: zb-auto: cost model stages table \\(2 entries\\) must hold one entry per stage \\(p=4\\)"
  generate -s zb-auto -p 4 -m 8 --costs ${units}/costs_2_stages.json)

# 5. No silent ignores.
pipesched_cli_test("ignore: generate 1f1b over --memory-limit" 1
  "memory_budget: stage 0 exceeds its memory limit 2 at op 2 \\(F2\\): 3 \\(peak 4 at op 3\\)"
  generate -s 1f1b -p 4 -m 8 --memory-limit 2)
pipesched_cli_test("ignore: generate 1f1b within --memory-limit" 0 "stage 0: F0 F1 F2 F3"
  generate -s 1f1b -p 4 -m 8 --memory-limit 4)
foreach(fmt svg chrome torch-csv)
  pipesched_cli_run("ignore: simulate -f ${fmt} over budget exits 1" 1
    "memory_budget: stage 0 exceeds its memory limit 3"
    OUT ${units}/over.${fmt}
    ARGS simulate -s 1f1b -p 4 -m 8 --memory-limit 3 -f ${fmt} -o ${units}/over.${fmt})
endforeach()
pipesched_cli_test("ignore: simulate -f svg to stdout, violations on stderr" 1
  "</svg>.*memory_budget: stage 0 exceeds"
  simulate -s 1f1b -p 4 -m 8 --memory-limit 3 -f svg)
pipesched_cli_run("ignore: simulate text -o writes the file" 0
  "file .*report.txt:\n.*makespan 9 cost units, bubble rate 0\\.3333"
  OUT ${units}/report.txt ARGS simulate -s 1f1b -p 2 -m 2 -o ${units}/report.txt)
pipesched_cli_test("ignore: --chunks with --input" 2
  "error: --chunks: comes from the given schedule \\(v=1\\): leave it unset"
  validate --input ${data}/ok.json -v 3)
pipesched_cli_test("ignore: -p without -m" 2 "error: --microbatches is required with --schedule"
  generate -s 1f1b -p 4)
pipesched_cli_test("ignore: -m without -p" 2 "error: --stages is required with --schedule"
  simulate -s 1f1b -m 4)

# 6. Numbers that overflow are errors; subnormal numbers are numbers.
pipesched_cli_test("overflow: costs add up to inf" 2
  "error: simulate: the makespan \\(inf\\) is not a finite number"
  simulate -s 1f1b -p 2 -m 2 --cost 1e308,1e308,1e308)
pipesched_cli_test("overflow: with --json, no null" 2
  "error: simulate: the makespan \\(inf\\) is not a finite number"
  simulate -s 1f1b -p 2 -m 2 --cost 1e308,1e308,1e308 --json)
pipesched_cli_test("overflow: generate text" 2 "error: simulate: the makespan \\(inf\\)"
  generate -s 1f1b -p 2 -m 2 --cost 1e308,1e308,1e308)
pipesched_cli_test("overflow: memory 1e308 with zb-1p" 2
  "error: zb-1p: the default memory limit of stage 0 \\(static \\+ 1\\*p\\*M_B = inf\\) is not a finite number"
  generate -s zb-1p -p 4 -m 8 --memory 1e308,0)
pipesched_cli_test("overflow: zb-auto costs" 2
  "error: zb-auto: the costs are too large: the total work \\(inf\\) is not a finite number"
  generate -s zb-auto -p 4 -m 8 --cost 1e308,1e308,1e308)
pipesched_cli_test("overflow: memory peak" 2
  "error: check_memory: the peak memory of stage 0 \\(inf\\) is not a finite number"
  simulate -s gpipe -p 2 -m 4 --memory 1e308,0)
pipesched_cli_test("overflow: cost beyond a double" 2
  "error: --cost: expected TF,TB,TW\\[,TC\\] \\(finite numbers >= 0\\), got \"1e999,1,1\""
  simulate -s 1f1b -p 2 -m 2 --cost 1e999,1,1)
pipesched_cli_test("overflow: subnormal cost parses" 0 "makespan [0-9]"
  simulate -s 1f1b -p 2 -m 2 --cost 5e-324,1,1)
pipesched_cli_test("overflow: subnormal memory limit parses" 1 "memory_budget: stage 0 exceeds its memory limit 4.9"
  validate -s 1f1b -p 2 -m 2 --memory-limit 5e-324)

# 8. Input recognised by content, not by name; - reads standard input.
configure_file(${data}/ok.json ${units}/json_named.torch-csv COPYONLY)
configure_file(${data}/zb_h1_p2m2.csv ${units}/CSV_NAMED.JSON COPYONLY)
configure_file(${data}/zb_h1_p2m2.csv ${units}/UP.CSV COPYONLY)
pipesched_cli_test("input: JSON named .torch-csv" 0 "valid: "
  validate --input ${units}/json_named.torch-csv)
pipesched_cli_test("input: CSV named .JSON" 0 "valid: CSV_NAMED \\(p=2, m=2, v=1, 12 ops\\)"
  validate --input ${units}/CSV_NAMED.JSON)
pipesched_cli_test("input: upper-case .CSV" 0 "valid: UP \\(p=2, m=2, v=1, 12 ops\\)"
  validate --input ${units}/UP.CSV)
pipesched_cli_test("input: --input-format json on a CSV" 2
  "error: .*UP.CSV \\(read as json\\): schedule JSON: malformed JSON"
  validate --input ${units}/UP.CSV --input-format json)
pipesched_cli_test("input: --input-format xml" 2
  "error: --input-format: must be json or torch-csv, not \"xml\""
  validate --input ${units}/UP.CSV --input-format xml)
pipesched_cli_run("input: - reads standard input (JSON)" 0 "valid: "
  STDIN ${data}/ok.json ARGS validate --input -)
pipesched_cli_run("input: - reads standard input (CSV)" 0 "makespan "
  STDIN ${data}/zb_h1_p2m2.csv ARGS simulate --input -)

# 7. Every time printed says its unit, and a tiny rate is not rounded to 0.
pipesched_cli_test("units: svg title says cost units" 0
  "zb-h1: p=4 m=8 v=1, makespan 27 cost units, bubble rate 11\\.1%" simulate -s zb-h1 -p 4 -m 8 -f svg)
pipesched_cli_test("units: simulate table says its times' unit" 0
  " stage       span       busy       idle   idle%  peak memory  \\(times in cost units\\)"
  simulate -s zb-h1 -p 4 -m 8)
pipesched_cli_test("units: link times say cost units" 0
  "link 0: busy [0-9.]+ cost units, [0-9]+ pipeline messages \\([0-9.e+]+ bytes\\) waited [0-9.]+ cost units, .*all-reduce ends at [0-9.]+ cost units"
  simulate -s 1f1b -p 2 -m 2 --link-bandwidth 1 --message-bytes 1)
pipesched_cli_test("units: analyze says trace units" 0
  "per mb  \\(times in trace units\\).*straggler: stage 1: 35\\.44 trace units per micro-batch, 5\\.642 trace units \\(18\\.9%\\).*gain 74\\.21 trace units \\(20\\.5%\\)"
  analyze ${PROJECT_SOURCE_DIR}/examples/robustness/straggler_run.csv)
file(WRITE ${units}/tiny_peak_model.json
  "{\"version\": 1, \"name\": \"gpt-small\", \"layers\": 24, \"hidden\": 2048, \"ffn\": 8192, \"heads\": 16, \"kv_heads\": 16, \"vocab\": 50257, \"mlp\": \"gelu\", \"norm\": \"layernorm\", \"tied_embeddings\": true}\n")
file(WRITE ${units}/tiny_peak_gpu.json
  "{\"version\": 1, \"name\": \"tiny\", \"memory_bytes\": 51539607552, \"peak_flops_bf16\": 1e3, \"gpus_per_node\": 8, \"intra_node_bandwidth\": 32e9, \"intra_node_latency\": 5e-6, \"inter_node_bandwidth\": 25e9, \"inter_node_latency\": 10e-6}\n")
pipesched_cli_test("units: a tiny peak's TFLOP/s column in the unit that fits" 0
  "of the 1\\.00 kFLOP/s peak.*   1   1   4 .* tok/s +[0-9.]+ FLOP/s +[0-9.]+ %"
  plan --model ${units}/tiny_peak_model.json --gpu ${units}/tiny_peak_gpu.json --gpus 8 --seq 1024
  --global-batch 16 --tp 1 --pp 4 --top 1)
