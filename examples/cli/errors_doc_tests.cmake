# docs/errors.md is true: every message on the page comes with the CLI command or the
# library code that prints it, and this test runs them all (format: cmake/check_errors_doc.cmake).
# The ```cpp examples become one program, regenerated when the page changes.
set(pipesched_errors_doc ${PROJECT_SOURCE_DIR}/docs/errors.md)
set(pipesched_errors_doc_script ${PROJECT_SOURCE_DIR}/cmake/check_errors_doc.cmake)
set(pipesched_errors_doc_cpp ${CMAKE_CURRENT_BINARY_DIR}/errors_doc_examples.cpp)
# The .cpp is a byproduct rewritten only when the code changes (Ninja restats it), so editing the
# page's text or its CLI examples recompiles nothing.
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/errors_doc_examples.stamp
  BYPRODUCTS ${pipesched_errors_doc_cpp}
  COMMAND ${CMAKE_COMMAND} -DMODE=generate -DDOC=${pipesched_errors_doc}
          -DOUT=${pipesched_errors_doc_cpp} -P ${pipesched_errors_doc_script}
  COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_CURRENT_BINARY_DIR}/errors_doc_examples.stamp
  DEPENDS ${pipesched_errors_doc} ${pipesched_errors_doc_script}
  COMMENT "Extracting the C++ examples of docs/errors.md" VERBATIM)
add_executable(errors_doc_examples ${pipesched_errors_doc_cpp}
               ${CMAKE_CURRENT_BINARY_DIR}/errors_doc_examples.stamp)
# Documentation code, not ours to hold to -Werror: a call made only for its exception discards
# a [[nodiscard]] result. Without debug information: the program only prints its exceptions'
# messages, and the build type's full -g is about a quarter of its compile time.
target_link_libraries(errors_doc_examples PRIVATE pipesched::io)
target_compile_options(errors_doc_examples PRIVATE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wno-unused-result> $<$<CXX_COMPILER_ID:GNU,Clang>:-g0>)
add_test(NAME "docs: errors.md examples print what the page shows"
         COMMAND ${CMAKE_COMMAND} -DMODE=check -DDOC=${pipesched_errors_doc}
                 -DCLI=$<TARGET_FILE:pipesched_cli> -DEXAMPLES=$<TARGET_FILE:errors_doc_examples>
                 -DWORKDIR=${PROJECT_SOURCE_DIR}/docs/examples/errors
                 -P ${pipesched_errors_doc_script})
set_tests_properties("docs: errors.md examples print what the page shows"
                     PROPERTIES LABELS "cli;docs" TIMEOUT 120)
