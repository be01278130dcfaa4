// Memory-checking speed of every registered schedule: check_memory() with the default options
// (memory curve recorded) and with a budget every stage meets.
#include <pipesched/analysis/check_memory.hpp>

#include "bench_common.hpp"

namespace {

using namespace pipesched;

const memory_model model = memory_model::uniform(1.0, 0.5);

const bool registered = [] {
  pipesched_bench::register_all(
      "check_memory", [](benchmark::State& st, const generator_entry&, const schedule& s) {
        for (auto _ : st) {
          memory_report r = check_memory(s, model);
          benchmark::DoNotOptimize(r);
        }
      });
  pipesched_bench::register_all(
      "check_memory_budget", [](benchmark::State& st, const generator_entry&, const schedule& s) {
        memory_options o = memory_options::with_limit(1e12);
        o.record_curve = false;
        for (auto _ : st) {
          memory_report r = check_memory(s, model, o);
          benchmark::DoNotOptimize(r);
        }
      });
  return true;
}();

}  // namespace
