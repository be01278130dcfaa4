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

pipesched_cli_test("list" 0 "zb-h1 +ZB-H1" list)
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
pipesched_cli_test("validate bad kind" 2 "error: .*bad_kind.json: /ops/1/2/kind: unknown op kind \"X\"" validate --input ${data}/bad_kind.json)
pipesched_cli_test("validate malformed" 2 "error: .*malformed.json: schedule JSON: malformed JSON" validate --input ${data}/malformed.json)
pipesched_cli_test("validate wrong type" 2 "error: .*wrong_type.json: /microbatches: must be an integer, not string" validate --input ${data}/wrong_type.json)
pipesched_cli_test("validate no file" 2 "error: .*does_not_exist.json: cannot open file" validate --input ${data}/does_not_exist.json)
pipesched_cli_test("no subcommand" 2 "error: " )
