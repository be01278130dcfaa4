#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/data_parallel_timing.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>

using namespace pipesched;

TEST_CASE("simulate_data_parallel: one replica is the pipeline; no noise adds the ring",
          "[data_parallel]") {
  const schedule s = generate(one_f_one_b{}, 4, 8);
  data_parallel_model one;
  const data_parallel_result a = simulate_data_parallel(s, cost_model{}, perturbation{}, one);
  CHECK(a.iteration == 33.0);
  CHECK(a.slowest_replica_share == 0.0);
  // D = 4, ring 18 per stage: every stage's reduce starts at its last op (1F1B: stage 3 at 27,
  // stage 0 at 33, the drain of BW on the stages above it) and the last ends at 33 + 18.
  data_parallel_model dp;
  dp.replicas = 4;
  dp.gradient_bytes = {1e6};
  dp.bandwidth = 1e5;
  dp.latency = 0.5;
  const data_parallel_result b = simulate_data_parallel(s, cost_model{}, perturbation{}, dp);
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
  const data_parallel_result r = simulate_data_parallel(s, cost_model{}, n, dp, 2);
  REQUIRE(r.replica_alone.size() == 8);
  for (double t : r.replica_alone) {
    CHECK(t <= r.iteration);
  }
  CHECK(r.iteration == *std::max_element(r.reduce_end.begin(), r.reduce_end.end()));
  CHECK(r.slowest_replica_share > 0.0);
  CHECK(simulate_data_parallel(s, cost_model{}, n, dp, 2).iteration == r.iteration);
  CHECK(simulate_data_parallel(s, cost_model{}, n, dp, 3).iteration != r.iteration);
  dp.gradient_bytes = {1.0, 2.0};
  CHECK_THROWS_WITH(simulate_data_parallel(s, cost_model{}, n, dp),
                    Catch::Matchers::Contains("gradient_bytes (2 entries) must hold one value"));
  dp.gradient_bytes = {1.0};
  dp.replicas = 0;
  CHECK_THROWS_WITH(simulate_data_parallel(s, cost_model{}, n, dp),
                    Catch::Matchers::Contains("replicas (D=0) must be at least 1"));
}

TEST_CASE("monte_carlo_data_parallel: iterations of D replicas", "[data_parallel]") {
  const schedule s = generate(one_f_one_b{}, 4, 8);
  data_parallel_model dp;
  dp.replicas = 4;
  dp.gradient_bytes = {1e6};
  dp.bandwidth = 1e5;
  dp.latency = 0.5;
  const data_parallel_stats quiet =
      monte_carlo_data_parallel(s, cost_model{}, perturbation{}, dp, 3);
  CHECK(quiet.iteration.count == 3);
  CHECK(quiet.iteration.max == Approx(51.0));
  CHECK(quiet.slowest_replica_share == 0.0);
  perturbation n;
  n.set_cv(0.1).set_seed(1);
  const data_parallel_stats noisy = monte_carlo_data_parallel(s, cost_model{}, n, dp, 5);
  CHECK(noisy.iteration.mean > 51.0);
  CHECK(noisy.slowest_replica_share > 0.0);
  CHECK_THROWS_WITH(monte_carlo_data_parallel(s, cost_model{}, n, dp, 0),
                    Catch::Matchers::Contains("samples (0) must be at least 1"));
}
