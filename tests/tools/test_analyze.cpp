#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/tools/analyze.hpp>
#include <pipesched/transform/recompute.hpp>

using namespace pipesched;

TEST_CASE("analyze: the calibration's three inputs together or none", "[analyze][plan]") {
  CHECK_FALSE(calibration_inputs_given(false, false, false));
  CHECK(calibration_inputs_given(true, true, true));
  for (int given = 1; given < 7; ++given) {  // one or two of the three, every way
    try {
      (void)calibration_inputs_given((given & 1) != 0, (given & 2) != 0, (given & 4) != 0);
      FAIL("no error for " << given);
    } catch (const field_error& e) {
      CHECK(e.field() == "planned");
      CHECK(e.rule().rfind("only meaningful together", 0) == 0);
    }
  }
}

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

TEST_CASE("analyze_run: a trace that is not a whole run is refused, naming what",
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

TEST_CASE("calibrate_achieved_fraction: the fraction scales with planned / measured time",
          "[plan][analyze]") {
  // Per stage per micro-batch the fixture measures 3, 3, 4.5, 3 units (F + B + W, stage 2
  // 1.5x); in milliseconds that is 13.5 ms over the stages, against a plan of 3 ms per stage.
  planned_speed plan;
  plan.costs = cost_model::uniform(0.001, 0.001, 0.001);
  plan.achieved_fraction = 0.5;
  plan.seconds_per_unit = 1e-3;
  for (const char* name : {"1f1b", "zb-v"}) {  // v = 1 and v = 2: per-stage values split
    CAPTURE(name);
    analyze_options o;
    o.planned = plan;
    const analyze_result r = analyze_run(analyze_fixture(name, 2), o);
    REQUIRE(r.calibration.has_value());
    CHECK(r.calibration->measured_s == Approx(0.0135).epsilon(1e-12));
    CHECK(r.calibration->planned_s == Approx(0.012).epsilon(1e-12));
    CHECK(r.calibration->ratio == Approx(1.125).epsilon(1e-12));
    CHECK(r.calibration->achieved_fraction == Approx(0.5 / 1.125).epsilon(1e-12));
  }
  // Without a plan, no calibration.
  CHECK_FALSE(analyze_run(analyze_fixture("1f1b", 2)).calibration.has_value());
}

TEST_CASE("calibrate_achieved_fraction: bad inputs name the field or the cause",
          "[plan][analyze]") {
  const measured_run run = analyze_fixture("1f1b", 2);
  planned_speed plan;
  plan.costs = cost_model::uniform(0.001, 0.001, 0.001);
  plan.achieved_fraction = 0.5;
  plan.seconds_per_unit = 1e-3;
  auto field_of = [&](const planned_speed& p) {
    try {
      (void)calibrate_achieved_fraction(run, p);
    } catch (const field_error& e) {
      return e.field();
    }
    return std::string("(no field_error)");
  };
  planned_speed bad = plan;
  bad.achieved_fraction = 0.0;
  CHECK(field_of(bad) == "achieved_fraction");
  bad.achieved_fraction = 1.5;
  CHECK(field_of(bad) == "achieved_fraction");
  bad = plan;
  bad.seconds_per_unit = 0.0;
  CHECK(field_of(bad) == "seconds_per_unit");
  bad.seconds_per_unit = std::numeric_limits<double>::infinity();
  CHECK(field_of(bad) == "seconds_per_unit");
  // A unit 1000 times too small makes the run faster than the peak: refused, the unit named.
  bad = plan;
  bad.seconds_per_unit = 1e-6;
  CHECK_THROWS_WITH(calibrate_achieved_fraction(run, bad),
                    Catch::Contains("above 1") && Catch::Contains("seconds_per_unit"));
  // A plan of another shape.
  bad = plan;
  bad.costs.set_stage_costs(std::vector<op_costs>(3, op_costs{}));
  CHECK_THROWS_WITH(calibrate_achieved_fraction(run, bad),
                    Catch::Contains("one entry per stage (p=4)"));
}

namespace {

/// The measured run of `s` simulated under `costs` (every op of every stage).
measured_run run_of(const schedule& s, const cost_model& costs) {
  const simulation_result sim = simulate(s, costs);
  measured_run run;
  run.name = s.name();
  run.layout = s.layout();
  run.microbatches = s.microbatches();
  for (stage_index st = 0; st < s.stages(); ++st) {
    for (const timed_op& t : sim.ops[st]) {
      run.ops.push_back(t);
    }
  }
  return run;
}

}  // namespace

// A recomputing run: each R lasts what it measured (not T_F), so the run's own order predicts
// its makespan, and the re-plans recompute on the same stages (re-planning the run's own
// generator gains nothing).
TEST_CASE("analyze_run: R ops are timed as measured and the re-plans recompute too",
          "[plan][analyze]") {
  for (const double t_r : {0.0, 0.5, 1.0}) {
    INFO("T_R " << t_r);
    generator_params gp;
    gp.stages = 2;
    gp.microbatches = 4;
    const schedule plain = default_registry().generate("1f1b", gp);
    const schedule s = with_recompute(plain, all_chunks(plain));
    const cost_model costs = cost_model::uniform(1, 1, 1).set_recompute(t_r);
    const measured_run run = run_of(s, costs);
    const double ran = simulate(s, costs).makespan;
    analyze_options o;
    o.replan.generators = {"1f1b", "zb-v"};
    const analyze_result r = analyze_run(run, o);
    REQUIRE(r.estimates[0].recompute);
    CHECK(r.estimates[0].recompute->median == t_r);
    CHECK(r.plan.current == Approx(ran).epsilon(1e-12));
    REQUIRE(r.plan.candidates.size() == 2u);
    for (const replan_candidate& c : r.plan.candidates) {
      std::size_t forwards = 0;
      std::size_t recomputes = 0;
      for (stage_index st = 0; st < c.sched.stages(); ++st) {
        for (const op& x : c.sched.ops(st)) {
          forwards += x.kind == op_kind::forward ? 1 : 0;
          recomputes += x.kind == op_kind::recompute ? 1 : 0;
        }
      }
      CHECK(recomputes == forwards);
      if (c.generator == "1f1b") {
        CHECK(c.gain == Approx(0.0).margin(1e-9));
      }
    }
  }
}

// Chunks of one stage that cost differently (the embedding on one, the head on another): the
// run's order is timed with each chunk's own medians and predicts its own makespan.
TEST_CASE("analyze_run: a run with chunks of unequal cost predicts its own makespan",
          "[plan][analyze]") {
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  const schedule s = default_registry().generate("zb-v", gp);
  std::vector<op_costs> per_chunk;
  for (stage_index st = 0; st < 4; ++st) {
    for (chunk_index c = 0; c < 2; ++c) {
      // Stage 0 holds both ends of the V (chunks 0 and 7), stage 3 its turn.
      const double w = st == 0 ? (c == 0 ? 0.5 : 3.0) : st == 3 ? (c == 0 ? 2.0 : 1.0) : 1.0;
      per_chunk.push_back(op_costs{w, w, w, std::nullopt});
    }
  }
  cost_model costs;
  costs.set_chunk_costs(2, per_chunk);
  const measured_run run = run_of(s, costs);
  analyze_options o;
  o.replan.generators = {"zb-v"};
  const analyze_result r = analyze_run(run, o);
  CHECK(r.plan.current == Approx(simulate(s, costs).makespan).epsilon(1e-12));
}
