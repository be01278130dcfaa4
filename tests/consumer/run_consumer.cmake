# Builds and runs small consumers of pipesched, as a user would:
#   MODE=find_package      install the project's own build (BUILD, the compiled library unless
#                          it was configured header-only) into WORK/prefix and, when it is
#                          compiled, a header-only configure of SOURCE (nothing to build) into
#                          WORK/prefix-header-only; then build against each installed tree a
#                          core program and a program naming schedules (and against the first
#                          one calling plan()), with fmt and nlohmann_json hidden from
#                          find_package (the core needs neither), and an io program (COMPONENTS
#                          io) against the first.
#   MODE=add_subdirectory  the core program, with pipesched as a subdirectory, header-only (the
#                          compiled mode is the project's own build, which need not be redone).
#   MODE=compile_time      after MODE=find_package in the same WORK: the compile times (g++ -O2,
#                          CPU seconds, least of ROUNDS turns) of the program naming schedules
#                          and of the one calling plan() against the compiled library, and of
#                          a reference file that includes only ir/schedule.hpp; fails when one
#                          takes more than MAX_PERCENT % of the reference, or when the program
#                          naming schedules does not header-only (once: the check could not fail).
if(MODE STREQUAL "compile_time")
  include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/compile_time.cmake)
  foreach(tree app app_header_only)
    file(READ ${WORK}/${tree}/build/compile_commands.json commands)
    string(JSON n LENGTH "${commands}")
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON file GET "${commands}" ${i} file)
      get_filename_component(name ${file} NAME_WE)
      string(JSON ${tree}_${name} GET "${commands}" ${i} command)
      string(JSON ${tree}_directory GET "${commands}" ${i} directory)
    endforeach()
  endforeach()
  # Each tree's commands run where its build runs them (their -o paths are relative to it).
  set(COMPILE_TIME_DIRECTORY ${app_directory})
  least_compile_times(least ${ROUNDS} "${app_reference}" "${app_by_name}" "${app_planner}")
  list(GET least 0 reference_s)
  list(GET least 1 by_name_s)
  list(GET least 2 planner_s)
  set(COMPILE_TIME_DIRECTORY ${app_header_only_directory})
  least_compile_times(header_only_s 1 "${app_header_only_by_name}")
  set(failed "")
  foreach(case by_name planner header_only)
    ratio_percent(${case}_percent ${${case}_s} ${reference_s})
    if(${case}_percent GREATER MAX_PERCENT AND NOT case STREQUAL "header_only")
      list(APPEND failed "${case}")
    endif()
  endforeach()
  message("g++ -O2, CPU seconds: reference (ir/schedule.hpp) ${reference_s} s; against the "
          "compiled library, a file naming a schedule in default_registry() ${by_name_s} s "
          "(${by_name_percent} %), a file calling plan() ${planner_s} s (${planner_percent} %); "
          "header-only, the file naming a schedule ${header_only_s} s (${header_only_percent} %); "
          "at most ${MAX_PERCENT} % allowed")
  if(failed)
    message(FATAL_ERROR "against the compiled library, more than ${MAX_PERCENT} % of the "
                        "reference: ${failed}")
  endif()
  if(NOT header_only_percent GREATER MAX_PERCENT)
    message(FATAL_ERROR "header-only it takes ${header_only_percent} %: the check could not fail")
  endif()
  message("compile time ok")
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/app)
set(core_program [=[
#include <pipesched/analysis/validate.hpp>
#include <pipesched/pipesched.hpp>
#include <cstdio>
int main() {
  auto s = pipesched::generate(pipesched::zb_h1{}, 4, 8);
  std::printf("consumer ok: %s %s\n", s.name().c_str(), pipesched::validate(s).ok() ? "valid" : "INVALID");
}
]=])
file(WRITE ${WORK}/app/main.cpp "${core_program}")

if(MODE STREQUAL "add_subdirectory")
  file(WRITE ${WORK}/app/CMakeLists.txt "cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
set(PIPESCHED_HEADER_ONLY ON)
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

# MODE=find_package: the project's build as it is, and header-only when that one is compiled.
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
set(trees app)
set(prefix_app ${WORK}/prefix)
if(NOT HEADER_ONLY)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/lib-header-only
                          -DCMAKE_CXX_COMPILER=${CXX} -DPIPESCHED_HEADER_ONLY=ON
                          -DPIPESCHED_BUILD_TESTS=OFF -DPIPESCHED_BUILD_EXAMPLES=OFF
                          -DPIPESCHED_BUILD_BENCH=OFF -DPIPESCHED_INSTALL=ON
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${WORK}/lib-header-only
                          --prefix ${WORK}/prefix-header-only
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  file(MAKE_DIRECTORY ${WORK}/app_header_only)
  file(WRITE ${WORK}/app_header_only/main.cpp "${core_program}")
  list(APPEND trees app_header_only)
  set(prefix_app_header_only ${WORK}/prefix-header-only)
endif()

# A framework's files (the ones compile_time measures): one that names a schedule, one that
# plans a job; and the reference.
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
set(planner [=[
#include <cstdio>

#include <pipesched/plan/planner.hpp>

int main() {
  pipesched::training_job job;
  job.model = pipesched::model_preset("llama3-8b");
  job.cluster = pipesched::cluster_preset("h100-sxm-80gb");
  job.gpus = 8;
  job.sequence = 4096;
  job.global_batch = 32;
  const pipesched::plan_result r = pipesched::plan(job);
  std::printf("consumer ok: %zu plans, the best %s\n", r.plans.size(),
              r.plans.empty() ? "none" : r.plans.front().choice.schedule.c_str());
}
]=])
file(WRITE ${WORK}/app/reference.cpp [=[
#include <pipesched/ir/schedule.hpp>
int main() { return static_cast<int>(pipesched::schedule{}.stages()); }
]=])
# The planner header-only is left out: 25 s of CPU for a check the header-only unit tests make.
file(WRITE ${WORK}/app/planner.cpp "${planner}")
foreach(tree IN LISTS trees)
  file(WRITE ${WORK}/${tree}/by_name.cpp "${by_name}")
  file(WRITE ${WORK}/${tree}/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(pipesched 0.1 REQUIRED)
foreach(name app by_name planner reference)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${name}.cpp)
    add_executable(${name} ${name}.cpp)
    target_link_libraries(${name} PRIVATE pipesched::pipesched)
  endif()
endforeach()
]=])
  file(RENAME ${WORK}/${tree}/main.cpp ${WORK}/${tree}/app.cpp)
  # No CMAKE_BUILD_TYPE: the flags are -O2 only, as measured.
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK}/${tree} -B ${WORK}/${tree}/build
                          -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix_${tree}}
                          -DCMAKE_CXX_FLAGS=-O2 -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
                          -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON
                          -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/${tree}/build
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  message("${tree}:")
  execute_process(COMMAND ${WORK}/${tree}/build/app COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${WORK}/${tree}/build/by_name zb-v COMMAND_ERROR_IS_FATAL ANY)
  if(EXISTS ${WORK}/${tree}/build/planner)
    execute_process(COMMAND ${WORK}/${tree}/build/planner COMMAND_ERROR_IS_FATAL ANY)
  endif()
endforeach()

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
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/io/build OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/io/build/io COMMAND_ERROR_IS_FATAL ANY)
