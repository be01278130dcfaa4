# Compile times of the headers and of a framework's files (docs/benchmarks.md §9 and §12):
#   cmake -DINCLUDE=include [-DBASE_INCLUDE=/tmp/base/include] [-DROUNDS=5] [-DCXX=g++]
#         -DWORK=/tmp/compile_times -P bench/compile_times.cmake
# Every command runs ROUNDS times, all taking turns, and the least CPU time of each is printed
# (cmake/compile_time.cmake) as Markdown tables: the syntax-only headers with their ratio to
# ir/schedule.hpp; then at -O2 one file per heavy public header calling its entry point,
# against the compiled library and header-only (-DPIPESCHED_HEADER_ONLY), with their ratio to a
# reference file that includes only nlohmann/json, fmt and CLI11 (what a framework's file
# using the io/ headers and a command line pays anyway). BASE_INCLUDE, an older checkout's
# include/, adds its umbrella and a column of the -O2 files against it (with
# -DPIPESCHED_REGISTRY_COMPILED, which a checkout from before the compiled library understood)
# for comparison. The -O2 files are compiled, not linked.
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
foreach(header IN ITEMS ir/schedule pipesched gen/registry analysis/validate
                        analysis/schedule_report gen/builtin_registry plan/planner plan/pack
                        tools/whatif)
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

# g++ -O2: the reference, then the files, each naming the entry point of one heavy header.
file(WRITE ${WORK}/o2_reference.cpp [=[
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  CLI::App app{"reference"};
  int n = 0;
  app.add_option("-n", n);
  CLI11_PARSE(app, argc, argv);
  const nlohmann::json j = {{"n", n}};
  fmt::print("{}\n", j.dump());
}
]=])
set(o2_files schedule by_name by_name_validate full planner pack whatif analyze plan_json)
set(o2_schedule_title "ir/schedule.hpp only")
file(WRITE ${WORK}/o2_schedule.cpp [=[
#include <pipesched/ir/schedule.hpp>
int main() { return static_cast<int>(pipesched::schedule{}.stages()); }
]=])
set(o2_by_name_title "gen/builtin_registry.hpp: a schedule by name")
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
set(o2_by_name_validate_title "the registry and analysis/validate.hpp: by name, validated")
file(WRITE ${WORK}/o2_by_name_validate.cpp [=[
#include <cstdio>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>

int main(int argc, char** argv) {
  pipesched::generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  const pipesched::generation_result g =
      pipesched::default_registry().generate_result(argc > 1 ? argv[1] : "zb-v", p);
  std::printf("%d\n", pipesched::validate(g.sched).ok() ? 1 : 0);
}
]=])
set(o2_full_title "by name + validate, simulate, check_memory, run_threaded")
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
set(o2_planner_title "plan/planner.hpp: plan()")
file(WRITE ${WORK}/o2_planner.cpp [=[
#include <cstdio>

#include <pipesched/plan/planner.hpp>

int main() {
  pipesched::training_job job;
  job.model = pipesched::model_preset("llama3-8b");
  job.cluster = pipesched::cluster_preset("h100-sxm-80gb");
  job.gpus = 8;
  job.sequence = 4096;
  job.global_batch = 32;
  std::printf("%zu\n", pipesched::plan(job).plans.size());
}
]=])
set(o2_pack_title "plan/pack.hpp: pack()")
file(WRITE ${WORK}/o2_pack.cpp [=[
#include <cstdio>

#include <pipesched/plan/pack.hpp>

int main() {
  pipesched::pack_request r;
  r.model = pipesched::model_preset("llama3-8b");
  r.cluster = pipesched::cluster_preset("h100-sxm-80gb");
  r.lengths = {4096, 1024, 2048, 512, 4096, 8192, 256, 1024};
  r.microbatches = 4;
  r.stages = 2;
  std::printf("%g\n", pipesched::pack(r).chosen.step_time_s);
}
]=])
set(o2_whatif_title "tools/whatif.hpp: run_whatif()")
file(WRITE ${WORK}/o2_whatif.cpp [=[
#include <cstdio>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/tools/whatif.hpp>

int main() {
  pipesched::whatif_request req;
  req.cv = 0.1;
  const pipesched::schedule s = pipesched::generate(pipesched::one_f_one_b{}, 4, 8);
  std::printf("%zu\n", pipesched::run_whatif(s, req).samples().size());
}
]=])
set(o2_analyze_title "tools/analyze.hpp: analyze_run()")
file(WRITE ${WORK}/o2_analyze.cpp [=[
#include <cstdio>

#include <pipesched/tools/analyze.hpp>

int main() {
  pipesched::measured_run run;
  std::printf("%zu\n", pipesched::analyze_run(run).stragglers.size());
}
]=])
set(o2_plan_json_title "io/plan_json.hpp: plan_to_json() of a plan()")
file(WRITE ${WORK}/o2_plan_json.cpp [=[
#include <cstdio>

#include <pipesched/io/plan_json.hpp>
#include <pipesched/plan/planner.hpp>

int main() {
  pipesched::training_job job;
  job.model = pipesched::model_preset("llama3-8b");
  job.cluster = pipesched::cluster_preset("h100-sxm-80gb");
  job.gpus = 8;
  job.sequence = 4096;
  job.global_batch = 32;
  std::printf("%s\n", pipesched::plan_to_json(job, pipesched::plan(job)).dump().c_str());
}
]=])
set(o2 "${CXX} -std=c++20 -O2 -I${INCLUDE} -c -o ${WORK}/o2.o")
set(o2_commands "${o2} ${WORK}/o2_reference.cpp")
set(o2_base "${CXX} -std=c++20 -O2 -I${BASE_INCLUDE} -DPIPESCHED_REGISTRY_COMPILED -c -o ${WORK}/o2.o")
foreach(f IN LISTS o2_files)
  list(APPEND o2_commands "${o2} ${WORK}/o2_${f}.cpp" "${o2} -DPIPESCHED_HEADER_ONLY ${WORK}/o2_${f}.cpp")
  if(BASE_INCLUDE)
    list(APPEND o2_commands "${o2_base} ${WORK}/o2_${f}.cpp")
  endif()
endforeach()

least_compile_times(parse_least ${ROUNDS} ${commands})
least_compile_times(o2_least ${ROUNDS} ${o2_commands})

# "2.3x": <a> / <b> with one decimal.
function(times out a b)
  ratio_percent(percent ${a} ${b})
  math(EXPR whole "${percent} / 100")
  math(EXPR tenths "(${percent} % 100) / 10")
  set(${out} "${whole}.${tenths}x" PARENT_SCOPE)
endfunction()

list(GET parse_least 0 reference)
set(table "| header, g++ -fsyntax-only | CPU s, least of ${ROUNDS} | ratio |\n|---|---:|---:|\n")
foreach(name s IN ZIP_LISTS names parse_least)
  times(ratio ${s} ${reference})
  string(APPEND table "| ${name} | ${s} | ${ratio} |\n")
endforeach()
list(GET o2_least 0 reference)
set(base_head "")
set(base_rule "")
set(base_rule_empty "")
if(BASE_INCLUDE)
  set(base_head " ${BASE_INCLUDE}: CPU s |")
  set(base_rule "---:|")
  set(base_rule_empty " |")
endif()
string(APPEND table "\n| file, g++ -O2 -c | compiled library: CPU s | ratio | header-only: CPU s | ratio |${base_head}\n"
                    "|---|---:|---:|---:|---:|${base_rule}\n"
                    "| reference: nlohmann/json, fmt, CLI11 | ${reference} | 1.0x | | |${base_rule_empty}\n")
set(i 1)
foreach(f IN LISTS o2_files)
  list(GET o2_least ${i} compiled)
  math(EXPR i "${i} + 1")
  list(GET o2_least ${i} header_only)
  math(EXPR i "${i} + 1")
  set(base "")
  if(BASE_INCLUDE)
    list(GET o2_least ${i} base)
    math(EXPR i "${i} + 1")
    set(base " ${base} |")
  endif()
  times(compiled_ratio ${compiled} ${reference})
  times(header_only_ratio ${header_only} ${reference})
  string(APPEND table "| ${o2_${f}_title} | ${compiled} | ${compiled_ratio} | ${header_only} | "
                      "${header_only_ratio} |${base}\n")
endforeach()
message("${table}")
