# The CLI contract: names, exit codes, messages. Each test runs `pipesched` and matches its
# output and its exit code (cmake/expect_exit.cmake prints a marker only on the right code,
# since PASS_REGULAR_EXPRESSION alone would ignore the exit code).
set(cli $<TARGET_FILE:pipesched_cli>)
set(data ${CMAKE_CURRENT_SOURCE_DIR}/testdata)

function(pipesched_cli_test name expected_exit regex)
  add_test(NAME "cli: ${name}"
           COMMAND ${CMAKE_COMMAND} -DEXPECT=${expected_exit} -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake
                   ${cli} ${ARGN})
  set_tests_properties("cli: ${name}" PROPERTIES LABELS cli TIMEOUT 60 PASS_REGULAR_EXPRESSION "${regex}.*exit code ${expected_exit} as expected")
endfunction()

# A check script that runs `pipesched` itself: `cmake -DCLI=pipesched DEFINITIONS... -P SCRIPT
# RUN...` (the -D definitions are the arguments before RUN; RUN, a command for the scripts
# that take one after -P), passing on the script's OK line within TIMEOUT seconds.
function(pipesched_cli_check name script timeout ok)
  cmake_parse_arguments(PARSE_ARGV 4 check "" "" "RUN")
  add_test(NAME "cli: ${name}"
           COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:pipesched_cli> ${check_UNPARSED_ARGUMENTS}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/${script} ${check_RUN})
  set_tests_properties("cli: ${name}" PROPERTIES LABELS cli TIMEOUT ${timeout}
                       PASS_REGULAR_EXPRESSION "${ok}")
endfunction()

pipesched_cli_test("list" 0 "zb-h1 +ZB-H1" list)
pipesched_cli_test("list: the V-shape schedules" 0
  "v-half +V-Half[^\n]*\nv-min +V-Min[^\n]*\ndualpipev +DualPipeV \\(PyTorch ScheduleDualPipeV\\)" list)
pipesched_cli_test("generate text" 0 "stage 0: F0 F1 F2 F3 B0 W0 F4 B1 W1" generate --schedule zb-h1 --stages 4 --microbatches 8)
pipesched_cli_test("generate json" 0 "\"version\":1.*\"ops\":\\[\n  \\[\\{\"kind\":\"F\",\"mb\":0\\}" generate -s 1f1b -p 2 -m 2 --format json)
pipesched_cli_test("generate unknown schedule" 2 "error: unknown schedule \"nope\" \\(known: gpipe" generate --schedule nope -p 2 -m 2)
pipesched_cli_test("generate p=0" 2 "error: zb-h1: stages \\(p=0\\) must be at least 1" generate --schedule zb-h1 -p 0 -m 2)
pipesched_cli_test("generate bad format" 2 "error: --format: unknown format \"xml\"" generate -s zb-h1 -p 2 -m 2 --format xml)
pipesched_cli_test("generate negative" 2 "error: .*stages" generate -s zb-h1 -p -3 -m 2)
pipesched_cli_test("validate generated" 0 "valid: zb-h2 \\(p=4, m=8, v=1, 96 ops\\)" validate -s zb-h2 -p 4 -m 8)
pipesched_cli_test("validate file ok" 0 "valid: " validate --input ${data}/ok.json)
pipesched_cli_test("validate deadlock" 1 "deadlock: stage 0, op 1 \\(BW0\\): blocked waiting for B/BW0 of chunk 0 on stage 1" validate --input ${data}/deadlock.json)
pipesched_cli_test("validate missing" 1 "missing: stage 1: backward \\(BW, or B and W\\) 1 of chunk 0 is missing" validate --input ${data}/missing.json)
pipesched_cli_test("validate bad kind" 2 "error: .*bad_kind.json \\(read as json\\): /ops/1/2/kind: unknown op kind \"X\"" validate --input ${data}/bad_kind.json)
pipesched_cli_test("validate malformed" 2 "error: .*malformed.json \\(read as json\\): schedule JSON: malformed JSON" validate --input ${data}/malformed.json)
pipesched_cli_test("validate wrong type" 2 "error: .*wrong_type.json \\(read as json\\): /microbatches: must be an integer, not string" validate --input ${data}/wrong_type.json)
pipesched_cli_test("validate no file" 2 "error: .*does_not_exist.json: cannot open file" validate --input ${data}/does_not_exist.json)
pipesched_cli_test("no subcommand" 2 "error: " )
pipesched_cli_test("simulate report" 0 "makespan 27 cost units, bubble rate 0.1111.*     0         27         24          3   11.1%            4" simulate -s zb-h1 -p 4 -m 8)
pipesched_cli_test("simulate json" 0 "\"bubble_rate\": 0.0.*\"makespan\": 27.0.*\"stages\": \\[" simulate -s zb-h2 -p 4 -m 8 --cost 1,1,1 --json)
pipesched_cli_test("simulate closed form 1f1b (3,4,2) p=8 m=24" 0 "makespan 279 cost units," simulate -s 1f1b -p 8 -m 24 --cost 3,4,2)
pipesched_cli_test("simulate comm (gpipe closed form)" 0 "makespan 39 cost units," simulate -s gpipe -p 4 -m 8 --cost 1,1,1,1)
pipesched_cli_test("simulate over budget" 1 "memory_budget: stage 0 exceeds its memory limit 2" simulate -s 1f1b -p 4 -m 8 --memory-limit 2)
pipesched_cli_test("simulate invalid schedule" 1 "deadlock: " simulate --input ${data}/deadlock.json)
pipesched_cli_test("simulate bad cost" 2 "error: --cost: expected TF,TB,TW\\[,TC\\] \\(finite numbers >= 0\\), got \"1,-1,1\" \\(\"-1\" is not one\\)" simulate -s 1f1b -p 2 -m 2 --cost 1,-1,1)
pipesched_cli_test("validate memory budget" 1 "memory_budget: stage 0 exceeds its memory limit 4 at op 4 \\(F4\\): 5 \\(peak 7 at op 6\\)" validate -s zb-h2 -p 4 -m 8 --memory-limit 4)
pipesched_cli_test("validate within budget" 0 "valid: zb-h1" validate -s zb-h1 -p 4 -m 8 --memory 1,0.5 --memory-limit 4)
# One limit per stage: 1F1B's peaks are 4, 3, 2, 1 (p = 4, M_B = 1).
pipesched_cli_test("simulate per-stage limits within" 0 "makespan" simulate -s 1f1b -p 4 -m 8 --memory-limit 4,3,2,1)
pipesched_cli_test("simulate per-stage limits over" 1 "memory_budget: stage 2 exceeds its memory limit 1.5" simulate -s 1f1b -p 4 -m 8 --memory-limit 4,3,1.5,1)
pipesched_cli_test("simulate --json per-stage limits" 1 "\"memory_limit\": \\[\n *4.0,\n *3.0,\n *1.5,\n *1.0\n *\\]" simulate -s 1f1b -p 4 -m 8 --memory-limit 4,3,1.5,1 --json)
pipesched_cli_test("zb-auto within per-stage limits" 0 "valid: zb-auto" validate -s zb-auto -p 4 -m 8 --memory-limit 4,4,3,2)
pipesched_cli_test("generate with comm" 0 "stage 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 BW0 RECV_B1 BW1\nstage 1: RECV_F0 F0 RECV_F1 BW0 SEND_B0 F1 BW1 SEND_B1" generate -s 1f1b -p 2 -m 2 --with-comm)
pipesched_cli_test("generate with comm json peers" 0 "\"kind\":\"SEND_F\",\"mb\":0,\"peer\":1" generate -s 1f1b -p 2 -m 2 --with-comm --recv late -f json)
pipesched_cli_test("validate with comm late" 0 "valid: zb-h2 \\(p=4, m=8, v=1, 192 ops\\)" validate -s zb-h2 -p 4 -m 8 --with-comm --recv late)
pipesched_cli_test("simulate with comm" 0 "makespan 27 cost units, bubble rate 0.1111" simulate -s zb-h1 -p 4 -m 8 --with-comm)
pipesched_cli_test("recv without with-comm" 2 "error: --recv: only meaningful with --with-comm" validate -s zb-h1 -p 4 -m 8 --recv late)
pipesched_cli_test("validate comm deadlock file" 1 "deadlock: .*cycle: stage 0 -> stage 1 -> stage 0" validate --input ${data}/comm_deadlock.json)
pipesched_cli_test("generate torch-csv" 0 "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1" generate -s 1f1b -p 2 -m 2 -f torch-csv)
pipesched_cli_test("validate torch csv (current spelling)" 0 "valid: zb_h1_p2m2 \\(p=2, m=2, v=1, 12 ops\\)" validate --input ${data}/zb_h1_p2m2.csv)
pipesched_cli_test("validate torch csv bad cell" 2 "error: .*bad_cell.csv \\(read as torch-csv\\): .*row 2, column 2: unknown action \"X\"" validate --input ${data}/bad_cell.csv)
pipesched_cli_test("simulate svg" 0 "<svg .*class=\"op\".*</svg>" simulate -s zb-h1 -p 2 -m 2 -f svg)
pipesched_cli_test("simulate chrome" 0 "\"traceEvents\":\\[.*\"ph\":\"X\"" simulate -s zb-h1 -p 2 -m 2 -f chrome)
# Stage costs (1,1,0) and (1,2,0): the longest span 8 (stage 0) against the busiest stage's 6
# (stage 1), docs/model.md §4.
pipesched_cli_test("simulate costs file" 0 "makespan 8 cost units, bubble rate 0.2500 .*utilization 0.6250" simulate -s gpipe -p 2 -m 2 --costs ${data}/costs_slow_stage1.json)
pipesched_cli_test("simulate bad costs file" 2 "error: --costs .*costs_bad.json: /forward: must be a finite number >= 0, not -1" simulate -s gpipe -p 2 -m 2 --costs ${data}/costs_bad.json)
pipesched_cli_test("generate default shows a timeline" 0 "stage 0: F0 F1 F2 F3 B0 W0.*makespan 27.*stage 3 \\|" generate -s zb-h1 -p 4 -m 8)
pipesched_cli_test("simulate zb-1p reaches its bound" 0 "makespan 27 cost units, .*lower bound on the span within this memory limit: 27 cost units \\(gap 0.00%\\)" simulate -s zb-1p -p 4 -m 8)
pipesched_cli_test("simulate zb-2p zero bubble" 0 "bubble rate 0.0000" simulate -s zb-2p -p 4 -m 8)
pipesched_cli_test("zb-auto limit too small" 2 "error: zb-auto: memory_limit \\(0.5\\) is below the minimum" generate -s zb-auto -p 4 -m 8 --memory-limit 0.5)
pipesched_cli_test("interleaved chunks" 0 "stage 0: F0.0 F1.0 F2.0 F3.0 F0.1" generate -s interleaved-1f1b -p 4 -m 8 --chunks 2)
# Overlapped pairs (DualPipeV) in the text listing and the terminal view.
pipesched_cli_test("generate dualpipev lists pairs" 0
  "stage 0: F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 \\(F3.0;BW1.1\\) \\(F2.1;BW0.0\\)"
  generate -s dualpipev -p 2 -m 4)
pipesched_cli_test("simulate dualpipev draws pairs" 0 "F3.0\\|BW1.1" simulate -s dualpipev -p 2 -m 4)
