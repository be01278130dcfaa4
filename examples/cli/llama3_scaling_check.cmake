# Llama 3 405B as Meta ran it (arXiv 2407.21783 §3.3.2 and Table 4): TP 8, PP 16, interleaved
# 1F1B, no activation recompute, FSDP sharding gradients and optimizer states, 16M-token steps,
# each stage's input freed (--memory-efficient-norm); the chunks per stage and the group size
# left to the planner. It must fit at 8,192 and at 16,384 GPUs, and the TFLOP/s per GPU at
# 16,384 over 8,192 must be within 3 % of what Meta measured: 400 / 430. -DCLI=pipesched
include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
# A plan's TFLOP/s per GPU, in hundredths (CMake's arithmetic is on integers).
function(meta_layout gpus out)
  pipesched_run(json plan --model llama3-405b --gpu h100-sxm-80gb --gpus ${gpus} --seq 8192
                --global-batch-tokens 16777216 --optimizer-sharding gradients --tp 8 --pp 16
                --schedule interleaved-1f1b --recompute none --memory-efficient-norm --json --top 1)
  string(JSON fits GET "${json}" plans 0 fits)
  string(JSON tflops GET "${json}" plans 0 tflops_per_gpu)
  string(JSON v GET "${json}" plans 0 layout v)
  string(JSON n GET "${json}" plans 0 group_size)
  if(NOT fits)
    message(FATAL_ERROR "${gpus} GPUs: Meta's layout does not fit")
  endif()
  if(NOT tflops MATCHES "^([0-9]+)\\.([0-9][0-9])")
    message(FATAL_ERROR "${gpus} GPUs: tflops_per_gpu ${tflops} is not a number with decimals")
  endif()
  set(${out} "${CMAKE_MATCH_1}${CMAKE_MATCH_2}" PARENT_SCOPE)
  message(STATUS "${gpus} GPUs: fits at v = ${v}, group size ${n}: ${tflops} TFLOP/s per GPU")
endfunction()
meta_layout(8192 at8k)
meta_layout(16384 at16k)
# ratio / (400 / 430) - 1, in tenths of a percent: 1000 * (at16k * 430) / (at8k * 400) - 1000.
math(EXPR error "1000 * ${at16k} * 430 / (${at8k} * 400) - 1000")
if(error GREATER 30 OR error LESS -30)
  message(FATAL_ERROR "16,384 over 8,192 GPUs: ${at16k} / ${at8k} hundredths of TFLOP/s, "
                      "${error} tenths of a percent from Meta's 400 / 430 (at most 30)")
endif()
message(STATUS "16,384 over 8,192 GPUs: ${error} tenths of a percent from Meta's 400 / 430: "
               "llama3 scaling ok")
