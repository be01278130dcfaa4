# Runs the command given after -P with stdout and stderr kept apart, expecting exit code 0, then:
# - EXPECT_STDOUT (a file): stdout must equal it byte for byte (e.g. --json output pinned before
#   progress reporting existed: progress never reaches stdout and never changes the numbers);
# - STDERR_LINE (a regex): every stderr line must match it (nothing but progress on stderr);
# - PROGRESS_AFTER (seconds): when the run took at least that long, stderr must hold at least one
#   line (the progress line appears after 1 s; a fast machine may finish before any).
# Prints "stdout/stderr ok" on success, for ctest's PASS_REGULAR_EXPRESSION.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/command_after_script.cmake)
pipesched_command_after_script("stdout_stderr_check\\.cmake$" cmd)
string(TIMESTAMP t0 "%s" UTC)
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s" UTC)
math(EXPR took "${t1} - ${t0}")
message("stderr:\n${err}")
if(NOT "${rc}" STREQUAL "0")
  message(FATAL_ERROR "exit code ${rc}, expected 0; stdout:\n${out}")
endif()
if(DEFINED EXPECT_STDOUT)
  file(READ ${EXPECT_STDOUT} expected)
  if(NOT out STREQUAL expected)
    message(FATAL_ERROR "stdout differs from ${EXPECT_STDOUT}:\n${out}")
  endif()
endif()
if(DEFINED STDERR_LINE AND NOT err STREQUAL "")
  string(REPLACE "\r" "\n" lines "${err}")
  string(REGEX REPLACE "\n$" "" lines "${lines}")
  string(REPLACE "\n" ";" lines "${lines}")
  foreach(l IN LISTS lines)
    if(NOT l MATCHES "${STDERR_LINE}")
      message(FATAL_ERROR "stderr line \"${l}\" does not match ${STDERR_LINE}")
    endif()
  endforeach()
endif()
if(DEFINED PROGRESS_AFTER AND took GREATER_EQUAL PROGRESS_AFTER AND err STREQUAL "")
  message(FATAL_ERROR "the run took ${took} s and printed no progress on stderr")
endif()
message("took about ${took} s; stdout/stderr ok")
