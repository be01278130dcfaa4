// The planner's whole search: `pipesched plan` for the README's job, Llama 3 405B on
// 16,384 H100s with 16M-token batches, gradients sharded and memory-efficient norms (each
// stage's input freed, as Meta ran it), the same at 128K-token sequences
// (context parallelism searched), and smaller jobs, at 1 thread and at the machine's. Wall time
// per search (docs/benchmarks.md §9).

#include <benchmark/benchmark.h>

#include <pipesched/plan/planner.hpp>

namespace {

using namespace pipesched;

training_job job(const char* model,
                 std::uint64_t gpus,
                 std::uint64_t tokens,
                 std::uint64_t sequence,
                 optimizer_sharding sharding,
                 bool memory_efficient_norm) {
  training_job j;
  j.model = model_preset(model);
  j.model.memory_efficient_norm = memory_efficient_norm;
  j.cluster = cluster_preset("h100-sxm-80gb");
  j.gpus = gpus;
  j.sequence = sequence;
  j.global_batch = tokens / sequence;
  j.sharding = sharding;
  return j;
}

void bm_plan(benchmark::State& state,
             const char* model,
             std::uint64_t gpus,
             std::uint64_t tokens,
             std::uint64_t sequence = 8192,
             optimizer_sharding sharding = optimizer_sharding::optimizer,
             bool memory_efficient_norm = false) {
  const training_job j = job(model, gpus, tokens, sequence, sharding, memory_efficient_norm);
  plan_options o;
  o.threads = static_cast<unsigned>(state.range(0));
  std::size_t evaluated = 0;
  for (auto _ : state) {
    const plan_result r = plan(j, o);
    evaluated = r.stats.evaluated;
    benchmark::DoNotOptimize(r.plans.data());
  }
  state.counters["evaluated"] = static_cast<double>(evaluated);
}

void bm_plan_405b(benchmark::State& state) {
  bm_plan(state, "llama3-405b", 16384, 16777216, 8192, optimizer_sharding::gradients, true);
}
void bm_plan_405b_128k(benchmark::State& state) {
  bm_plan(state, "llama3-405b", 16384, 16777216, 131072, optimizer_sharding::gradients);
}
void bm_plan_70b(benchmark::State& state) {
  bm_plan(state, "llama3-70b", 1024, 4194304);
}
void bm_plan_8b(benchmark::State& state) {
  bm_plan(state, "llama3-8b", 64, 524288);
}

// Arg: threads (0: the machine's hardware threads).
BENCHMARK(bm_plan_405b)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_plan_405b_128k)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_plan_70b)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_plan_8b)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
