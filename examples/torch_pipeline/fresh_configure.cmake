# cmake -DSOURCE=dir -DBINARY=dir -DCOMPILER=clang++ -DGENERATOR=Ninja -P fresh_configure.cmake:
# configures SOURCE into an empty BINARY with that compiler (tests and benchmarks off, examples
# on) and prints the output, so a ctest can match how examples/torch_pipeline was handled.
file(REMOVE_RECURSE "${BINARY}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BINARY}" -G "${GENERATOR}"
          "-DCMAKE_CXX_COMPILER=${COMPILER}" -DPIPESCHED_BUILD_TESTS=OFF
          -DPIPESCHED_BUILD_BENCH=OFF -DPIPESCHED_BUILD_EXAMPLES=ON
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure with ${COMPILER} failed (exit code ${rc})")
endif()
