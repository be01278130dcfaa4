// Generation speed of every registered schedule (bench_common.hpp: sizes, registration).
#include <pipesched/gen/registry.hpp>

#include "bench_common.hpp"

namespace {

using namespace pipesched;

const bool registered = [] {
  pipesched_bench::register_all(
      "generate", [](benchmark::State& st, const generator_entry& e, const schedule&) {
        const generator_params gp = pipesched_bench::params(e, st.range(0), st.range(1));
        for (auto _ : st) {
          schedule s = e.generate(gp);
          benchmark::DoNotOptimize(s);
        }
      });
  return true;
}();

}  // namespace
