# Runs the command given after -P expecting exit code EXPECT, with standard input from STDIN
# when set; then, when OUT is set, shows that output file: read back by CHECK (e.g.
# read_simulation_check) when set, else its text. Prints everything so ctest's
# PASS_REGULAR_EXPRESSION can match the command's output and the file's. Fails when the
# command exits otherwise, when OUT is missing, or when CHECK fails.
include(${CMAKE_CURRENT_LIST_DIR}/command_after_script.cmake)
pipesched_command_after_script("cli_roundtrip\\.cmake$" cmd)
if(DEFINED OUT)
  file(REMOVE ${OUT})
endif()
if(DEFINED STDIN)
  execute_process(COMMAND ${cmd} INPUT_FILE ${STDIN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
else()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
message("${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT}")
endif()
if(DEFINED OUT)
  if(NOT EXISTS ${OUT})
    message(FATAL_ERROR "${OUT} was not written")
  endif()
  if(DEFINED CHECK)
    execute_process(COMMAND ${CHECK} ${OUT} RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2
                    ERROR_VARIABLE err2)
    message("${out2}${err2}")
    if(NOT "${rc2}" STREQUAL "0")
      message(FATAL_ERROR "${CHECK} failed on ${OUT}")
    endif()
  else()
    file(READ ${OUT} text)
    message("file ${OUT}:\n${text}")
  endif()
endif()
message("run done, exit code ${rc} as expected")
