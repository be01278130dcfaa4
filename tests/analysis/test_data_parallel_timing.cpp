#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/data_parallel_timing.hpp>
#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "support/options.hpp"

using namespace pipesched;
using namespace test_options;

// One options style: the replicas, noise and sample inside the options; one
// common core of the Monte-Carlo options and results.
template <class S>
concept old_data_parallel_spelling = requires(const S& s,
                                              const perturbation& n,
                                              const data_parallel_model& dp) {
  simulate_data_parallel(s, cost_model{}, n, dp, std::uint64_t{0});
};
static_assert(!old_data_parallel_spelling<schedule>);
template <class S>
concept old_monte_carlo_data_parallel_spelling = requires(const S& s,
                                                          const perturbation& n,
                                                          const data_parallel_model& dp) {
  monte_carlo_data_parallel(s, cost_model{}, n, dp, 10u);
};
static_assert(!old_monte_carlo_data_parallel_spelling<schedule>);
static_assert(std::is_base_of_v<monte_carlo_options, data_parallel_monte_carlo_options>);
static_assert(std::is_base_of_v<monte_carlo_stats, data_parallel_stats>);

TEST_CASE("simulate_data_parallel: one replica is the pipeline; no noise adds the ring",
          "[data_parallel]") {
  const schedule s = generate(one_f_one_b{}, 4, 8);
  data_parallel_model one;
  const data_parallel_result a =
      simulate_data_parallel(s, cost_model{}, {.data_parallel = one, .noise = perturbation{}});
  CHECK(a.iteration == 33.0);
  CHECK(a.slowest_replica_share == 0.0);
  // D = 4, ring 18 per stage: every stage's reduce starts at its last op (1F1B: stage 3 at 27,
  // stage 0 at 33, the drain of BW on the stages above it) and the last ends at 33 + 18.
  data_parallel_model dp;
  dp.replicas = 4;
  dp.gradient_bytes = {1e6};
  dp.bandwidth = 1e5;
  dp.latency = 0.5;
  const data_parallel_result b =
      simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = perturbation{}});
  CHECK(b.reduce_start == std::vector<double>{33, 31, 29, 27});
  CHECK(b.iteration == Approx(51.0));
  CHECK(b.slowest_replica_share == 0.0);
  CHECK(b.replica_makespan == std::vector<double>(4, 33.0));
}

TEST_CASE("simulate_data_parallel: noisy replicas wait for the slowest", "[data_parallel]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  perturbation n;
  n.set_cv(0.1).set_seed(3);
  data_parallel_model dp;
  dp.replicas = 8;
  dp.gradient_bytes = {10.0};
  const data_parallel_result r =
      simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = n, .sample = 2});
  REQUIRE(r.replica_alone.size() == 8);
  for (double t : r.replica_alone) {
    CHECK(t <= r.iteration);
  }
  CHECK(r.iteration == *std::max_element(r.reduce_end.begin(), r.reduce_end.end()));
  CHECK(r.slowest_replica_share > 0.0);
  CHECK(simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = n, .sample = 2})
            .iteration == r.iteration);
  CHECK(simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = n, .sample = 3})
            .iteration != r.iteration);
  dp.gradient_bytes = {1.0, 2.0};
  CHECK_THROWS_WITH(
      simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = n}),
      Catch::Matchers::Contains("gradient_bytes: must hold one value or one per stage (p=4), got 2 "
                                "entries"));
  dp.gradient_bytes = {1.0};
  dp.replicas = 0;
  CHECK_THROWS_WITH(simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = n}),
                    Catch::Matchers::Contains("replicas: must be at least 1, got 0"));
  // An all-reduce longer than a double can add up is refused, never inf.
  dp.replicas = 2;
  dp.gradient_bytes = {1e308};
  dp.bandwidth = 1e-10;
  CHECK_THROWS_WITH(simulate_data_parallel(s, cost_model{}, {.data_parallel = dp, .noise = n}),
                    Catch::Matchers::Contains("gradient_bytes: stage 0's all-reduce (1e+308 bytes "
                                              "at bandwidth 1e-10) takes longer than a double"));
}

TEST_CASE("monte_carlo_data_parallel: iterations of D replicas", "[data_parallel]") {
  const schedule s = generate(one_f_one_b{}, 4, 8);
  data_parallel_model dp;
  dp.replicas = 4;
  dp.gradient_bytes = {1e6};
  dp.bandwidth = 1e5;
  dp.latency = 0.5;
  const data_parallel_stats quiet =
      monte_carlo_data_parallel(s, cost_model{}, dp_options(perturbation{}, dp, 3));
  CHECK(quiet.iteration.count == 3);
  CHECK(quiet.iteration.max == Approx(51.0));
  CHECK(quiet.slowest_replica_share == 0.0);
  perturbation n;
  n.set_cv(0.1).set_seed(1);
  const data_parallel_stats noisy =
      monte_carlo_data_parallel(s, cost_model{}, dp_options(n, dp, 5));
  CHECK(noisy.iteration.mean > 51.0);
  CHECK(noisy.slowest_replica_share > 0.0);
  CHECK_THROWS_WITH(monte_carlo_data_parallel(s, cost_model{}, dp_options(n, dp, 0)),
                    Catch::Matchers::Contains("samples (0) must be at least 1"));
}

TEST_CASE("simulate_data_parallel: each replica is simulate_perturbed of its own sample",
          "[data_parallel]") {
  // The data-parallel path samples only the plan entries the schedule uses and reuses its
  // buffers; the numbers must be those of the full sample.
  const cost_model costs = cost_model::uniform(1.0, 1.2, 0.8, 0.1);
  perturbation n;
  n.set_cv(0.05).set_straggler(4, 2, 1.05).set_stalls({0.01, 3.0}).set_link_cv(0.1).set_seed(7);
  data_parallel_model dp;
  dp.replicas = 5;
  for (const schedule& s : {generate(zb_h1{}, 4, 8), generate(one_f_one_b{}, 4, 8)}) {
    const data_parallel_result r =
        simulate_data_parallel(s, costs, {.data_parallel = dp, .noise = n, .sample = 3});
    for (std::uint32_t k = 0; k < dp.replicas; ++k) {
      simulate_options so;
      so.record_ops = false;
      const simulation_result one =
          simulate_perturbed(s, costs, perturbed(n, 3 * dp.replicas + k, so));
      CHECK(r.replica_makespan[k] == one.makespan);
    }
  }
}

TEST_CASE("monte_carlo_data_parallel: a fixed seed gives fixed numbers on any thread count",
          "[data_parallel]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  const cost_model costs = cost_model::uniform(1.0, 1.2, 0.8, 0.1);
  perturbation n;
  n.set_cv(0.05).set_straggler(4, 2, 1.05).set_stalls({0.01, 3.0}).set_link_cv(0.1).set_seed(7);
  data_parallel_model dp;
  dp.replicas = 5;
  dp.gradient_bytes = {100.0};
  dp.bandwidth = 50;
  dp.latency = 0.01;
  const data_parallel_stats one = monte_carlo_data_parallel(s, costs, dp_options(n, dp, 7, 3, 1));
  // Measured with the first implementation (one thread, every plan entry sampled).
  CHECK(one.iteration.mean == Approx(38.828373849919977).epsilon(1e-12));
  CHECK(one.iteration.p50 == Approx(38.663388952271937).epsilon(1e-12));
  CHECK(one.iteration.max == Approx(41.781467409273738).epsilon(1e-12));
  CHECK(one.slowest_replica_share == Approx(0.073183370843057219).epsilon(1e-12));
  for (unsigned threads : {0u, 2u, 3u, 7u, 16u}) {
    const data_parallel_stats t =
        monte_carlo_data_parallel(s, costs, dp_options(n, dp, 7, 3, threads));
    CHECK(t.iteration.mean == one.iteration.mean);
    CHECK(t.iteration.stddev == one.iteration.stddev);
    CHECK(t.iteration.min == one.iteration.min);
    CHECK(t.iteration.p50 == one.iteration.p50);
    CHECK(t.iteration.p99 == one.iteration.p99);
    CHECK(t.iteration.max == one.iteration.max);
    CHECK(t.slowest_replica_share == one.slowest_replica_share);
  }
  // An invalid model is refused before any thread starts.
  const schedule bad = generate(zb_h1{}, 3, 8);
  CHECK_THROWS_WITH(monte_carlo_data_parallel(bad, costs, dp_options(n, dp, 4, 0, 2)),
                    Catch::Matchers::Contains("stage_slowdown (4 entries)"));
}

TEST_CASE("monte_carlo_data_parallel: kept samples and progress; the serial loop's numbers",
          "[data_parallel]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  const cost_model costs = cost_model::uniform(1.0, 1.2, 0.8, 0.1);
  perturbation n;
  n.set_cv(0.05).set_seed(11);
  data_parallel_model dp;
  dp.replicas = 3;
  dp.gradient_bytes = {10.0};
  // What the CLI computed with its own loop before the library kept samples: one
  // simulate_data_parallel per iteration in order, stats_of over them, the mean share.
  std::vector<double> t;
  double share = 0.0;
  for (std::uint32_t i = 0; i < 9; ++i) {
    const data_parallel_result r =
        simulate_data_parallel(s, costs, {.data_parallel = dp, .noise = n, .sample = i});
    t.push_back(r.iteration);
    share += r.slowest_replica_share;
  }
  const sample_stats serial = stats_of(t);
  for (unsigned threads : {1u, 2u}) {
    data_parallel_monte_carlo_options o;
    o.samples = 9;
    o.threads = threads;
    o.keep_samples = true;
    std::vector<std::uint64_t> seen;
    o.progress = [&](std::uint64_t done, std::uint64_t total) {
      CHECK(total == 9u);
      seen.push_back(done);
    };
    const data_parallel_stats d = monte_carlo_data_parallel(s, costs, dp_options(n, dp, o));
    CHECK(d.samples == t);
    CHECK(d.iteration.mean == serial.mean);
    CHECK(d.iteration.stddev == serial.stddev);
    CHECK(d.iteration.p99 == serial.p99);
    CHECK(d.slowest_replica_share == share / 9);
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.back() == 9u);
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    if (threads == 1) {
      CHECK(seen.size() == 9u);
    }
  }
  CHECK(monte_carlo_data_parallel(s, costs, dp_options(n, dp, 9)).samples.empty());
}
