# Search options and figures of the schedules that search (zb-auto, zb-1p, zb-2p, zb-v):
# the lower bound comes from the one search that built the schedule, --search-budget MS
# and --search-evaluations N reach zb_auto_options, and bad values or uses are errors (exit 2).
# Uses pipesched_cli_test() from cli_tests.cmake.
set(zb_shape -p 8 -m 40 --cost 1850,1810,930,60 --memory 1,0.375)
set(zb_row ${zb_shape} --memory-limit 16)  # zb-auto only: zb-1p / zb-2p fix their own limit

pipesched_cli_test("search: simulate zb-auto json has lower_bound" 0
  "\"lower_bound\": 27.0,.*\"name\": \"zb-auto\"," simulate -s zb-auto -p 4 -m 8 --json)
pipesched_cli_test("search: simulate zb-v json has lower_bound" 0
  "\"lower_bound\": [0-9]" simulate -s zb-v -p 4 -m 8 --cost 2,2,1,0.5 --json)
pipesched_cli_test("search: simulate report prints the bound and the gap" 0
  "lower bound on the span within this memory limit: [0-9.e+]+ cost units \\(gap [0-9]+\\.[0-9][0-9]%\\)"
  simulate -s zb-auto ${zb_row})
# JSON keys are sorted: lower_bound would stand between "bubble_rate" and "m".
pipesched_cli_test("search: no bound for hand-crafted schedules" 0
  "\"bubble_rate\": [0-9.e-]+,\n  \"m\": 8," simulate -s zb-h1 -p 4 -m 8 --json)
pipesched_cli_test("search: no bound once lowered (--with-comm)" 0
  "\"bubble_rate\": [0-9.e-]+,\n  \"m\": 8," simulate -s zb-auto -p 4 -m 8 --with-comm --json)

pipesched_cli_test("search: generate --search-budget 5" 0
  "stage 0: F0 F1 F2 F3 B0" generate -s zb-auto -p 4 -m 8 --search-budget 5)
pipesched_cli_test("search: simulate --search-budget 5" 0 "\"lower_bound\": [0-9]"
  simulate -s zb-2p ${zb_shape} --search-budget 5 --json)
pipesched_cli_test("search: --search-budget=0.5 on zb-v" 0 "valid: zb-v \\(p=4, m=8, v=2, "
  validate -s zb-v -p 4 -m 8 --search-budget=0.5)
pipesched_cli_test("search: --search-evaluations 0" 0 "makespan [0-9.e+]+ cost units, bubble rate"
  simulate -s zb-1p ${zb_shape} --search-evaluations 0)
pipesched_cli_test("search: --search-evaluations with --search-budget" 0 "\"lower_bound\": "
  simulate -s zb-auto ${zb_row} --search-evaluations 50 --search-budget 100 --json)

pipesched_cli_test("search: --search-budget -1" 2
  "error: --search-budget: must be a finite number of milliseconds >= 0 \\(0: no cap\\), got \"-1\""
  simulate -s zb-auto -p 4 -m 8 --search-budget -1)
pipesched_cli_test("search: --search-budget nan" 2
  "error: --search-budget: must be a finite number of milliseconds >= 0 \\(0: no cap\\), got \"nan\""
  generate -s zb-v -p 4 -m 8 --search-budget nan)
pipesched_cli_test("search: --search-budget 5ms" 2
  "error: --search-budget: must be a finite number of milliseconds >= 0 \\(0: no cap\\), got \"5ms\""
  generate -s zb-1p -p 4 -m 8 --search-budget 5ms)
pipesched_cli_test("search: --search-evaluations -3" 2
  "error: --search-evaluations: must be a whole number >= 0 \\(candidate orders\\), got \"-3\""
  simulate -s zb-2p -p 4 -m 8 --search-evaluations -3)
pipesched_cli_test("search: --search-evaluations too large" 2
  "error: --search-evaluations: must be at most [0-9]+, got \"99999999999999999999\""
  simulate -s zb-2p -p 4 -m 8 --search-evaluations 99999999999999999999)
pipesched_cli_test("search: --search-budget with a hand-crafted schedule" 2
  "error: --search-budget: only meaningful for schedules that search \\(zb-v, zb-auto, zb-1p, zb-2p\\), not \"1f1b\""
  simulate -s 1f1b -p 4 -m 8 --search-budget 5)
pipesched_cli_test("search: --search-evaluations with --input" 2
  "error: --search-evaluations: only meaningful when a schedule that searches \\(zb-v, zb-auto, zb-1p, zb-2p\\) is generated, not with a given schedule"
  validate --input ${data}/ok.json --search-evaluations 5)
