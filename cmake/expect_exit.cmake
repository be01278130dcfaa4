# Runs the command given after -P (CMAKE_ARGV) and fails unless it exits with EXPECT.
# Prints the command's stdout and stderr so ctest's PASS_REGULAR_EXPRESSION can match them.
include(${CMAKE_CURRENT_LIST_DIR}/command_after_script.cmake)
pipesched_command_after_script("expect_exit\\.cmake$" cmd)
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT}")
endif()
message("exit code ${rc} as expected")
