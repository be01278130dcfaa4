# Compile times of the headers and of a framework's files (docs/benchmarks.md §9):
#   cmake -DINCLUDE=include [-DBASE_INCLUDE=/tmp/base/include] [-DROUNDS=5] [-DCXX=g++]
#         -DWORK=/tmp/compile_times -P bench/compile_times.cmake
# Every command runs ROUNDS times, all taking turns, and the least wall time of each is printed
# with its ratio to the reference (syntax-only ir/schedule.hpp; -O2 for the -O2 files), as a
# Markdown table. BASE_INCLUDE, an older checkout's include/, adds its umbrella for comparison.
# The -O2 files are compiled, not linked: PIPESCHED_REGISTRY_COMPILED stands for linking
# pipesched::registry.
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/compile_time.cmake)
if(NOT ROUNDS)
  set(ROUNDS 5)
endif()
if(NOT CXX)
  set(CXX g++)
endif()
get_filename_component(INCLUDE "${INCLUDE}" ABSOLUTE)
file(MAKE_DIRECTORY ${WORK})

# Syntax only: a header alone.
set(names "")
set(commands "")
foreach(header IN ITEMS ir/schedule pipesched gen/registry analysis/schedule_report
                        gen/builtin_registry)
  string(MAKE_C_IDENTIFIER "${header}" id)
  file(WRITE ${WORK}/parse_${id}.cpp "#include <pipesched/${header}.hpp>\n")
  list(APPEND names "syntax-only ${header}.hpp")
  list(APPEND commands "${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${WORK}/parse_${id}.cpp")
endforeach()
if(BASE_INCLUDE)
  list(APPEND names "syntax-only pipesched.hpp of ${BASE_INCLUDE}")
  list(APPEND commands "${CXX} -std=c++20 -fsyntax-only -I${BASE_INCLUDE} ${WORK}/parse_pipesched.cpp")
endif()
list(LENGTH names parse_count)

# g++ -O2: the reference, a file naming a schedule (tests/consumer/run_consumer.cmake's), and
# the issue's file: a schedule by name, validated, simulated, memory checked, run on threads.
file(WRITE ${WORK}/o2_reference.cpp [=[
#include <pipesched/ir/schedule.hpp>
int main() { return static_cast<int>(pipesched::schedule{}.stages()); }
]=])
file(WRITE ${WORK}/o2_by_name.cpp [=[
#include <cstdio>

#include <pipesched/gen/builtin_registry.hpp>

int main(int argc, char** argv) {
  pipesched::generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  const pipesched::generation_result g =
      pipesched::default_registry().generate_result(argc > 1 ? argv[1] : "zb-v", p);
  std::printf("%s, %zu ops on stage 0\n", g.sched.name().c_str(), g.sched.ops(0).size());
}
]=])
file(WRITE ${WORK}/o2_full.cpp [=[
#include <cstdio>

#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>

int main(int argc, char** argv) {
  using namespace pipesched;
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  const generation_result g = default_registry().generate_result(argc > 1 ? argv[1] : "zb-h1", p);
  if (!validate(g.sched).ok()) {
    return 1;
  }
  const simulation_result r = simulate(g.sched, p.costs);
  const memory_report m = check_memory(g.sched, p.memory);
  null_executor e;
  run_threaded(e, g.sched);
  std::printf("%g %g\n", r.makespan, m.max_peak());
}
]=])
set(o2 "${CXX} -std=c++20 -O2 -I${INCLUDE} -c -o ${WORK}/o2.o")
list(APPEND names "-O2 reference (ir/schedule.hpp)" "-O2 a schedule by name, pipesched::registry"
                  "-O2 a schedule by name, header-only" "-O2 by name + checks + run_threaded, pipesched::registry"
                  "-O2 by name + checks + run_threaded, header-only")
list(APPEND commands "${o2} ${WORK}/o2_reference.cpp"
                     "${o2} -DPIPESCHED_REGISTRY_COMPILED ${WORK}/o2_by_name.cpp"
                     "${o2} ${WORK}/o2_by_name.cpp"
                     "${o2} -DPIPESCHED_REGISTRY_COMPILED ${WORK}/o2_full.cpp"
                     "${o2} ${WORK}/o2_full.cpp")

least_compile_times(least ${ROUNDS} ${commands})
list(LENGTH names n)
math(EXPR last "${n} - 1")
set(table "| file | least of ${ROUNDS} | ratio |\n|---|---:|---:|\n")
foreach(i RANGE ${last})
  list(GET names ${i} name)
  list(GET least ${i} s)
  if(i LESS parse_count)
    list(GET least 0 reference)
  else()
    list(GET least ${parse_count} reference)
  endif()
  ratio_percent(percent ${s} ${reference})
  math(EXPR whole "${percent} / 100")
  math(EXPR tenths "(${percent} % 100) / 10")
  string(APPEND table "| ${name} | ${s} s | ${whole}.${tenths}x |\n")
endforeach()
message("${table}")
