// Speed of lower_communication: items are the ops of the lowered schedule (compute ops plus
// the inserted SEND/RECV), so items/s compares across shapes.
#include <cstdint>

#include <benchmark/benchmark.h>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/transform/comm_lowering.hpp>

namespace {

template <class Generator>
void lower(benchmark::State& state, Generator gen, pipesched::receive_placement where) {
  const auto p = static_cast<std::uint32_t>(state.range(0));
  const auto m = static_cast<std::uint32_t>(state.range(1));
  const pipesched::schedule in = pipesched::generate(gen, p, m);
  std::size_t ops = 0;
  for (auto _ : state) {
    const pipesched::schedule out =
        pipesched::lower_communication(in, pipesched::lowering_options{where});
    ops = out.size();
    benchmark::DoNotOptimize(ops);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(ops));
  state.counters["ops"] = static_cast<double>(ops);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t p : {4, 32, 256, 1024}) {
    for (std::int64_t m : {64, 1024}) {
      b->Args({p, m});
    }
  }
  b->Args({4, 16384});
  b->Args({64, 16384});
  b->Unit(benchmark::kMillisecond);
}

void one_f_one_b_eager(benchmark::State& s) {
  lower(s, pipesched::one_f_one_b{}, pipesched::receive_placement::eager);
}
void one_f_one_b_late(benchmark::State& s) {
  lower(s, pipesched::one_f_one_b{}, pipesched::receive_placement::late);
}
void zb_h1_eager(benchmark::State& s) {
  lower(s, pipesched::zb_h1{}, pipesched::receive_placement::eager);
}

}  // namespace

BENCHMARK(one_f_one_b_eager)->Apply(shapes);
BENCHMARK(one_f_one_b_late)->Apply(shapes);
BENCHMARK(zb_h1_eager)->Args({32, 1024})->Args({256, 1024})->Unit(benchmark::kMillisecond);
