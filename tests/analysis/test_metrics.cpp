#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include <pipesched/analysis/metrics.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/io/timeline.hpp>

using namespace pipesched;

TEST_CASE("metrics: bubble rate and utilization, defined once", "[sim][metrics]") {
  CHECK(bubble_rate_of(0.0, 0.0) == 0.0);
  CHECK(bubble_rate_of(10.0, 8.0) == Approx(0.2));
  CHECK(bubble_rate_of(10.0, 10.0) == 0.0);
  // Summed op times can round past the span: never a negative bubble (printed "-0.0 %").
  CHECK(bubble_rate_of(1.0, 1.0 + 2.3e-16) == 0.0);
  CHECK_FALSE(std::signbit(bubble_rate_of(1.0, 1.0 + 2.3e-16)));
  CHECK(utilization_of(0.0, 4, 0.0) == 0.0);
  CHECK(utilization_of(30.0, 4, 10.0) == Approx(0.75));
  static_assert(bubble_rate_of(4.0, 3.0) == 0.25);
}

TEST_CASE("metrics: the simulator and the timeline give the same numbers", "[sim][metrics]") {
  // Unequal stages: 1F1B p=2 m=4, stage costs (1,1,1) and (3,3,3). The bubble rate is the
  // longest span against the busiest stage's 36, not the light stage's 12 (which gave 0.69).
  cost_model c;
  c.set_stage_costs({op_costs{1, 1, 1}, op_costs{3, 3, 3}});
  const schedule s = generate(one_f_one_b{}, 2, 4);
  const simulation_result r = simulate(s, c);
  const double longest = std::max(r.span(0), r.span(1));
  CHECK(r.bubble_rate == Approx(bubble_rate_of(longest, 36.0)));
  CHECK(r.bubble_rate < 0.1);
  CHECK(r.utilization == Approx(utilization_of(12.0 + 36.0, 2, r.makespan)));
  timeline tl = to_timeline(s, r);
  tl.reported_bubble_rate.reset();  // derive it from the intervals
  CHECK(tl.bubble_rate() == Approx(r.bubble_rate));
  CHECK(tl.utilization() == Approx(r.utilization));
}
