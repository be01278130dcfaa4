# Fails when compiling SUBJECT takes more than MAX_PERCENT % of the time compiling REFERENCE
# takes (the umbrella against ir/schedule.hpp). SUBJECT and REFERENCE are source
# files, compiled with CXX and FLAGS (one string, split as a shell would); each runs ROUNDS
# times, taking turns, and the least CPU times are compared (cmake/compile_time.cmake). A
# ratio, not seconds: the machine may be slow or loaded, and both compiles see the same machine.
include(${CMAKE_CURRENT_LIST_DIR}/compile_time.cmake)
if(NOT ROUNDS)
  set(ROUNDS 5)
endif()
least_compile_times(least ${ROUNDS} "${CXX} ${FLAGS} ${REFERENCE}" "${CXX} ${FLAGS} ${SUBJECT}")
list(GET least 0 reference_s)
list(GET least 1 subject_s)
ratio_percent(ratio ${subject_s} ${reference_s})
get_filename_component(subject_name ${SUBJECT} NAME)
get_filename_component(reference_name ${REFERENCE} NAME)
message("least CPU time of ${ROUNDS}: ${subject_name} ${subject_s} s, ${reference_name} ${reference_s} s: "
        "${ratio} % (at most ${MAX_PERCENT} %)")
if(ratio GREATER MAX_PERCENT)
  # One line, unwrapped (FATAL_ERROR rewraps its text).
  message("${subject_name} takes ${ratio} % of ${reference_name}'s time, more than ${MAX_PERCENT} %")
  message(FATAL_ERROR "compile time over the bound")
endif()
message("compile time ok")
