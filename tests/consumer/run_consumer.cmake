# Builds and runs small consumers of pipesched, as a user would:
#   MODE=find_package      configure pipesched alone (no tests, examples or benchmarks), install
#                          it into WORK/prefix, then build against the installed tree: a core
#                          program and a program naming schedules through the compiled
#                          pipesched::registry, both with fmt and nlohmann_json hidden from
#                          find_package (a core consumer needs neither), and an io program
#                          (COMPONENTS io).
#   MODE=add_subdirectory  the core program, with pipesched as a subdirectory.
#   MODE=compile_time      after MODE=find_package in the same WORK: the registry program's
#                          compile time (g++ -O2, least of ROUNDS turns) with the compiled
#                          registry, against the same file header-only and a reference file
#                          that includes only ir/schedule.hpp; fails when it takes more than
#                          MAX_PERCENT % of the reference, or when header-only does not (the
#                          check could not fail).
if(MODE STREQUAL "compile_time")
  include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/compile_time.cmake)
  file(READ ${WORK}/app/build/compile_commands.json commands)
  string(JSON n LENGTH "${commands}")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON file GET "${commands}" ${i} file)
    get_filename_component(name ${file} NAME_WE)
    string(JSON command_${name} GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
  endforeach()
  set(COMPILE_TIME_DIRECTORY ${directory})
  least_compile_times(least ${ROUNDS} "${command_reference}" "${command_by_name}"
                      "${command_by_name_header_only}")
  list(GET least 0 reference_s)
  list(GET least 1 compiled_s)
  list(GET least 2 header_only_s)
  ratio_percent(compiled_percent ${compiled_s} ${reference_s})
  ratio_percent(header_only_percent ${header_only_s} ${reference_s})
  message("least of ${ROUNDS}, g++ -O2: reference (ir/schedule.hpp) ${reference_s} s; "
          "a file naming a schedule in default_registry(): ${compiled_s} s (${compiled_percent} %) "
          "with pipesched::registry, ${header_only_s} s (${header_only_percent} %) header-only; "
          "at most ${MAX_PERCENT} % allowed")
  if(compiled_percent GREATER MAX_PERCENT)
    message(FATAL_ERROR "with pipesched::registry it takes ${compiled_percent} % of the reference")
  endif()
  if(NOT header_only_percent GREATER MAX_PERCENT)
    message(FATAL_ERROR "header-only it takes ${header_only_percent} %: the check could not fail")
  endif()
  message("compile time ok")
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/app)
file(WRITE ${WORK}/app/main.cpp [=[
#include <pipesched/analysis/validate.hpp>
#include <pipesched/pipesched.hpp>
#include <cstdio>
int main() {
  auto s = pipesched::generate(pipesched::zb_h1{}, 4, 8);
  std::printf("consumer ok: %s %s\n", s.name().c_str(), pipesched::validate(s).ok() ? "valid" : "INVALID");
}
]=])

if(MODE STREQUAL "add_subdirectory")
  file(WRITE ${WORK}/app/CMakeLists.txt "cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
add_subdirectory(\"${SOURCE}\" pipesched)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE pipesched::pipesched)
")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK}/app -B ${WORK}/app/build -DCMAKE_CXX_COMPILER=${CXX}
                  COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/app/build COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${WORK}/app/build/app COMMAND_ERROR_IS_FATAL ANY)
  return()
endif()

# MODE=find_package
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/lib -DCMAKE_CXX_COMPILER=${CXX}
                        -DPIPESCHED_BUILD_TESTS=OFF -DPIPESCHED_BUILD_EXAMPLES=OFF
                        -DPIPESCHED_BUILD_BENCH=OFF -DPIPESCHED_INSTALL=ON
                        -DPIPESCHED_REGISTRY_LIBRARY=ON -DCMAKE_INSTALL_PREFIX=${WORK}/prefix
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/lib COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${WORK}/lib COMMAND_ERROR_IS_FATAL ANY)

# A framework's file that names a schedule (the one compile_time measures), compiled against the
# library and, for comparison, header-only; and the reference.
set(by_name [=[
#include <cstdio>

#include <pipesched/gen/builtin_registry.hpp>

int main(int argc, char** argv) {
  pipesched::generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  const pipesched::generation_result g =
      pipesched::default_registry().generate_result(argc > 1 ? argv[1] : "zb-v", p);
  std::printf("consumer ok: %s, %zu ops on stage 0\n", g.sched.name().c_str(), g.sched.ops(0).size());
}
]=])
file(WRITE ${WORK}/app/by_name.cpp "${by_name}")
file(WRITE ${WORK}/app/by_name_header_only.cpp "${by_name}")
file(WRITE ${WORK}/app/reference.cpp [=[
#include <pipesched/ir/schedule.hpp>
int main() { return static_cast<int>(pipesched::schedule{}.stages()); }
]=])
file(WRITE ${WORK}/app/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(pipesched 0.1 REQUIRED COMPONENTS core registry)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE pipesched::pipesched)
add_executable(by_name by_name.cpp)
target_link_libraries(by_name PRIVATE pipesched::registry)
add_executable(by_name_header_only by_name_header_only.cpp)
target_link_libraries(by_name_header_only PRIVATE pipesched::pipesched)
add_executable(reference reference.cpp)
target_link_libraries(reference PRIVATE pipesched::pipesched)
]=])
# No CMAKE_BUILD_TYPE: the flags are -O2 only, as measured.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK}/app -B ${WORK}/app/build -DCMAKE_CXX_COMPILER=${CXX}
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_CXX_FLAGS=-O2
                        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
                        -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/app/build COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/app/build/app COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/app/build/by_name zb-v COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/app/build/by_name_header_only zb-h1 COMMAND_ERROR_IS_FATAL ANY)

# COMPONENTS io: the core with fmt and nlohmann_json.
file(MAKE_DIRECTORY ${WORK}/io)
file(WRITE ${WORK}/io/main.cpp [=[
#include <cstdio>

#include <pipesched/io/json.hpp>
#include <pipesched/pipesched.hpp>

int main() {
  const auto s = pipesched::generate(pipesched::one_f_one_b{}, 2, 2);
  const auto back = pipesched::read_schedule_json(pipesched::write_schedule_json(s));
  std::printf("consumer ok: io %s\n", back == s ? "round trip" : "DIFFERS");
}
]=])
file(WRITE ${WORK}/io/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.24)
project(consumer_io LANGUAGES CXX)
find_package(pipesched 0.1 REQUIRED COMPONENTS io)
add_executable(io main.cpp)
target_link_libraries(io PRIVATE pipesched::io)
]=])
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK}/io -B ${WORK}/io/build -DCMAKE_CXX_COMPILER=${CXX}
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/io/build COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/io/build/io COMMAND_ERROR_IS_FATAL ANY)
