# `pipesched plan --export`: the best plan's files read back. The compute-only CSV
# with the exported costs simulates to the plan's predicted makespan; the pipesched JSON (R ops
# included) with the exported sizes peaks where the plan says; the compute_comms CSV validates.
# -DCLI=pipesched -DWORK=dir -DARGS="plan options" (a ;-list).
file(MAKE_DIRECTORY ${WORK})
set(prefix ${WORK}/best)
include(${CMAKE_CURRENT_LIST_DIR}/export_readback.cmake)
pipesched_run(plan plan ${ARGS} --json --export ${prefix})
string(JSON predicted GET "${plan}" plans 0 makespan_s)
string(JSON schedule GET "${plan}" plans 0 schedule)
string(JSON stages LENGTH "${plan}" plans 0 stages)
pipesched_check_export(${prefix} predicted "the plan's" map.json)
# The compute_comms CSV timed as PyTorch runs it (posted isend / irecv) is never earlier than
# the plan (tests/python/test_plan.py checks how close it is).
pipesched_run(sim_comms simulate -i ${prefix}.csv --costs ${prefix}.costs.json
              --transfers posted --json)
string(JSON posted GET "${sim_comms}" makespan)
if(posted LESS predicted)
  message(FATAL_ERROR "the compute_comms CSV times to ${posted}, before the plan's ${predicted}")
endif()
math(EXPR last "${stages} - 1")
foreach(s RANGE ${last})
  string(JSON peak GET "${sim}" stages ${s} peak_memory)
  string(JSON total GET "${plan}" plans 0 stages ${s} memory_bytes total)
  if(NOT peak STREQUAL total)
    message(FATAL_ERROR "stage ${s}: simulated peak ${peak} != the plan's ${total}")
  endif()
endforeach()
message("plan export ok: ${schedule}, makespan ${predicted} s reproduced")
