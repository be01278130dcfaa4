# docs/errors.md shows every error message next to what produces it, and this script keeps the
# two together. Every fenced block in the page is one of:
#
#   ```console                          a command of the `pipesched` CLI, run in WORKDIR
#   $ pipesched validate -i bad.json    (docs/examples/errors/), then exactly what it prints:
#   error: bad.json: /stages: ...       `error: ...` -> exit code 2, this text on stderr;
#   ```                                 anything else -> exit code 1 (violations), on stdout.
#                                       Several `$` commands may share a block.
#
#   ```cpp                              library code (the body of a function with
#   cost_model::uniform(-1, 1, 1);      `using namespace pipesched`, also run in WORKDIR) that
#   // what(): cost_model: ...          must throw, followed by the exception's what(). Several
#   ```                                 may share a block.
#
# Any other fenced block, a command without output, code without a `// what():` line, or
# "`error: ..." written in running text (a CLI message without its command) fails the check.
#
#   cmake -DMODE=generate -DDOC=docs/errors.md -DOUT=x.cpp -P check_errors_doc.cmake
#       writes the program that runs the ```cpp examples (x.cpp, rewritten only on change)
#   cmake -DMODE=check -DDOC=docs/errors.md -DCLI=pipesched -DEXAMPLES=<that program>
#         -DWORKDIR=docs/examples/errors -P check_errors_doc.cmake
#       runs every example and fails unless each prints what the page shows

cmake_minimum_required(VERSION 3.24)

# CMake lists split at ';' and treat '[' ']' specially; messages and C++ contain all three,
# so the page is split into lines with them encoded, and each line is decoded when used.
function(errors_doc_decode out text)
  string(REPLACE "<errors-doc-semicolon>" ";" text "${text}")
  string(REPLACE "<errors-doc-backslash>" "\\" text "${text}")
  string(REPLACE "<errors-doc-open>" "[" text "${text}")
  string(REPLACE "<errors-doc-close>" "]" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

macro(errors_doc_problem text)
  string(APPEND errors_doc_problems "${DOC}:${text}\n\n")
  math(EXPR errors_doc_problem_count "${errors_doc_problem_count} + 1")
endmacro()

# Parses DOC into examples: sets errors_doc_count and, for i in 1..count,
# errors_doc_<i>_kind (cli | cpp), _line (where it starts in the page), _input (the command
# line or the code) and _expected (the output lines joined by \n); errors_doc_problems lists
# what is wrong with the page's shape (one per line), errors_doc_problem_count how many.
macro(errors_doc_parse)
  file(READ "${DOC}" errors_doc_text)
  string(REPLACE "\\" "<errors-doc-backslash>" errors_doc_text "${errors_doc_text}")
  string(REPLACE ";" "<errors-doc-semicolon>" errors_doc_text "${errors_doc_text}")
  string(REPLACE "[" "<errors-doc-open>" errors_doc_text "${errors_doc_text}")
  string(REPLACE "]" "<errors-doc-close>" errors_doc_text "${errors_doc_text}")
  string(REPLACE "\n" ";" errors_doc_lines "${errors_doc_text}")
  set(errors_doc_count 0)
  set(errors_doc_problems "")
  set(errors_doc_problem_count 0)
  set(fence "")  # "", cli, cpp
  set(lineno 0)
  set(current 0)  # the example being collected (0: none)
  set(code "")
  set(code_line 0)
  foreach(raw IN LISTS errors_doc_lines)
    math(EXPR lineno "${lineno} + 1")
    errors_doc_decode(line "${raw}")
    if(fence STREQUAL "")
      if(line MATCHES "^```(.*)$")
        set(lang "${CMAKE_MATCH_1}")
        set(fence_line ${lineno})
        set(current 0)
        set(code "")
        set(code_line 0)
        if(lang STREQUAL "console")
          set(fence cli)
        elseif(lang STREQUAL "cpp")
          set(fence cpp)
        else()
          set(fence other)
          errors_doc_problem("line ${lineno}: a ```${lang} block: every example must be a ```console block of `$ pipesched ...` commands and their output, or a ```cpp block ending in `// what(): ...`")
        endif()
      elseif(line MATCHES "`error: [^.`]")
        errors_doc_problem("line ${lineno}: a CLI message in running text: show it in a ```console block under the command that prints it")
      endif()
    elseif(line MATCHES "^```")
      if(fence STREQUAL "cli" AND current EQUAL 0)
        errors_doc_problem("line ${fence_line}: a ```console block without a `$ pipesched` command")
      elseif(fence STREQUAL "cli" AND "${errors_doc_${current}_expected}" STREQUAL "")
        errors_doc_problem("line ${errors_doc_${current}_line}: a command without its output")
      elseif(fence STREQUAL "cpp" AND NOT code STREQUAL "")
        errors_doc_problem("line ${code_line}: code without a `// what(): ...` line after it")
      elseif(fence STREQUAL "cpp" AND current EQUAL 0)
        errors_doc_problem("line ${fence_line}: a ```cpp block without a `// what(): ...` line")
      endif()
      set(fence "")
    elseif(fence STREQUAL "cli")
      if(line MATCHES "^\\$ (.*)$")
        math(EXPR errors_doc_count "${errors_doc_count} + 1")
        set(current ${errors_doc_count})
        set(errors_doc_${current}_kind cli)
        set(errors_doc_${current}_line ${lineno})
        set(errors_doc_${current}_input "${CMAKE_MATCH_1}")
        set(errors_doc_${current}_expected "")
        if(NOT CMAKE_MATCH_1 MATCHES "^pipesched( |$)")
          errors_doc_problem("line ${lineno}: the command must start with `pipesched`")
        endif()
      elseif(current EQUAL 0)
        errors_doc_problem("line ${lineno}: output without a `$ pipesched ...` command before it")
      elseif("${errors_doc_${current}_expected}" STREQUAL "")
        set(errors_doc_${current}_expected "${line}")
      else()
        string(APPEND errors_doc_${current}_expected "\n${line}")
      endif()
    elseif(fence STREQUAL "cpp")
      if(line MATCHES "^// what\\(\\): (.*)$")
        if(code STREQUAL "")
          errors_doc_problem("line ${lineno}: `// what():` without code before it")
        else()
          math(EXPR errors_doc_count "${errors_doc_count} + 1")
          set(current ${errors_doc_count})
          set(errors_doc_${current}_kind cpp)
          set(errors_doc_${current}_line ${code_line})
          set(errors_doc_${current}_input "${code}")
          set(errors_doc_${current}_expected "${CMAKE_MATCH_1}")
        endif()
        set(code "")
        set(code_line 0)
      elseif(NOT line STREQUAL "" OR NOT code STREQUAL "")
        if(code_line EQUAL 0)
          set(code_line ${lineno})
        endif()
        string(APPEND code "${line}\n")
      endif()
    endif()
  endforeach()
  if(NOT fence STREQUAL "")
    errors_doc_problem("line ${fence_line}: a code block that is never closed")
  endif()
endmacro()

# The key of a ```cpp example in the generated program: its code's hash, so that the program
# and the page agree on which code prints which message, and a stale build is noticed.
function(errors_doc_key out code)
  string(MD5 key "${code}")
  string(SUBSTRING "${key}" 0 16 key)
  set(${out} "${key}" PARENT_SCOPE)
endfunction()

errors_doc_parse()

if(MODE STREQUAL "generate")
  set(cpp "// Generated by cmake/check_errors_doc.cmake from the ```cpp examples of docs/errors.md.\n")
  string(APPEND cpp "// Run with an example's key: prints what() of the exception it throws, exit code 2.\n")
  string(APPEND cpp [=[
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/exec/any_executor.hpp>
#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/sleep_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/dualpipe.hpp>
#include <pipesched/gen/dualpipev.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/model_json.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/pipesched.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

namespace {
using namespace pipesched;
using namespace std::chrono_literals;
]=])
  set(table "")
  set(seen "")
  foreach(i RANGE 1 ${errors_doc_count})
    if(i EQUAL 0 OR i GREATER errors_doc_count OR NOT errors_doc_${i}_kind STREQUAL "cpp")
      continue()
    endif()
    errors_doc_key(key "${errors_doc_${i}_input}")
    if(key IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${key})
    # No #line: line numbers would change with any edit above the code and force a rebuild.
    string(APPEND cpp "\nvoid example_${key}() {\n${errors_doc_${i}_input}}\n")
    string(APPEND table "    {\"${key}\", example_${key}},\n")
  endforeach()
  string(APPEND cpp "\nstruct entry {\n  const char* key;\n  void (*run)();\n};\n"
                    "const entry examples[] = {\n${table}    {nullptr, nullptr}};\n}  // namespace\n")
  string(APPEND cpp [=[

int main(int argc, char** argv) {
  for (const entry* e = examples; argc == 2 && e->key != nullptr; ++e) {
    if (std::strcmp(argv[1], e->key) != 0) {
      continue;
    }
    try {
      e->run();
    } catch (const std::exception& x) {
      std::fprintf(stderr, "%s\n", x.what());
      std::fflush(stderr);
      std::_Exit(2);  // not exit(): an op abandoned by op_timeout may still be sleeping
    } catch (...) {
      std::fprintf(stderr, "(an exception not derived from std::exception)\n");
      std::fflush(stderr);
      std::_Exit(2);
    }
    std::fprintf(stderr, "(no exception)\n");
    return 0;
  }
  std::fprintf(stderr, "no example with key %s: rebuild (the C++ in docs/errors.md changed)\n",
               argc == 2 ? argv[1] : "(none)");
  return 3;
}
]=])
  file(WRITE "${OUT}.tmp" "${cpp}")
  file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
  file(REMOVE "${OUT}.tmp")
  return()
endif()

if(NOT MODE STREQUAL "check")
  message(FATAL_ERROR "MODE must be generate or check")
endif()

set(report "${errors_doc_problems}")
set(failed ${errors_doc_problem_count})
set(checked 0)
foreach(i RANGE 1 ${errors_doc_count})
  if(i EQUAL 0 OR i GREATER errors_doc_count)  # `RANGE 1 0` runs 1, 0
    continue()
  endif()
  set(expected "${errors_doc_${i}_expected}")
  if(errors_doc_${i}_kind STREQUAL "cli")
    set(shown "$ ${errors_doc_${i}_input}")
    string(REGEX REPLACE "^pipesched" "" args "${errors_doc_${i}_input}")
    separate_arguments(args UNIX_COMMAND "${args}")
    execute_process(COMMAND "${CLI}" ${args} WORKING_DIRECTORY "${WORKDIR}"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    if(expected MATCHES "^error: ")
      set(want_rc 2)
      set(got "${err}")
      set(other "${out}")
    else()
      set(want_rc 1)
      set(got "${out}")
      set(other "${err}")
    endif()
  else()
    string(REGEX REPLACE "\n$" "" shown "${errors_doc_${i}_input}")
    errors_doc_key(key "${errors_doc_${i}_input}")
    execute_process(COMMAND "${EXAMPLES}" ${key} WORKING_DIRECTORY "${WORKDIR}"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    set(want_rc 2)
    set(got "${err}")
    set(other "${out}")
  endif()
  string(REGEX REPLACE "\n$" "" got "${got}")
  math(EXPR checked "${checked} + 1")
  if(NOT "${rc}" STREQUAL "${want_rc}" OR NOT got STREQUAL expected OR NOT other STREQUAL "")
    math(EXPR failed "${failed} + 1")
    string(APPEND report "${DOC}:${errors_doc_${i}_line}:\n${shown}\n"
                         "-- the page shows (exit code ${want_rc}):\n${expected}\n"
                         "-- it printed (exit code ${rc}):\n${got}\n${other}\n")
  endif()
endforeach()

if(checked EQUAL 0)
  math(EXPR failed "${failed} + 1")
  string(APPEND report "${DOC}: no examples found\n")
endif()
if(failed GREATER 0)
  message("${report}")  # verbatim: FATAL_ERROR would re-indent and double-space it
  message(FATAL_ERROR "docs/errors.md: ${failed} problem(s) above; the format is described at "
                      "the top of cmake/check_errors_doc.cmake")
endif()
message("docs/errors.md: all ${checked} examples print what the page shows")
