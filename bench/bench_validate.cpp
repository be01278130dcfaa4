// Validation speed of every registered schedule: validate() in full, and traverse() alone
// (the feasibility pass validate() and simulate() share).
#include <pipesched/analysis/validate.hpp>
#include <pipesched/ir/traversal.hpp>

#include "bench_common.hpp"

namespace {

using namespace pipesched;

const bool registered = [] {
  pipesched_bench::register_all(
      "validate", [](benchmark::State& st, const generator_entry&, const schedule& s) {
        for (auto _ : st) {
          validation_report r = validate(s);
          benchmark::DoNotOptimize(r);
          if (!r.ok()) {
            st.SkipWithError("schedule is invalid");
            break;
          }
        }
      });
  pipesched_bench::register_all(
      "traverse", [](benchmark::State& st, const generator_entry&, const schedule& s) {
        for (auto _ : st) {
          std::size_t visited = 0;
          traversal_result r = traverse(s, [&](stage_index, std::size_t, const op&) { ++visited; });
          benchmark::DoNotOptimize(visited);
          benchmark::DoNotOptimize(r);
        }
      });
  return true;
}();

}  // namespace
