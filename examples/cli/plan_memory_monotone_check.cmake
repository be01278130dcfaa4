# More memory never gives a slower plan: ZB-V on GPT-3 175B at --usable-fraction 0.9 and 1.0
# (19.422 s and 19.446 s before the searching generators were also run at the memory rungs
# below the usable memory: the same makespan, the gradient reduction exposed longer).
# -DCLI=pipesched
include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
set(times)
foreach(u 0.9 1.0)
  pipesched_run(json plan --model gpt3-175b --gpu h100-sxm-80gb --gpus 128 --seq 2048
                --global-batch 512 --tp 4 --pp 8 -v 2 --schedule zb-v --micro-batch 1
                --recompute selective --sequence-parallel --usable-fraction ${u} --json)
  string(JSON t GET "${json}" plans 0 step_time_s)
  list(APPEND times ${t})
endforeach()
list(GET times 0 at_09)
list(GET times 1 at_10)
if(at_10 GREATER at_09)
  message(FATAL_ERROR "usable fraction 1.0: ${at_10} s, slower than 0.9's ${at_09} s")
endif()
message(STATUS "0.9: ${at_09} s, 1.0: ${at_10} s; memory monotone ok")
