// Simulation speed of every registered schedule: with the default options (every op's timing
// recorded, critical path) and with record_ops = false (statistics and critical path only,
// what the 50M-op scale run uses). Both time the engine alone (validate = false): simulate()'s
// default check is validate(), which bench_validate times.
#include <pipesched/analysis/simulate.hpp>

#include "bench_common.hpp"

namespace {

using namespace pipesched;

const cost_model costs = cost_model::uniform(1.0, 1.2, 0.8, 0.1);

const bool registered = [] {
  pipesched_bench::register_all(
      "simulate", [](benchmark::State& st, const generator_entry&, const schedule& s) {
        simulate_options o;
        o.validate = false;
        for (auto _ : st) {
          simulation_result r = simulate(s, costs, o);
          benchmark::DoNotOptimize(r);
        }
      });
  pipesched_bench::register_all(
      "simulate_stats", [](benchmark::State& st, const generator_entry&, const schedule& s) {
        simulate_options o;
        o.record_ops = false;
        o.validate = false;
        for (auto _ : st) {
          simulation_result r = simulate(s, costs, o);
          benchmark::DoNotOptimize(r);
        }
      });
  return true;
}();

}  // namespace
