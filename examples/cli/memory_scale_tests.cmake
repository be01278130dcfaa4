# Memory limits hold in any units: costs in nanoseconds must not loosen the
# memory comparisons. Uses pipesched_cli_test() from cli_tests.cmake.

# zb-auto at 2.5·M_B: two activations and a W input (0.025) fit, a third activation does not
# (it peaked at 0.035 when the time tolerance, 1e-9 × 1.2e7, was used for memory).
pipesched_cli_test("memory scale: zb-auto, costs in ns, limit 2.5 M_B" 0
  "\"memory_limit\": 0\\.025,.*\"peak_memory\": 0\\.02[0-9]*"
  simulate -s zb-auto -p 4 -m 8 --cost 1.2e7,1.1e7,0.9e7,0 --memory 0.01,0.005
  --memory-limit 0.025 --json)
# zb-1p with costs of 1e9: at most p·M_B = 2, so stage 0 runs a B before its third F (it ran
# F0 F1 F2 and peaked at 3·M_B).
pipesched_cli_test("memory scale: zb-1p, costs of 1e9, order" 0
  "stage 0: F0 F1 B0 "
  generate -s zb-1p -p 2 -m 3 --cost 1e9,1e9,1e9,0)
pipesched_cli_test("memory scale: zb-1p, costs of 1e9, peak" 0
  "\"peak_memory\": 2\\.0"
  simulate -s zb-1p -p 2 -m 3 --cost 1e9,1e9,1e9,0 --json)
