#include <string>

#include <catch2/catch.hpp>

#include <pipesched/analysis/timing_simulator.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/plan/analyze.hpp>

using namespace pipesched;

namespace {

/// A measured run of `name` (p = 4, m = 8) under unit costs with stage `slow` 1.5 times slower.
measured_run analyze_fixture(const std::string& name, stage_index slow) {
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  const schedule s = default_registry().generate(name, gp);
  std::vector<op_costs> per_stage(4, op_costs{});
  per_stage[slow] = op_costs{1.5, 1.5, 1.5, std::nullopt};
  cost_model costs;
  costs.set_stage_costs(per_stage);
  const simulation_result sim = simulate(s, costs);
  measured_run run;
  run.name = name;
  run.layout = s.layout();
  run.microbatches = 8;
  for (stage_index st = 0; st < 4; ++st) {
    for (const timed_op& t : sim.ops[st]) {
      run.ops.push_back(t);
    }
  }
  return run;
}

}  // namespace

TEST_CASE("analyze_run: the library's steps in one call, phases told", "[plan][analyze]") {
  const measured_run run = analyze_fixture("zb-h1", 2);
  std::vector<std::string> phases;
  analyze_options o;
  o.phase = [&](const std::string& p) { phases.push_back(p); };
  const analyze_result r = analyze_run(run, o);
  CHECK(r.name == "zb-h1");
  CHECK(r.ops == run.ops.size());
  REQUIRE(r.stragglers.size() == 1u);
  CHECK(r.stragglers[0].stage == 2u);
  CHECK(r.estimates.size() == 4u);
  CHECK(r.plan.candidates.size() == 2u);
  REQUIRE(phases.size() == 3u);
  CHECK(phases[0] == "checking the 96 ops measured");
  CHECK(phases[1] == "estimating the costs of 96 ops");
  CHECK(phases[2] == "re-planning with zb-auto, zb-v");
}

TEST_CASE("analyze_run: out-of-range options name the field", "[plan][analyze]") {
  const measured_run run = analyze_fixture("1f1b", 1);
  analyze_options o;
  o.thresholds.relative = -1;
  CHECK_THROWS_AS(analyze_run(run, o), field_error);
  CHECK_THROWS_WITH(analyze_run(run, o),
                    "find_stragglers: relative: threshold must be finite and >= 0, got -1");
  o.thresholds.relative = 0.03;
  o.comm = -2;
  CHECK_THROWS_WITH(analyze_run(run, o), "analyze: comm: must be finite and >= 0, got -2");
}

TEST_CASE("analyze_run: a trace that is not a whole run is refused, naming what (issue 30)",
          "[plan][analyze]") {
  const measured_run run = analyze_fixture("1f1b", 1);
  measured_run missing = run;
  missing.ops.erase(missing.ops.begin() + 7);  // stage 0's F5: its BW5 now has no F
  CHECK_THROWS_WITH(analyze_run(missing),
                    Catch::StartsWith("analyze: the order the trace ran: schedule \"1f1b\" is "
                                      "invalid: ") &&
                        Catch::Contains("F5 of chunk 0"));
  measured_run overlapping = run;
  overlapping.ops[1].start -= 0.5;
  CHECK_THROWS_WITH(analyze_run(overlapping),
                    Catch::StartsWith("analyze: stage 0: F0 (0 .. 1) overlaps F1 (0.5 .. 2): a "
                                      "stage runs one op at a time"));
  analyze_options o;
  o.allow_overlaps = true;
  const analyze_result r = analyze_run(overlapping, o);
  REQUIRE(r.warnings.size() == 1u);
  CHECK(r.warnings[0] == "stage 0: F0 (0 .. 1) overlaps F1 (0.5 .. 2)");
}

TEST_CASE("analyze_run: a re-plan that does not gain is not a suggestion", "[plan][analyze]") {
  // ZB-H1 under unit costs, no straggler: 1F1B cannot beat it.
  analyze_options o;
  o.replan.generators = {"1f1b"};
  const measured_run run = analyze_fixture("zb-h1", 0);
  const analyze_result r = analyze_run(run, o);
  REQUIRE(r.plan.candidates.size() == 1u);
  CHECK_FALSE(r.plan.candidates[0].improves());
  CHECK(r.plan.candidates[0].gain < 0.0);
}
