# What `plan --export` and `pack --export` share (included by plan_export_check.cmake and
# pack_export_check.cmake): the files PREFIX.{csv, compute.csv, schedule.json, costs.json,
# memory.json} plus EXTRA exist; the two CSVs and the JSON validate; the compute-only CSV and the
# pipesched JSON (R ops included) simulate with the exported costs to PREDICTED exactly. Leaves
# the JSON's simulation (with the exported sizes) in `sim` for the caller's peak checks.
macro(pipesched_check_export prefix predicted who extra)
  foreach(f csv compute.csv schedule.json costs.json memory.json ${extra})
    if(NOT EXISTS ${prefix}.${f})
      message(FATAL_ERROR "--export did not write ${prefix}.${f}")
    endif()
  endforeach()
  foreach(input ${prefix}.compute.csv ${prefix}.csv ${prefix}.schedule.json)
    execute_process(COMMAND ${CLI} validate -i ${input} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "validate ${input}: ${out}${err}")
    endif()
  endforeach()
  execute_process(COMMAND ${CLI} simulate -i ${prefix}.compute.csv --costs ${prefix}.costs.json
                          --json RESULT_VARIABLE rc OUTPUT_VARIABLE sim ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "simulate: ${err}")
  endif()
  string(JSON simulated GET "${sim}" makespan)
  if(NOT simulated STREQUAL ${predicted})
    message(FATAL_ERROR "simulated makespan ${simulated} != ${who} ${${predicted}}")
  endif()
  execute_process(COMMAND ${CLI} simulate -i ${prefix}.schedule.json --costs ${prefix}.costs.json
                          --memory-file ${prefix}.memory.json --json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE sim ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "simulate (schedule.json): ${err}")
  endif()
  string(JSON simulated GET "${sim}" makespan)
  if(NOT simulated STREQUAL ${predicted})
    message(FATAL_ERROR "schedule.json: simulated makespan ${simulated} != ${who} ${${predicted}}")
  endif()
endmacro()
