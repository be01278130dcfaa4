// Generation speed of every registered schedule (bench_common.hpp: sizes, registration), and
// of the schedules whose work once grew with p² at m = 1.
#include <cstdint>
#include <string>

#include <pipesched/gen/builtin_registry.hpp>

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

// m = 1, p up to 65536: linear in the op count (plus p·v) means a flat t_per_op column and an
// O(N) fit. Interleaved 1F1B pads m to a multiple of p (a p·v table per stage, p²·v in all,
// before the fix); ZB-V's hand-crafted trace looked at every stage in every step and the
// lower bound and the published greedy had O(p) loops per stage or per op.
void bm_generate_m1(benchmark::State& st, const std::string& name) {
  const generator_entry* e = default_registry().find(name);
  generator_params gp;
  gp.stages = static_cast<std::uint32_t>(st.range(0));
  gp.microbatches = 1;
  gp.chunks = static_cast<std::uint32_t>(st.range(1));
  std::size_t ops = 0;
  for (auto _ : st) {
    schedule s = e->generate(gp);
    ops = s.size();
    benchmark::DoNotOptimize(s);
  }
  const auto n = static_cast<std::int64_t>(ops);
  st.SetComplexityN(n);
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * n);
  st.counters["t_per_op"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(st.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(bm_generate_m1, interleaved_1f1b, std::string("interleaved-1f1b"))
    ->ArgNames({"p", "v"})
    ->Args({1024, 2})
    ->Args({4096, 2})
    ->Args({16384, 2})
    ->Args({65536, 2})
    ->Complexity(benchmark::oN)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_generate_m1, zb_v, std::string("zb-v"))
    ->ArgNames({"p", "v"})
    ->Args({1024, 2})
    ->Args({4096, 2})
    ->Args({16384, 2})
    ->Complexity(benchmark::oN)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
