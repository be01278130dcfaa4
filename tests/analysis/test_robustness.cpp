#include <cstdint>
#include <type_traits>

#include <catch2/catch.hpp>

#include <pipesched/analysis/robustness.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "support/options.hpp"

using namespace pipesched;
using namespace test_options;

// One options style: the noise inside the options; one result core.
template <class S>
concept old_monte_carlo_spelling = requires(const S& s) {
  monte_carlo(s, cost_model{}, perturbation{}, robustness_options{});
};
static_assert(!old_monte_carlo_spelling<schedule>, "monte_carlo(sched, costs, noise, options)");
static_assert(std::is_base_of_v<monte_carlo_stats, robustness_result>);

TEST_CASE("monte_carlo: no noise gives simulate's makespan in every sample", "[robustness]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  robustness_options o;
  o.samples = 5;
  o.keep_samples = true;
  const robustness_result r =
      monte_carlo(s, cost_model::uniform(1, 1, 1), with_noise(o, perturbation{}));
  CHECK(r.clean == 27.0);
  CHECK(r.iteration.mean == 27.0);
  CHECK(r.iteration.p99 == 27.0);
  CHECK(r.iteration.stddev == 0.0);
  REQUIRE(r.samples.size() == 5);
  CHECK(r.samples[4] == 27.0);
  CHECK(r.sensitivity.empty());
}

TEST_CASE("monte_carlo: sensitivity of 1F1B to its last stage, by hand", "[robustness]") {
  // Without noise, each 1 % of the last stage's 24 critical units (see test_perturbed_timing)
  // adds 0.24; stage 0's 8 F + 8 BW are not all critical, so it weighs less.
  robustness_options o;
  o.samples = 1;
  o.sensitivity = true;
  const robustness_result r = monte_carlo(
      generate(one_f_one_b{}, 4, 8), cost_model::uniform(1, 1, 1), with_noise(o, perturbation{}));
  REQUIRE(r.sensitivity.size() == 4);
  CHECK(r.sensitivity[3] == Approx(0.24));
  CHECK(r.sensitivity[0] < r.sensitivity[3]);
}

TEST_CASE("monte_carlo: deterministic, and noise only lengthens the mean of a tight order",
          "[robustness]") {
  const schedule s = generate(zb_h2{}, 4, 12);
  perturbation n;
  n.set_cv(0.1).set_seed(3);
  robustness_options o;
  o.samples = 50;
  const robustness_result a = monte_carlo(s, cost_model::uniform(1, 1, 1), with_noise(o, n));
  const robustness_result b = monte_carlo(s, cost_model::uniform(1, 1, 1), with_noise(o, n));
  CHECK(a.iteration.mean == b.iteration.mean);
  CHECK(a.iteration.max == b.iteration.max);
  // A synchronous pipeline waits for its slowest path: noise of mean 1 raises the mean span.
  CHECK(a.iteration.mean > a.clean);
  CHECK(a.iteration.min <= a.iteration.p50);
  CHECK(a.iteration.p50 <= a.iteration.p99);
  CHECK(a.iteration.p99 <= a.iteration.max);
  o.first_sample = 50;
  CHECK(monte_carlo(s, cost_model::uniform(1, 1, 1), with_noise(o, n)).iteration.mean !=
        a.iteration.mean);
}

TEST_CASE("monte_carlo: invalid options", "[robustness]") {
  using Catch::Matchers::Contains;
  const schedule s = generate(zb_h1{}, 2, 2);
  robustness_options o;
  o.samples = 0;
  CHECK_THROWS_WITH(monte_carlo(s, cost_model{}, with_noise(o, perturbation{})),
                    Contains("monte_carlo: samples (0) must be at least 1"));
  o.samples = 1;
  o.sensitivity_step = 0.0;
  CHECK_THROWS_WITH(monte_carlo(s, cost_model{}, with_noise(o, perturbation{})),
                    Contains("sensitivity_step (0) must be finite and > 0"));
}

TEST_CASE("monte_carlo: the progress observer counts every sample and changes nothing",
          "[robustness]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  perturbation n;
  n.set_cv(0.1).set_seed(5);
  robustness_options o;
  o.samples = 6;
  o.sensitivity = true;
  const robustness_result quiet = monte_carlo(s, cost_model{}, with_noise(o, n));
  std::vector<std::uint64_t> seen;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    CHECK(total == 6u * 5u);  // N, and N per stage for the sensitivity
    seen.push_back(done);
  };
  const robustness_result told = monte_carlo(s, cost_model{}, with_noise(o, n));
  REQUIRE(seen.size() == 30u);
  CHECK(seen.front() == 1u);
  CHECK(seen.back() == 30u);
  CHECK(told.iteration.mean == quiet.iteration.mean);
  CHECK(told.iteration.max == quiet.iteration.max);
  CHECK(told.sensitivity == quiet.sensitivity);
}
