include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
# Simulates INPUT (with the options after WHO) and checks that its makespan is PREDICTED (a
# variable name); leaves the simulation's JSON in `sim`.
macro(pipesched_check_export_makespan input predicted who)
  pipesched_run(sim simulate -i ${input} ${ARGN} --json)
  string(JSON simulated GET "${sim}" makespan)
  if(NOT simulated STREQUAL ${predicted})
    message(FATAL_ERROR "${input}: simulated makespan ${simulated} != ${who} ${${predicted}}")
  endif()
endmacro()

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
    pipesched_run(out validate -i ${input})
  endforeach()
  pipesched_check_export_makespan(${prefix}.compute.csv ${predicted} "${who}"
                                  --costs ${prefix}.costs.json)
  pipesched_check_export_makespan(${prefix}.schedule.json ${predicted} "${who}"
                                  --costs ${prefix}.costs.json --memory-file ${prefix}.memory.json)
endmacro()
