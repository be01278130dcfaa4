#include <cmath>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/analysis/telemetry.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/transform/recompute.hpp>

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

TEST_CASE("telemetry: per_microbatch is the stage's whole time at any v", "[telemetry]") {
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

TEST_CASE("telemetry: an op measured twice is refused, overlaps are found", "[telemetry]") {
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

TEST_CASE("telemetry: against a plan, each stage is compared with its own plan", "[telemetry]") {
  // Unequal stages (stage 3 1.4x: the head) and micro-batches of different lengths, run
  // exactly as planned: measured = planned per stage, no straggler; against its peers the
  // plan's heavy stage would be one.
  const schedule s = generate(zb_h1{}, 4, 8);
  cost_model plan;
  plan.set_stage_costs(
      {op_costs{1, 1, 1}, op_costs{1, 1, 1}, op_costs{1, 1, 1}, op_costs{1.4, 1.4, 1.4}});
  std::vector<cost_factors> f;
  for (microbatch_index j = 0; j < 8; ++j) {
    f.push_back(cost_factors::all(0.5 + 0.25 * j));
  }
  plan.set_microbatch_factors(f);
  const measured_run exact = as_measured(s, simulate(s, plan));
  const std::vector<stage_against_plan> cmp = compare_with_plan(exact, plan, "test");
  REQUIRE(cmp.size() == 4u);
  for (const stage_against_plan& c : cmp) {
    CHECK(c.measured == Approx(c.planned).epsilon(1e-12));
  }
  CHECK(cmp[3].planned == Approx(1.4 * cmp[0].planned).epsilon(1e-12));
  CHECK(find_stragglers(cmp, 8).empty());
  CHECK(find_stragglers(estimate_costs(exact)).size() == 1u);
  // The whole run 2x slower (a lower achieved fraction): still no straggler.
  cost_model slower = plan;
  slower.set_stage_costs(
      {op_costs{2, 2, 2}, op_costs{2, 2, 2}, op_costs{2, 2, 2}, op_costs{2.8, 2.8, 2.8}});
  CHECK(find_stragglers(compare_with_plan(as_measured(s, simulate(s, slower)), plan, "test"), 8)
            .empty());
  // Stage 1 20 % slower than its plan: found, and only it, its excess against its own plan.
  cost_model slow1 = plan;
  slow1.set_stage_costs(
      {op_costs{1, 1, 1}, op_costs{1.2, 1.2, 1.2}, op_costs{1, 1, 1}, op_costs{1.4, 1.4, 1.4}});
  const std::vector<straggler> found =
      find_stragglers(compare_with_plan(as_measured(s, simulate(s, slow1)), plan, "test"), 8);
  REQUIRE(found.size() == 1u);
  CHECK(found[0].stage == 1u);
  CHECK(found[0].against_plan);
  CHECK(found[0].relative == Approx(0.2).epsilon(1e-9));
  CHECK(found[0].peers == Approx(cmp[1].planned / 8).epsilon(1e-9));
  // A plan of another shape is refused, naming the caller.
  cost_model three;
  three.set_stage_costs(std::vector<op_costs>(3, op_costs{}));
  CHECK_THROWS_WITH(compare_with_plan(exact, three, "test"),
                    Catch::Matchers::StartsWith("test: ") &&
                        Catch::Matchers::Contains("one entry per stage (p=4)"));
}

TEST_CASE("telemetry: an overlapped pair counts its interval once against the plan",
          "[telemetry]") {
  const schedule s = default_registry().generate("dualpipev", [] {
    generator_params gp;
    gp.stages = 4;
    gp.microbatches = 8;
    gp.chunks = 2;
    return gp;
  }());
  cost_model plan = cost_model::uniform(1, 1, 1);
  plan.set_stage_costs(std::vector<op_costs>(4, op_costs{1, 1, 1, 1.5}));
  const measured_run run = as_measured(s, simulate(s, plan));
  for (const stage_against_plan& c : compare_with_plan(run, plan, "test")) {
    CHECK(c.measured == Approx(c.planned).epsilon(1e-12));
  }
}

TEST_CASE("telemetry: order_of marks an F recompute when the run has its R", "[telemetry]") {
  // A trace or a CSV does not carry the mark; without it the R reads as re-running an F that
  // keeps its activations (an invalid order).
  const schedule plain = generate(one_f_one_b{}, 3, 4);
  const schedule s = with_recompute(plain, {global_chunk{1}});
  measured_run run = as_measured(s, simulate(s, cost_model{}));
  for (timed_op& t : run.ops) {
    t.o.flags = 0;
  }
  const schedule ran = order_of(run);
  for (stage_index st = 0; st < 3; ++st) {
    CHECK(std::vector<op>(ran.ops(st).begin(), ran.ops(st).end()) ==
          std::vector<op>(s.ops(st).begin(), s.ops(st).end()));
  }
  CHECK(validate(ran).ok());
  // No R: no F marked.
  const schedule none = order_of(as_measured(plain, simulate(plain, cost_model{})));
  for (stage_index st = 0; st < 3; ++st) {
    for (const op& o : none.ops(st)) {
      CHECK_FALSE(is_recomputed(o));
    }
  }
}
