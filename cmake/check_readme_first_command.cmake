# The README's first command builds only what the demo needs: reads the
# first ```sh block of README.md, runs its configure step (same flags, into WORK instead of
# its build directory; apt is left out) and asks Ninja, without building, every command the
# build step's target needs from scratch. Fails when it would compile more than MAX_COMPILES sources
# (the CLI's own files), when the block lacks a configure or a --target build, or when configure
# fails (e.g. it would need Catch2 or Google Benchmark, which the command does not install).
file(READ ${SOURCE}/README.md readme)
string(FIND "${readme}" "```sh\n" at)
if(at LESS 0)
  message(FATAL_ERROR "README.md has no ```sh block")
endif()
math(EXPR at "${at} + 6")
string(SUBSTRING "${readme}" ${at} -1 rest)
string(FIND "${rest}" "\n```" end)
string(SUBSTRING "${rest}" 0 ${end} command)
message("first command: ${command}")
if(NOT command MATCHES "cmake -S \\. -B ([^ ]+) ([^&]*)&& cmake --build ([^ ]+) --target ([^ &]+)")
  message(FATAL_ERROR "the first command must configure and then build one --target")
endif()
set(dir ${CMAKE_MATCH_1})
separate_arguments(flags UNIX_COMMAND "${CMAKE_MATCH_2}")
set(target ${CMAKE_MATCH_4})
if(NOT "${CMAKE_MATCH_3}" STREQUAL "${dir}")
  message(FATAL_ERROR "it builds ${CMAKE_MATCH_3}, not the directory it configured (${dir})")
endif()
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK} ${flags}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "its configure step fails:\n${out}${err}")
endif()
# Every command the target needs from scratch (Ninja's commands tool), compiles counted.
file(STRINGS ${WORK}/CMakeCache.txt make_program REGEX "^CMAKE_MAKE_PROGRAM:")
string(REGEX REPLACE "^[^=]*=" "" make_program "${make_program}")
execute_process(COMMAND ${make_program} -C ${WORK} -t commands ${target}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ninja -t commands ${target} fails:\n${out}${err}")
endif()
string(REGEX MATCHALL " -c [^\n]*" compiles "${out}")
list(LENGTH compiles n)
message("the build step compiles ${n} source file(s) for target ${target}")
if(n GREATER ${MAX_COMPILES})
  message(FATAL_ERROR "the first command compiles ${n} files; the demo needs at most ${MAX_COMPILES}")
endif()
message("first command ok")
