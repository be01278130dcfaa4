# `pipesched pack --export`: the chosen schedule's files read back. The compute-only
# CSV with the exported costs (per-micro-batch factors included) simulates to pack's step time;
# the pipesched JSON (R ops included) with the exported sizes peaks where pack says; the
# compute_comms CSV validates. -DCLI=pipesched -DWORK=dir -DARGS="pack options" (a ;-list).
file(MAKE_DIRECTORY ${WORK})
set(prefix ${WORK}/chosen)
include(${CMAKE_CURRENT_LIST_DIR}/export_readback.cmake)
pipesched_run(packed pack ${ARGS} --json --export ${prefix})
string(JSON predicted GET "${packed}" step_time)
string(JSON stages LENGTH "${packed}" peak_memory)
pipesched_check_export(${prefix} predicted "pack's step time" "")
math(EXPR last "${stages} - 1")
foreach(s RANGE ${last})
  string(JSON peak GET "${sim}" stages ${s} peak_memory)
  string(JSON want GET "${packed}" peak_memory ${s})
  if(NOT peak STREQUAL want)
    message(FATAL_ERROR "stage ${s}: simulated peak ${peak} != pack's ${want}")
  endif()
endforeach()
message("pack export ok: step time ${predicted} s reproduced")
