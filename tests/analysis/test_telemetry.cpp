#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/analysis/telemetry.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "support/options.hpp"

using namespace pipesched;
using namespace test_options;

namespace {

// A measured run made of a (perturbed) simulation: what a trace of a real run holds.
measured_run as_measured(const schedule& s, const simulation_result& r) {
  measured_run run;
  run.name = s.name();
  run.layout = s.layout();
  run.microbatches = s.microbatches();
  for (const auto& stage : r.ops) {
    run.ops.insert(run.ops.end(), stage.begin(), stage.end());
  }
  return run;
}

}  // namespace

TEST_CASE("telemetry: median and MAD per stage and kind", "[telemetry]") {
  CHECK(median_of({3, 1, 2}) == 2);
  CHECK(median_of({4, 1, 3, 2}) == 2.5);
  CHECK(median_of({}) == 0);
  measured_run run;
  run.layout = placement::sequential(1);
  run.microbatches = 5;
  // F durations 1, 1, 2, 10 (an outlier), 1: median 1, MAD 0.
  const std::vector<double> d = {1, 1, 2, 10, 1};
  double t = 0;
  for (microbatch_index j = 0; j < 5; ++j) {
    run.ops.push_back(timed_op{0, 0, op{op_kind::forward, j}, t, t + d[j]});
    t += d[j];
  }
  const std::vector<stage_estimate> e = estimate_costs(run);
  REQUIRE(e[0].forward);
  CHECK(e[0].forward->count == 5);
  CHECK(e[0].forward->median == 1);
  CHECK(e[0].forward->mad == 0);
  CHECK_FALSE(e[0].backward_input);
  run.ops.push_back(timed_op{0, 0, op{op_kind::forward, 0}, 5, 4});
  CHECK_THROWS_WITH(estimate_costs(run),
                    Catch::Matchers::Contains("ends (4) before it starts (5)"));
}

TEST_CASE("telemetry: a straggler in a noisy run is found, and only it", "[telemetry]") {
  const schedule s = generate(zb_h1{}, 4, 16);
  perturbation n;
  n.set_cv(0.05).set_straggler(4, 2, 1.15).set_seed(4);
  const measured_run run =
      as_measured(s, simulate_perturbed(s, cost_model::uniform(1, 1, 1), perturbed(n, 0)));
  const std::vector<stage_estimate> e = estimate_costs(run);
  CHECK(e[2].per_microbatch == Approx(3.45).epsilon(0.05));
  const std::vector<straggler> found = find_stragglers(e, {0.1, 0.05});
  REQUIRE(found.size() == 1);
  CHECK(found[0].stage == 2);
  CHECK(found[0].relative == Approx(0.15).margin(0.05));
  // An absolute threshold above the excess (about 0.45 per micro-batch) hides it.
  CHECK(find_stragglers(e, {1.0, 0.05}).empty());
  CHECK_THROWS_WITH(
      find_stragglers(e, {-1.0, 0.05}),
      Catch::Matchers::Contains("absolute: threshold must be finite and >= 0, got -1"));
  // The order the stages ran is the schedule.
  const schedule ran = order_of(run);
  for (stage_index st = 0; st < 4; ++st) {
    CHECK(std::vector<op>(ran.ops(st).begin(), ran.ops(st).end()) ==
          std::vector<op>(s.ops(st).begin(), s.ops(st).end()));
  }
}

TEST_CASE("telemetry: measured costs as a cost model", "[telemetry]") {
  // Clean 1F1B at T_F = 2, BW = 3 + 1: fused backwards split half and half.
  const schedule s = generate(one_f_one_b{}, 3, 4);
  const measured_run run = as_measured(s, simulate(s, cost_model::uniform(2, 3, 1)));
  const cost_model c = measured_cost_model(estimate_costs(run), 1, 0.5);
  REQUIRE(c.stage_costs().size() == 3);
  CHECK(c.stage_costs()[1].forward == 2);
  CHECK(c.stage_costs()[1].backward_input == 2);
  CHECK(c.stage_costs()[1].backward_weight == 2);
  CHECK(c.comm(0, 1) == 0.5);
  // Split backwards are kept as measured; per-chunk medians scale to per-stage costs.
  const schedule z = generate(zb_h1{}, 3, 4);
  const measured_run zr = as_measured(z, simulate(z, cost_model::uniform(2, 3, 1)));
  const cost_model zc = measured_cost_model(estimate_costs(zr), 2);
  CHECK(zc.stage_costs()[0].backward_input == 6);
  CHECK(zc.stage_costs()[0].backward_weight == 2);
}

TEST_CASE("telemetry: per_microbatch is the stage's whole time at any v (issue 30)",
          "[telemetry]") {
  // Interleaved 1F1B, v = 2: each chunk's F + B + W is 3 units; the stage's time per
  // micro-batch is both chunks', 6. Stage 1 runs 1.5 times slower: 9, an excess of 3 (was
  // reported as one chunk's 1.5).
  generator_params gp;
  gp.stages = 2;
  gp.microbatches = 4;
  gp.chunks = 2;
  const schedule s = default_registry().generate("interleaved-1f1b", gp);
  cost_model costs;
  costs.set_stage_costs({op_costs{2, 2, 2, std::nullopt}, op_costs{3, 3, 3, std::nullopt}});
  const std::vector<stage_estimate> est = estimate_costs(as_measured(s, simulate(s, costs)));
  CHECK(est[0].per_microbatch == 6.0);
  CHECK(est[1].per_microbatch == 9.0);
  const std::vector<straggler> slow = find_stragglers(est, {2.5, 0.03});
  REQUIRE(slow.size() == 1u);
  CHECK(slow[0].excess == 3.0);
}

TEST_CASE("telemetry: an op measured twice is refused, overlaps are found (issue 30)",
          "[telemetry]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  measured_run run = as_measured(s, simulate(s, cost_model{}));
  CHECK(check_measured_ops(run, "analyze").empty());
  measured_run twice = run;
  twice.ops.push_back(run.ops[1]);
  twice.ops.back().start += 100;
  CHECK_THROWS_WITH(check_measured_ops(twice, "analyze"),
                    "analyze: stage 0 ran F1 twice (at 1 and at 101): a trace has each op once");
  measured_run overlapping = run;
  overlapping.ops[1].start = 0.5;  // F1 starts while F0 (0 .. 1) runs
  const std::vector<measured_overlap> o = check_measured_ops(overlapping, "analyze");
  REQUIRE(o.size() == 1u);
  CHECK(o[0].describe(false) == "stage 0: F0 (0 .. 1) overlaps F1 (0.5 .. 2)");
}

TEST_CASE("telemetry: an end read back past the next start by rounding is not an overlap",
          "[telemetry]") {
  // A Chrome trace stores start and duration: F0's end is ts + dur, which can exceed F1's
  // start in the last bits (seen on a plan's trace in seconds x 1000).
  const schedule s = generate(one_f_one_b{}, 2, 2);
  measured_run run = as_measured(s, simulate(s, cost_model::uniform(0.0173, 0.019, 0.0144)));
  REQUIRE(run.ops[0].o.kind == op_kind::forward);
  REQUIRE(run.ops[1].o.kind == op_kind::forward);
  run.ops[0].end = std::nextafter(std::nextafter(run.ops[1].start, 1.0), 1.0);
  CHECK(run.ops[0].end > run.ops[1].start);
  CHECK(check_measured_ops(run, "analyze").empty());
  run.ops[0].end = run.ops[1].start * (1 + 1e-6);  // a real overlap, however short
  CHECK(check_measured_ops(run, "analyze").size() == 1u);
}
