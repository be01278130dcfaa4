# Fails unless DOC (a Markdown page) is the program SOURCE and its output, so that the page
# cannot go stale (docs/cpp.md): the page's ```cpp blocks, joined by one
# blank line, must be SOURCE verbatim, and its ```text blocks, joined as they are, must be what
# PROGRAM (SOURCE built) prints, run without arguments in WORK. Other blocks (```cmake, ```sh)
# are prose.

cmake_policy(VERSION 3.24)

# All blocks of one language in `text`, joined by `separator`.
function(blocks_of out text language separator)
  set(joined "")
  set(first TRUE)
  set(open "```${language}\n")
  string(LENGTH "${open}" open_length)
  while(TRUE)
    string(FIND "${text}" "${open}" at)
    if(at EQUAL -1)
      break()
    endif()
    math(EXPR at "${at} + ${open_length}")
    string(SUBSTRING "${text}" ${at} -1 text)
    string(FIND "${text}" "```\n" end)
    if(end EQUAL -1)
      message(FATAL_ERROR "${DOC}: a ```${language} block is not closed")
    endif()
    string(SUBSTRING "${text}" 0 ${end} block)
    if(NOT first)
      string(APPEND joined "${separator}")
    endif()
    string(APPEND joined "${block}")
    set(first FALSE)
    string(SUBSTRING "${text}" ${end} -1 text)
  endwhile()
  set(${out} "${joined}" PARENT_SCOPE)
endfunction()

file(READ ${DOC} doc)
file(READ ${SOURCE} source)
blocks_of(code "${doc}" cpp "\n")
if(NOT code STREQUAL source)
  file(WRITE ${WORK}/from_the_page.cpp "${code}")
  message(FATAL_ERROR "${DOC}'s ```cpp blocks, joined by a blank line, are not ${SOURCE} "
                      "(they are in ${WORK}/from_the_page.cpp: diff the two)")
endif()
execute_process(COMMAND ${PROGRAM} WORKING_DIRECTORY ${WORK} OUTPUT_VARIABLE output
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}:\n${output}")
endif()
blocks_of(shown "${doc}" text "")
if(NOT shown STREQUAL output)
  message(FATAL_ERROR "${DOC}'s ```text blocks are not what the program prints now:\n${output}")
endif()
message("${DOC} shows the program and its output")
