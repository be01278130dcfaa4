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
