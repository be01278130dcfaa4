# An export reads back through every command: `plan --export` or `pack --export` (with or
# without recompute), then validate and simulate of its compute-only CSV and of its pipesched
# JSON (R ops included) to the predicted makespan (export_readback.cmake), then each simulated
# as a Chrome trace and analyzed against the exported costs: a run that is exactly the plan
# shows 1.000x and exactly the planned fraction, and no straggler (the plan's unequal stages
# are not stragglers). -DCLI=pipesched -DWORK=dir -DCMD=plan|pack -DARGS="options" (a ;-list).
file(MAKE_DIRECTORY ${WORK})
set(prefix ${WORK}/export)
include(${CMAKE_CURRENT_LIST_DIR}/export_readback.cmake)
pipesched_run(out ${CMD} ${ARGS} --json --export ${prefix})
if(CMD STREQUAL "plan")
  string(JSON predicted GET "${out}" plans 0 makespan_s)
  set(extra map.json)
else()
  string(JSON predicted GET "${out}" step_time)
  set(extra "")
endif()
pipesched_check_export(${prefix} predicted "${CMD}'s" "${extra}")
foreach(input compute.csv schedule.json)
  # A time unit of the trace is 1 ms (simulate's default scale): its microsecond is 1e-3 s.
  pipesched_run(trace_note simulate -i ${prefix}.${input} --costs ${prefix}.costs.json
                -f chrome -o ${prefix}.${input}.trace.json)
  pipesched_run(text analyze ${prefix}.${input}.trace.json --planned-costs ${prefix}.costs.json
                --planned-fraction 0.5 --seconds-per-unit 1e-3)
  if(NOT text MATCHES "planned [0-9.e+-]+ s \\(1\\.000x\\); achieved fraction of peak 0\\.500 ")
    message(FATAL_ERROR "${input}: not exactly the plan's speed:\n${text}")
  endif()
  if(NOT text MATCHES "stragglers: none")
    message(FATAL_ERROR "${input}: a run that is exactly the plan has stragglers:\n${text}")
  endif()
  # Without the plan the trace still reads back (the R ops' F marked recompute).
  pipesched_run(json analyze ${prefix}.${input}.trace.json --json)
endforeach()
message("export round trip ok: ${CMD}, makespan ${predicted} s, 1.000x, fraction 0.500")
