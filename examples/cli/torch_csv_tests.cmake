# --format torch-csv layouts and spellings (docs/formats.md): with SEND/RECV ops the
# default is list order with no empty cell, the form PyTorch's compute+comms loader reads;
# compute-only files keep the unit-step grid. Uses pipesched_cli_test() from cli_tests.cmake.
set(csv_out ${CMAKE_CURRENT_BINARY_DIR}/torch_csv)
file(MAKE_DIRECTORY ${csv_out})
set(gen11 generate -s 1f1b -p 2 -m 2 -f torch-csv)

pipesched_cli_test("torch-csv with comm: list order by default" 0
  "^0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n\n"
  ${gen11} --with-comm)
pipesched_cli_test("torch-csv with comm: --csv-layout steps" 0
  "^0F0,0SEND_F0,0F1,0SEND_F1,,0RECV_B0,0B0,,0RECV_B1,0B1\n,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n\n"
  ${gen11} --with-comm --csv-layout steps)
pipesched_cli_test("torch-csv with comm: --csv-spelling legacy" 0
  "^0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0BW0,0RECV_B1,0BW1\n1RECV_F0,1F0,1RECV_F1,1BW0,1SEND_B0,1F1,1BW1,1SEND_B1\n\n"
  ${gen11} --with-comm --csv-spelling legacy)
pipesched_cli_test("torch-csv compute-only: --csv-layout list" 0
  "^0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n\n" ${gen11} --csv-layout list)
pipesched_cli_test("torch-csv compute-only: legacy split backward" 0
  "^0F0,0F1,,0B0,0W0,0B1,0W1\n,1F0,1B0,1F1,1B1,1W0,1W1\n\n"
  generate -s zb-h1 -p 2 -m 2 -f torch-csv --csv-spelling legacy)
pipesched_cli_test("torch-csv simulate with comm: list order by default" 0
  "^0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0I0,0W0,0RECV_B1,0I1,0W1\n1RECV_F0,1F0,1RECV_F1,1I0,1SEND_B0,1F1,1I1,1SEND_B1,1W0,1W1\n\n"
  simulate -s zb-h1 -p 2 -m 2 -f torch-csv --with-comm)

pipesched_cli_test("torch-csv bad --csv-layout" 2
  "error: --csv-layout: must be steps or list, not \"grid\"" ${gen11} --csv-layout grid)
pipesched_cli_test("torch-csv bad --csv-spelling" 2
  "error: --csv-spelling: must be current or legacy, not \"old\"" ${gen11} --csv-spelling old)
pipesched_cli_test("torch-csv --csv-layout without torch-csv" 2
  "error: --csv-layout: only meaningful with --format torch-csv"
  generate -s 1f1b -p 2 -m 2 -f json --csv-layout list)
pipesched_cli_test("torch-csv --csv-spelling without torch-csv" 2
  "error: --csv-spelling: only meaningful with --format torch-csv"
  simulate -s 1f1b -p 2 -m 2 --csv-spelling legacy)

# Written, then read back and validated (loop and V placements, both spellings).
foreach(case "zb-v;4;8;current;zbv_p4m8" "interleaved-1f1b;4;8;legacy;interleaved_p4m8"
             "zb-h2;3;6;legacy;zbh2_p3m6")
  list(GET case 0 name)
  list(GET case 1 p)
  list(GET case 2 m)
  list(GET case 3 spelling)
  list(GET case 4 stem)
  pipesched_cli_test("torch-csv write ${stem} with comm" 0 ""
    generate -s ${name} -p ${p} -m ${m} -f torch-csv --with-comm --csv-spelling ${spelling}
    -o ${csv_out}/${stem}.csv)
  set_tests_properties("cli: torch-csv write ${stem} with comm" PROPERTIES
    FIXTURES_SETUP torch_csv_${stem})
  pipesched_cli_test("torch-csv read back ${stem}" 0
    "valid: ${stem} \\(p=${p}, m=${m}, v=[12], [0-9]+ ops\\)" validate --input ${csv_out}/${stem}.csv)
  set_tests_properties("cli: torch-csv read back ${stem}" PROPERTIES
    FIXTURES_REQUIRED torch_csv_${stem})
endforeach()
