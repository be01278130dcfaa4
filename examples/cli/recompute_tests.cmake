# Activation recomputation: --recompute / --recompute-policy and the third
# --memory value (M_in). Worked by hand in tests/transform/test_recompute.cpp: 1F1B, p = 2,
# m = 3, unit costs, every chunk recomputed: makespan 15, stage 0 peaks at M_in·2 + M_B = 1.25.
pipesched_cli_test("recompute: R before the backward" 0
  "makespan 15 .*stage 0 \\|F0  F1  R0  \\.+BW0     F2  R1  BW1     R2  \\.+BW2"
  simulate -s 1f1b -p 2 -m 3 --recompute all --memory 1,0.5,0.25)
pipesched_cli_test("recompute: peak memory with M_in" 0
  "\"peak_memory\": 1.25,.*\"peak_memory\": 1.0,"
  simulate -s 1f1b -p 2 -m 3 --recompute all --memory 1,0.5,0.25 --json)
pipesched_cli_test("recompute: idle slot within --memory-limit" 0
  "makespan 15 .*stage 0 \\|F0  F1  R0  R1  \\.+BW0     F2  R2  BW1"
  simulate -s 1f1b -p 2 -m 3 --recompute all --recompute-policy idle-slot --memory 1,0.5,0.25
  --memory-limit 10)
pipesched_cli_test("recompute: chosen chunks, then lowered" 0
  "valid: zb-v \\(p=4, m=8, v=2, 400 ops\\)"
  validate -s zb-v -p 4 -m 8 --recompute 0,7 --with-comm)
pipesched_cli_test("recompute: JSON carries R and the mark" 0
  "\\{\"kind\":\"F\",\"mb\":0,\"recompute\":true\\}.*\\{\"kind\":\"R\",\"mb\":0\\}"
  generate -s 1f1b -p 2 -m 2 --recompute 0 --format json)

# analyze times each R as measured: a run with R = 0 (and 0.5) predicts its own makespan (15,
# 17 in cost units: 15000 / 17000 trace units), not every R as an F (19000), and the re-plans
# recompute the same stages, so no gain is one of skipping R.
set(rc_dir ${CMAKE_CURRENT_BINARY_DIR}/recompute_analyze)
file(MAKE_DIRECTORY ${rc_dir})
file(WRITE ${rc_dir}/r0.json [=[{"version":1,"forward":1,"backward_input":1,"backward_weight":1,"recompute":0}]=])
file(WRITE ${rc_dir}/r5.json [=[{"version":1,"forward":1,"backward_input":1,"backward_weight":1,"recompute":0.5}]=])
# ZB-V with chunks of unequal cost (stage 0: 0.5 and 3, stage 3: 2 and 1, the others 1): each
# chunk timed by its own medians predicts 88; the stages' medians predicted 93.75.
file(WRITE ${rc_dir}/chunks.json [=[{"version":1,"chunks":[
  [{"forward":0.5,"backward_input":0.5,"backward_weight":0.5},{"forward":3,"backward_input":3,"backward_weight":3}],
  [{"forward":1,"backward_input":1,"backward_weight":1},{"forward":1,"backward_input":1,"backward_weight":1}],
  [{"forward":1,"backward_input":1,"backward_weight":1},{"forward":1,"backward_input":1,"backward_weight":1}],
  [{"forward":2,"backward_input":2,"backward_weight":2},{"forward":1,"backward_input":1,"backward_weight":1}]]}]=])
foreach(case "r0;1f1b;-p;2;-m;4;--recompute;all" "r5;1f1b;-p;2;-m;4;--recompute;all"
             "chunks;zb-v;-p;4;-m;8")
  list(POP_FRONT case costs schedule)
  string(REPLACE ";" " " case "${case}")
  add_test(NAME "cli: recompute: analyze times the run's own order as it ran (${costs})"
           COMMAND sh -c "'$<TARGET_FILE:pipesched_cli>' simulate -s ${schedule} ${case} --costs ${rc_dir}/${costs}.json | head -1 && '$<TARGET_FILE:pipesched_cli>' simulate -s ${schedule} ${case} --costs ${rc_dir}/${costs}.json -f chrome -o ${rc_dir}/${costs}.trace.json && '$<TARGET_FILE:pipesched_cli>' analyze ${rc_dir}/${costs}.trace.json --replan 1f1b zb-v")
  set_tests_properties("cli: recompute: analyze times the run's own order as it ran (${costs})"
    PROPERTIES LABELS cli TIMEOUT 60)
endforeach()
set_tests_properties("cli: recompute: analyze times the run's own order as it ran (r0)" PROPERTIES
  PASS_REGULAR_EXPRESSION "makespan 15 cost units.*R median \\(MAD\\).*the run's order predicts 15000 trace units.*1f1b +15000 trace units +no gain")
set_tests_properties("cli: recompute: analyze times the run's own order as it ran (r5)" PROPERTIES
  PASS_REGULAR_EXPRESSION "makespan 17 cost units.*the run's order predicts 17000 trace units")
set_tests_properties("cli: recompute: analyze times the run's own order as it ran (chunks)" PROPERTIES
  PASS_REGULAR_EXPRESSION "makespan 88 cost units.*the run's order predicts 88000 trace units")
