#include <catch2/catch.hpp>

#include <pipesched/plan/plan_ranking.hpp>

using namespace pipesched;

TEST_CASE("plan ranking: one order for plans and packings", "[plan][ranking]") {
  using detail::outcome_order;
  using detail::plan_outcome;
  const plan_outcome fast_big{true, 1.0, 8.0};
  const plan_outcome slow_small{true, 2.0, 4.0};
  const plan_outcome misfit_small{false, 0.5, 9.0};
  const plan_outcome misfit_big{false, 0.1, 10.0};
  // Fitting first; among fitting, the step; among misfits, the memory (nearer to fitting).
  CHECK(outcome_order(slow_small, misfit_small, 0.0) == -1);
  CHECK(outcome_order(fast_big, slow_small, 0.0) == -1);
  CHECK(outcome_order(slow_small, fast_big, 0.0) == 1);
  CHECK(outcome_order(misfit_small, misfit_big, 0.0) == -1);
  // Equal steps: the memory; equal memory among misfits: the step.
  CHECK(outcome_order({true, 1.0, 4.0}, {true, 1.0, 8.0}, 0.0) == -1);
  CHECK(outcome_order({false, 2.0, 9.0}, {false, 1.0, 9.0}, 0.0) == 1);
  CHECK(outcome_order(fast_big, fast_big, 0.0) == 0);
  // Within the tolerance (pack's 1e-12) a step is no gain: the memory decides.
  const plan_outcome a{true, 1.0, 8.0};
  const plan_outcome b{true, 1.0 + 1e-13, 4.0};
  CHECK(outcome_order(a, b, 1e-12) == 1);
  CHECK(outcome_order(a, b, 0.0) == -1);
  CHECK(outcome_order({true, 1.0, 4.0}, {true, 1.0 + 1e-13, 4.0}, 1e-12) == 0);
}

TEST_CASE("plan ranking: the frontier keeps the plans no faster one beats in memory",
          "[plan][ranking]") {
  std::vector<plan_entry> ranked(3);
  ranked[0].step_time_s = 1.0;
  ranked[0].peak_memory_bytes = 8.0;
  ranked[1].step_time_s = 2.0;
  ranked[1].peak_memory_bytes = 9.0;  // slower and bigger: not on the frontier
  ranked[2].step_time_s = 3.0;
  ranked[2].peak_memory_bytes = 4.0;
  const auto f = detail::plan_frontier(ranked);
  REQUIRE(f.size() == 2);
  CHECK(f[0].step_time_s == 1.0);
  CHECK(f[1].peak_memory_bytes == 4.0);
}
