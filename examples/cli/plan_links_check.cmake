# Pipeline links timed where they run: on a cluster with a slow network (1 GB/s, 10 ms between
# nodes) a plan whose stages span nodes takes longer than on the H100 preset, both for TP4 PP4
# (stages 1 -> 2 between nodes) and TP1 PP16 (7 -> 8); with a 1e300 s latency between nodes the
# step takes about that long (finite), and a latency whose transfers overflow is refused naming
# the field. -DCLI=pipesched -DWORK=dir
file(MAKE_DIRECTORY ${WORK})
set(slow_ib ${WORK}/slow-ib.json)
file(WRITE ${slow_ib} "{\"version\":1,\"name\":\"slow-ib\",\"memory_bytes\":85899345920,\"peak_flops_bf16\":989.4e12,\"intra_node_bandwidth\":450e9,\"intra_node_latency\":3e-6,\"inter_node_bandwidth\":1e9,\"inter_node_latency\":0.01}")
set(huge ${WORK}/huge-latency.json)
file(WRITE ${huge} "{\"version\":1,\"name\":\"huge\",\"memory_bytes\":85899345920,\"peak_flops_bf16\":989.4e12,\"intra_node_bandwidth\":450e9,\"intra_node_latency\":3e-6,\"inter_node_bandwidth\":1e9,\"inter_node_latency\":1e300}")
set(overflow ${WORK}/overflow-latency.json)
file(WRITE ${overflow} "{\"version\":1,\"name\":\"overflow\",\"memory_bytes\":85899345920,\"peak_flops_bf16\":989.4e12,\"intra_node_bandwidth\":450e9,\"intra_node_latency\":3e-6,\"inter_node_bandwidth\":1e9,\"inter_node_latency\":1e307}")
set(common --model llama3-8b --gpus 16 --dp 1 --seq 4096 --global-batch 64 --schedule 1f1b
           --micro-batch 1 --recompute selective --json)

include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
function(step_time gpu layout out)
  pipesched_run(json plan ${common} --gpu ${gpu} ${layout})
  string(JSON t GET "${json}" plans 0 step_time_s)
  set(${out} ${t} PARENT_SCOPE)
endfunction()

foreach(layout "--tp;4;--pp;4" "--tp;1;--pp;16")
  step_time(h100-sxm-80gb "${layout}" fast)
  step_time(${slow_ib} "${layout}" slow)
  # The slowest link: 2·4096·4096 bytes / TP over 1 GB/s + 10 ms, each way, m = 64 times at least.
  if(NOT slow GREATER fast)
    message(FATAL_ERROR "${layout}: slow-ib ${slow} s is not longer than h100's ${fast} s")
  endif()
  message(STATUS "${layout}: h100 ${fast} s, slow-ib ${slow} s")
endforeach()
step_time(${huge} "--tp;1;--pp;16" t)
if(NOT t GREATER 1e300 OR NOT t LESS 1e308)
  message(FATAL_ERROR "PP16 with a 1e300 s latency: step ${t} s")
endif()
execute_process(COMMAND ${CLI} plan ${common} --gpu ${overflow} --tp 1 --pp 16
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "inter_node_latency \\(1e\\+307 s\\)")
  message(FATAL_ERROR "a latency that overflows a step: exit ${rc}, ${err}")
endif()
message(STATUS "plan links ok")
