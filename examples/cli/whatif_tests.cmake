# whatif --format svg and the progress line: the histogram / CDF picture of the
# sampled iteration times, on stdout and in a file; --json stdout byte-identical to the numbers
# pinned before progress existed, with only progress lines on stderr.
set(pipesched_cli_bin $<TARGET_FILE:pipesched_cli>)
set(whatif_noise -s zb-h1 -p 8 -m 32 --cv 0.05 --straggler 4:1.05)

add_test(NAME "cli: whatif --format svg on stdout" COMMAND pipesched_cli whatif ${whatif_noise}
                                                            --samples 200 --format svg)
set_tests_properties("cli: whatif --format svg on stdout" PROPERTIES LABELS cli
  PASS_REGULAR_EXPRESSION
  "^<svg .*<path class=\"cdf\" data-series=\"0\".*<g class=\"legend-entry\" data-series=\"0\">.*zb-h1: mean [0-9.]+, p50 [0-9.]+, p99 [0-9.]+ \\(200 samples\\).*</svg>\n$"
  FAIL_REGULAR_EXPRESSION "data-series=\"1\"|nan\"|inf\"")

add_test(NAME "cli: whatif --replicas --format svg -o FILE"
         COMMAND ${CMAKE_COMMAND} -DEXPECT=0 -DOUT=${CMAKE_CURRENT_BINARY_DIR}/whatif_dp.svg
                 -P ${PROJECT_SOURCE_DIR}/cmake/cli_roundtrip.cmake
                 ${pipesched_cli_bin} whatif -s zb-h2 -p 4 -m 8 --cv 0.05 --replicas 4
                 --gradient-bytes 1 --samples 30 -f svg -o ${CMAKE_CURRENT_BINARY_DIR}/whatif_dp.svg)
set_tests_properties("cli: whatif --replicas --format svg -o FILE" PROPERTIES LABELS cli
  PASS_REGULAR_EXPRESSION
  "file [^\n]*whatif_dp.svg:\n<svg .*class=\"bar\".*zb-h2, D=4 replicas: mean [0-9.]+, p50 [0-9.]+, p99 [0-9.]+ \\(30 samples\\).*</svg>")

add_test(NAME "cli: whatif --dynamic --format svg"
         COMMAND pipesched_cli whatif -s zb-h1 -p 4 -m 8 --cv 0.1 --samples 50 --dynamic
                 --memory-limit 4 --format svg)
set_tests_properties("cli: whatif --dynamic --format svg" PROPERTIES LABELS cli
  PASS_REGULAR_EXPRESSION "dynamic policy on zb-h1's placement: mean [0-9.]+, p50")

pipesched_cli_test("whatif --json conflicts with --format svg" 2 "--json: conflicts with --format svg"
  whatif -s 1f1b -p 2 -m 2 --json --format svg)

# 20000 samples take a few seconds: the progress line shows on stderr, stdout is the JSON
# pinned since the statistics are exact (stats_of: the mean as the smallest sample plus
# the compensated mean deviation; the progress observer changes no number).
pipesched_cli_check("whatif --json with progress on stderr"
  stdout_stderr_check.cmake 120 "stdout/stderr ok"
  -DEXPECT_STDOUT=${CMAKE_CURRENT_SOURCE_DIR}/testdata/whatif_zb-h1_seed7.json
  "-DSTDERR_LINE=^whatif: [0-9]+/20000 samples \\([0-9]+ %\\), [0-9]+ s$" -DPROGRESS_AFTER=3
  RUN ${pipesched_cli_bin} whatif ${whatif_noise} --seed 7 --samples 20000 --json)
pipesched_cli_check("whatif --dynamic --json unchanged by progress"
  stdout_stderr_check.cmake 60 "stdout/stderr ok"
  -DEXPECT_STDOUT=${CMAKE_CURRENT_SOURCE_DIR}/testdata/whatif_dynamic_seed3.json
  "-DSTDERR_LINE=^whatif: [0-9]+/2000 samples \\([0-9]+ %\\), [0-9]+ s$"
  RUN ${pipesched_cli_bin} whatif -s zb-h1 -p 4 -m 8 --cv 0.1 --seed 3 --samples 2000
  --dynamic --memory-limit 4 --json)
pipesched_cli_check("analyze --json unchanged, nothing but progress on stderr"
  stdout_stderr_check.cmake 60 "stdout/stderr ok"
  -DEXPECT_STDOUT=${CMAKE_CURRENT_SOURCE_DIR}/testdata/analyze_straggler_run.json
  "-DSTDERR_LINE=^analyze: [^\n]*, [0-9]+ s$"
  RUN ${pipesched_cli_bin} analyze ${PROJECT_SOURCE_DIR}/examples/robustness/straggler_run.csv --json)
