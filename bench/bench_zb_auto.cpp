#include <cstdint>

#include <benchmark/benchmark.h>

#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/gen/zb_v.hpp>

using namespace pipesched;

namespace {

generator_params params(std::int64_t p, std::int64_t m, double limit_factor) {
  generator_params gp;
  gp.stages = static_cast<std::uint32_t>(p);
  gp.microbatches = static_cast<std::uint32_t>(m);
  gp.costs = cost_model::uniform(1.0, 1.2, 0.8, 0.1);
  gp.memory_limit = limit_factor * double(p);
  return gp;
}

// The full search (16 choices, pruning on, improvement pass) as zb-auto / zb-1p run it.
void bm_zb_auto_search(benchmark::State& st) {
  const auto gp = params(st.range(0), st.range(1), double(st.range(2)));
  zb_auto_result r;
  for (auto _ : st) {
    r = zb_auto_search(gp);
    benchmark::DoNotOptimize(r);
  }
  st.counters["span"] = r.span;
  st.counters["bound"] = r.lower_bound;
  st.counters["ideal"] = r.ideal;
}
BENCHMARK(bm_zb_auto_search)
    ->Args({8, 64, 1})
    ->Args({16, 128, 1})
    ->Args({32, 256, 1})
    ->Args({32, 256, 2})
    ->Unit(benchmark::kMillisecond);

// The same search with the greedy runs on two threads (zb_auto_options::threads = 2); the
// result is identical. Wall time ("Time") is what counts here; "CPU" is the main thread's.
void bm_zb_auto_search_2threads(benchmark::State& st) {
  const auto gp = params(st.range(0), st.range(1), double(st.range(2)));
  zb_auto_options o;
  o.threads = 2;
  for (auto _ : st) {
    benchmark::DoNotOptimize(zb_auto_search(gp, o).span);
  }
}
BENCHMARK(bm_zb_auto_search_2threads)
    ->UseRealTime()
    ->Args({32, 256, 1})
    ->Args({32, 256, 2})
    ->Unit(benchmark::kMillisecond);

// Every choice run to the end (what reporting each choice's span costs).
void bm_zb_auto_exhaustive(benchmark::State& st) {
  const auto gp = params(st.range(0), st.range(1), double(st.range(2)));
  zb_auto_options o;
  o.prune = false;
  for (auto _ : st) {
    benchmark::DoNotOptimize(zb_auto_search(gp, o).span);
  }
}
BENCHMARK(bm_zb_auto_exhaustive)->Args({32, 256, 1})->Unit(benchmark::kMillisecond);

// The paper's 8 choices only, no improvement pass.
void bm_zb_auto_paper(benchmark::State& st) {
  const auto gp = params(st.range(0), st.range(1), double(st.range(2)));
  zb_auto_options o;
  o.paper_choices_only = true;
  o.improve = false;
  for (auto _ : st) {
    benchmark::DoNotOptimize(zb_auto_search(gp, o).span);
  }
}
BENCHMARK(bm_zb_auto_paper)->Args({32, 256, 1})->Unit(benchmark::kMillisecond);

void bm_zb_v_search(benchmark::State& st) {
  auto gp = params(st.range(0), st.range(1), 2.0);
  for (auto _ : st) {
    benchmark::DoNotOptimize(zb_v_search(gp).span);
  }
}
BENCHMARK(bm_zb_v_search)->Args({32, 256})->Unit(benchmark::kMillisecond);

}  // namespace
