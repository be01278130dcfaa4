# How the check scripts run `pipesched` (-DCLI=...): `pipesched_run(OUT ARGS...)` runs
# `${CLI} ARGS...` and leaves its stdout in OUT; any exit code but 0 fails the script, naming
# the command, the code and what it printed.
function(pipesched_run out)
  execute_process(COMMAND ${CLI} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pipesched ${ARGN} failed (${rc}): ${stdout}${err}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()
