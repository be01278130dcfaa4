// How schedules degrade on a noisy cluster (docs/robustness.md): for each schedule, the
// iteration time (makespan) over N sampled iterations at per-op noise cv 0, 2 %, 5 % and 10 %,
// all with one stage 5 % slow, and each stage's sensitivity (iteration-time increase per 1 %
// slowdown of that stage, without noise).
//
//   robustness [--stages P] [--microbatches M] [--samples N] [--straggler K] [--seed S]
//
// Costs T_F = T_B = T_W = 1 per stage, T_comm = 0.05; memory M_B = 1, M_W = 0.5; zb-auto runs
// with its default limit p·M_B. Defaults: p = 8, m = 32, N = 200, straggler stage p/2, seed 1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <pipesched/analysis/data_parallel_timing.hpp>
#include <pipesched/analysis/dynamic_policy.hpp>
#include <pipesched/analysis/robustness.hpp>
#include <pipesched/gen/builtin_registry.hpp>

#include "program_support.hpp"

using namespace pipesched;

int main(int argc, char** argv) try {
  std::uint32_t p = 8;
  std::uint32_t m = 32;
  std::uint32_t samples = 200;
  std::uint32_t seed = 1;
  std::uint32_t straggler = 0;
  bool straggler_given = false;
  program_support::parse_args(
      "robustness", argc, argv,
      {{"--stages", "-p", &p, 0, 1000000},
       {"--microbatches", "-m", &m, 0, 1000000},
       {"--samples", nullptr, &samples, 0, 1000000},
       {"--straggler", nullptr, &straggler, 0, 1000000, &straggler_given},
       {"--seed", nullptr, &seed, 0, 1000000}},
      "robustness [--stages P] [--microbatches M] [--samples N] [--straggler K] [--seed S]");
  const stage_index slow = straggler_given ? stage_index{straggler} : stage_index{p / 2};
  const cost_model costs = cost_model::uniform(1, 1, 1, 0.05);
  generator_params gp;
  gp.stages = p;
  gp.microbatches = m;
  gp.costs = costs;

  // The static orders, then the dynamic policy at 1F1B's memory (p·M_B) on the sequential
  // and the V placement: it re-decides its order in each sample.
  const std::vector<const char*> names = {"1f1b",   "zb-h1", "zb-h2",   "zb-auto",  "zb-v",
                                          "v-half", "v-min", "dynamic", "dynamic-v"};
  const std::vector<double> cvs = {0.0, 0.02, 0.05, 0.10};
  std::printf("### p=%u, m=%u, T_F=T_B=T_W=1, T_comm=0.05, stage %u at 1.05x, %u samples\n\n", p, m,
              slow.value, samples);
  std::printf("| schedule | clean |");
  for (double cv : cvs) {
    std::printf(" cv %g%%: mean | p99 |", cv * 100);
  }
  std::printf(" max |\n|---|---|");
  for (std::size_t i = 0; i < cvs.size(); ++i) {
    std::printf("---|---|");
  }
  std::printf("---|\n");
  std::vector<std::vector<double>> sens;
  for (const char* name : names) {
    const std::string_view nm = name;
    const bool dynamic = nm.starts_with("dynamic");
    const placement pl = nm == "dynamic-v" ? placement::v_shape(p) : placement::sequential(p);
    auto measure = [&](const perturbation& n, dynamic_monte_carlo_options ro) {
      ro.noise = n;
      ro.memory_limit = p * 1.0;  // the dynamic policy's; the static orders ignore it
      return dynamic ? monte_carlo_dynamic(schedule::on("dynamic", pl, m), costs, ro)
                     : monte_carlo(default_registry().generate(name, gp), costs, ro);
    };
    dynamic_monte_carlo_options o;
    o.samples = samples;
    double worst = 0.0;
    std::printf("| %s |", name);
    for (double cv : cvs) {
      perturbation n;
      n.set_cv(cv).set_straggler(p, slow, 1.05).set_seed(seed);
      const robustness_result r = measure(n, o);
      if (cv == cvs.front()) {
        std::printf(" %.2f |", r.clean);
      }
      std::printf(" %.2f | %.2f |", r.iteration.mean, r.iteration.p99);
      worst = std::max(worst, r.iteration.max);
    }
    std::printf(" %.2f |\n", worst);
    dynamic_monte_carlo_options so;
    so.samples = 1;
    so.sensitivity = true;
    sens.push_back(measure(perturbation{}, so).sensitivity);
  }
  std::printf("\nSensitivity: iteration-time increase per 1%% slowdown of stage k (no noise)\n\n");
  std::printf("| schedule |");
  for (stage_index k = 0; k < p; ++k) {
    std::printf(" %u |", k.value);
  }
  std::printf("\n|---|");
  for (stage_index k = 0; k < p; ++k) {
    std::printf("---|");
  }
  std::printf("\n");
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::printf("| %s |", names[i]);
    for (double x : sens[i]) {
      std::printf(" %.3f |", x);
    }
    std::printf("\n");
  }

  // Data parallelism: D replicas, each its own sample at cv 5 % (with the straggler), then per
  // stage a ring all-reduce (bytes / bandwidth = 1 unit, 0.001 per ring step).
  std::printf(
      "\nData-parallel: D replicas at cv 5%% (stage %u at 1.05x), ring all-reduce per "
      "stage (bytes/bandwidth 1, latency 0.001 per step); mean over %u iterations: "
      "iteration time / share lost to the slowest replica\n\n",
      slow.value, samples / 10 + 1);
  const std::vector<std::uint32_t> ds = {1, 8, 64};
  std::printf("| schedule |");
  for (std::uint32_t d : ds) {
    std::printf(" D=%u | lost |", d);
  }
  std::printf("\n|---|");
  for (std::size_t i = 0; i < ds.size(); ++i) {
    std::printf("---|---|");
  }
  std::printf("\n");
  for (const char* name : {"1f1b", "zb-h1", "zb-h2", "zb-v"}) {
    const schedule s = default_registry().generate(name, gp);
    perturbation n;
    n.set_cv(0.05).set_straggler(p, slow, 1.05).set_seed(seed);
    std::printf("| %s |", name);
    for (std::uint32_t d : ds) {
      data_parallel_options dp;
      dp.data_parallel.replicas = d;
      dp.data_parallel.gradient_bytes = {1.0};
      dp.data_parallel.latency = 0.001;
      dp.noise = n;
      double it = 0.0;
      double lost = 0.0;
      const std::uint32_t iterations = samples / 10 + 1;
      for (std::uint32_t k = 0; k < iterations; ++k) {
        dp.sample = k;
        const data_parallel_result r = simulate_data_parallel(s, costs, dp);
        it += r.iteration / iterations;
        lost += r.slowest_replica_share / iterations;
      }
      std::printf(" %.2f | %.1f%% |", it, 100 * lost);
    }
    std::printf("\n");
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "robustness: %s\n", e.what());
  return 1;
}
