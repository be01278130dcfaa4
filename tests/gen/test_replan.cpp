#include <catch2/catch.hpp>

#include <pipesched/analysis/telemetry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/replan.hpp>

using namespace pipesched;

TEST_CASE("replan: measured costs fed to zb-auto and zb-v, with the predicted gain",
          "[telemetry]") {
  // The run: 1F1B, p = 4, m = 8, measured T_F = 1, B = 1, W = 1 and stage 1 at 1.2x.
  const schedule ran = generate(one_f_one_b{}, 4, 8);
  cost_model measured;
  measured.set_stage_costs({{1, 1, 1}, {1.2, 1.2, 1.2}, {1, 1, 1}, {1, 1, 1}});
  const replan_result r = replan(ran, measured);
  CHECK(r.current == simulate(ran, measured).makespan);
  REQUIRE(r.candidates.size() == 2);
  CHECK(r.candidates[0].gain >= r.candidates[1].gain);
  for (const replan_candidate& c : r.candidates) {
    CHECK(c.makespan == simulate(c.sched, measured).makespan);
    CHECK(c.gain == Approx(r.current - c.makespan));
    CHECK(c.gain > 0.0);  // the zero-bubble plans beat 1F1B at the same memory
  }
  replan_options bad;
  bad.generators = {"no-such"};
  CHECK_THROWS_WITH(replan(ran, measured, bad), Catch::Matchers::Contains("unknown schedule"));
}
