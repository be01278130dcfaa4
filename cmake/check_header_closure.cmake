cmake_policy(SET CMP0007 NEW)
# Fails when HEADER (relative to INCLUDE) pulls in, directly or through other headers, a file
# whose path matches FORBID (a regex): keeps a header cheap to include (the registry
# type without the generators, the search and <thread>). Uses the compiler's own include
# closure (-M), so it sees what a user's build would compile: against the compiled library, or
# with DEFINES (e.g. PIPESCHED_HEADER_ONLY) defined.
string(MAKE_C_IDENTIFIER "${HEADER}${DEFINES}" scratch)  # one file each: the checks run in parallel
file(WRITE ${WORK}/closure_${scratch}.cpp "#include <${HEADER}>\n")
set(defines "")
foreach(d IN LISTS DEFINES)
  list(APPEND defines -D${d})
endforeach()
execute_process(COMMAND ${CXX} -std=c++20 -M -I${INCLUDE} ${defines} ${WORK}/closure_${scratch}.cpp
                OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${HEADER} does not compile on its own:\n${err}")
endif()
string(REGEX REPLACE "[ \t\r\n\\\\]+" ";" deps "${deps}")
set(bad "")
foreach(d IN LISTS deps)
  if(d MATCHES "${FORBID}")
    list(APPEND bad "${d}")
  endif()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "${HEADER} pulls in what it must not (${FORBID}):\n  ${bad}")
endif()
list(LENGTH deps n)
message(STATUS "${HEADER}: ${n} files in its include closure, none matching ${FORBID}")
