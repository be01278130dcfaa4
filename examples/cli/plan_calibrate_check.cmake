# The achieved fraction from a measured run: a plan exported, its compute-only
# order "measured" by simulating it with the plan's own costs (a Chrome trace: a time unit is
# 1 ms there, so the trace's microsecond is 1e-3 s of the plan's seconds), then `analyze` against
# the plan. Read in its own unit the run is exactly as fast as planned (the plan's fraction
# comes back); read as 1.25 ms it is 1.25x slower (0.8x the fraction); read as microseconds it
# would be faster than the peak, which is refused.
# -DCLI=pipesched -DWORK=dir
file(MAKE_DIRECTORY ${WORK})
set(prefix ${WORK}/plan)
include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
pipesched_run(out plan --model llama3-8b --gpu h100-sxm-80gb --gpus 16 --tp 2 --pp 4 --dp 2
              --schedule 1f1b --micro-batch 1 --microbatches 8 --seq 4096 --recompute none
              --export ${prefix})
pipesched_run(out simulate -i ${prefix}.compute.csv --costs ${prefix}.costs.json
              -f chrome -o ${prefix}.trace.json)
foreach(case "1e-3;1;0.5" "1.25e-3;1.25;0.4")
  list(GET case 0 unit)
  list(GET case 1 want_ratio)
  list(GET case 2 want_fraction)
  pipesched_run(json analyze ${prefix}.trace.json --planned-costs ${prefix}.costs.json
                --planned-fraction 0.5 --seconds-per-unit ${unit} --json)
  string(JSON ratio GET "${json}" calibration ratio)
  string(JSON fraction GET "${json}" calibration achieved_fraction)
  # CMake has no floating point: compare |x - want| < 1e-3 with integer micro-units.
  foreach(pair "ratio;${ratio};${want_ratio}" "achieved_fraction;${fraction};${want_fraction}")
    list(GET pair 0 what)
    list(GET pair 1 got)
    list(GET pair 2 want)
    string(REGEX MATCH "^([0-9]+)\\.?([0-9]*)" _ "${got}")
    set(int "${CMAKE_MATCH_1}")
    string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 frac)
    string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
    math(EXPR got_u "${int} * 1000000 + ${frac}")
    string(REGEX MATCH "^([0-9]+)\\.?([0-9]*)" _ "${want}")
    set(int "${CMAKE_MATCH_1}")
    string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 frac)
    string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
    math(EXPR want_u "${int} * 1000000 + ${frac}")
    math(EXPR diff "${got_u} - ${want_u}")
    if(diff GREATER 1000 OR diff LESS -1000)
      message(FATAL_ERROR "unit ${unit}: ${what} ${got}, expected ${want}")
    endif()
  endforeach()
endforeach()
execute_process(COMMAND ${CLI} analyze ${prefix}.trace.json --planned-costs ${prefix}.costs.json
                        --planned-fraction 0.5 --seconds-per-unit 1e-6
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "above 1")
  message(FATAL_ERROR "a unit 1000x too small: exit ${rc}, ${err}")
endif()
message(STATUS "plan calibration ok")
