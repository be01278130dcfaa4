# The exports of `plan` and `pack` read back through validate, simulate and analyze: the same
# makespan, and against the exported costs a calibration of exactly the planned fraction
# (roundtrip_export_check.cmake), for several schedules, with and without recompute.
set(pipesched_roundtrip_plan
    "--model;llama3-8b;--gpu;h100-sxm-80gb;--gpus;16;--tp;2;--pp;4;--dp;2;--micro-batch;1;--microbatches;8;--seq;4096")
set(pipesched_roundtrip_pack
    "--model;llama3-8b;--lengths;${CMAKE_CURRENT_SOURCE_DIR}/testdata/lengths_long_tail.txt;-m;8;--stages;4")
# Without recompute pack's plans need more than a GPU holds: a GPU of 1 TiB (a memory limit
# above the GPU's is refused).
set(pipesched_roundtrip_big_gpu ${CMAKE_CURRENT_BINARY_DIR}/roundtrip/h100_1tib.json)
file(WRITE ${pipesched_roundtrip_big_gpu}
     [=[{"version": 1, "name": "h100-1tib", "memory_bytes": 1099511627776, "usable_fraction": 1, "peak_flops_bf16": 989.4e12, "peak_flops_fp8": 1978.9e12, "achieved_fraction": 0.5, "gpus_per_node": 8, "intra_node_bandwidth": 450e9, "intra_node_latency": 3e-6, "inter_node_bandwidth": 50e9, "inter_node_latency": 10e-6}]=])
foreach(case
    "plan|1f1b none|--schedule;1f1b;--recompute;none"
    "plan|zb-h1 selective|--schedule;zb-h1;--recompute;selective"
    "plan|interleaved-1f1b v2 selective|--schedule;interleaved-1f1b;-v;2;--recompute;selective"
    "plan|zb-v full|--schedule;zb-v;-v;2;--recompute;full"
    "plan|zb-v none|--schedule;zb-v;-v;2;--recompute;none"
    "pack|zb-h1 selective|--schedule;zb-h1;--recompute;selective"
    "pack|zb-h1 none|--schedule;zb-h1;--recompute;none;--gpu;${pipesched_roundtrip_big_gpu}"
    "pack|interleaved-1f1b v2 full|--schedule;interleaved-1f1b;-v;2;--recompute;full"
    "pack|zb-v none|--schedule;zb-v;-v;2;--recompute;none;--gpu;${pipesched_roundtrip_big_gpu}")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 cmd)
  list(GET parts 1 label)
  string(FIND "${case}" "|" first)
  string(FIND "${case}" "|" last REVERSE)
  math(EXPR from "${last} + 1")
  string(SUBSTRING "${case}" ${from} -1 args)
  string(REPLACE " " "_" dir "${cmd}_${label}")
  pipesched_cli_check(
    "${cmd} --export ${label}: reads back through validate, simulate and analyze at 1.000x"
    roundtrip_export_check.cmake 120 "export round trip ok"
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/roundtrip/${dir} -DCMD=${cmd}
    "-DARGS=${pipesched_roundtrip_${cmd}};${args}")
endforeach()
