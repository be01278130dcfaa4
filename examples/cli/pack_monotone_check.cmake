# More memory or a faster link never gives pack a slower result (Llama 3 8B, the long-tail
# lengths, 4 stages, 8 micro-batches, zb-v: 72 GiB once gave 1.8048 s and 73 GiB 1.8125 s, a
# 450 GB/s intra-node link 1.8048 s and a 1 TB/s one 1.8230 s). -DCLI=pipesched -DWORK=dir
# -DLENGTHS=file
file(MAKE_DIRECTORY ${WORK})
foreach(bw 450e9 1e12)
  file(WRITE ${WORK}/bw_${bw}.json "{\"version\": 1, \"name\": \"c\", \"memory_bytes\": 85899345920, \"peak_flops_bf16\": 989.4e12, \"intra_node_bandwidth\": ${bw}, \"inter_node_bandwidth\": 50e9}")
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
function(step out)
  pipesched_run(json pack --model llama3-8b --lengths ${LENGTHS} --stages 4 -m 8 -s zb-v --json
                ${ARGN})
  string(JSON t GET "${json}" step_time)
  set(${out} ${t} PARENT_SCOPE)
endfunction()
step(at72 --memory-limit 72GiB)
step(at73 --memory-limit 73GiB)
if(at73 GREATER at72)
  message(FATAL_ERROR "73 GiB: ${at73} s, slower than 72 GiB's ${at72} s")
endif()
step(slow --gpu ${WORK}/bw_450e9.json)
step(fast --gpu ${WORK}/bw_1e12.json)
if(fast GREATER slow)
  message(FATAL_ERROR "a 1 TB/s link: ${fast} s, slower than 450 GB/s's ${slow} s")
endif()
message(STATUS "72 GiB ${at72} s, 73 GiB ${at73} s; 450 GB/s ${slow} s, 1 TB/s ${fast} s: pack monotone ok")
