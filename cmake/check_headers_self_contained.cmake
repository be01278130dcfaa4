cmake_policy(VERSION 3.24)
# Every header compiles on its own: each of HEADERS (paths relative to ROOT, separated by "|";
# all of ROOT/pipesched/**.hpp when empty) is included alone in a file of its own and compiled
# with -fsyntax-only: the parse and the template instantiations that catch a missing include,
# without the code generation a header set's verify target adds (the check costs what parsing
# the header's include closure costs). INCLUDES and DEFINES ("|"-separated) are the include
# directories and definitions of the target the headers belong to (fmt, nlohmann_json, MPI);
# those in IMPLICIT (the compiler's own, e.g. /usr/include) are left out: naming one with
# -isystem breaks the standard library's #include_next.
# Reports every header that fails, then fails.
foreach(var CXX ROOT WORK)
  if(NOT ${var})
    message(FATAL_ERROR "check_headers_self_contained.cmake: -D${var}= is required")
  endif()
endforeach()
string(REPLACE "|" ";" headers "${HEADERS}")
if(NOT headers)
  file(GLOB_RECURSE headers RELATIVE ${ROOT} ${ROOT}/pipesched/*.hpp)
  list(SORT headers)
endif()
set(flags -std=c++20 -fsyntax-only -I${ROOT})
string(REPLACE "|" ";" includes "${INCLUDES}")
string(REPLACE "|" ";" implicit "${IMPLICIT}")
list(REMOVE_DUPLICATES includes)
foreach(dir IN LISTS includes)
  if(dir AND NOT dir STREQUAL ROOT AND NOT dir IN_LIST implicit)
    list(APPEND flags -isystem ${dir})
  endif()
endforeach()
string(REPLACE "|" ";" defines "${DEFINES}")
foreach(def IN LISTS defines)
  if(def)
    list(APPEND flags -D${def})
  endif()
endforeach()

file(MAKE_DIRECTORY ${WORK})
set(failed "")
list(LENGTH headers total)
foreach(header IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${header}" scratch)
  file(WRITE ${WORK}/${scratch}.cpp "#include <${header}>\n")
  execute_process(COMMAND ${CXX} ${flags} ${WORK}/${scratch}.cpp
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message("${header} is not self-contained:\n${out}${err}")
    list(APPEND failed ${header})
  endif()
endforeach()
if(failed)
  list(LENGTH failed n)
  message(FATAL_ERROR "${n} of ${total} header(s) do not compile on their own")
endif()
message("self-contained: ${total} header(s) compile on their own (-fsyntax-only)")
