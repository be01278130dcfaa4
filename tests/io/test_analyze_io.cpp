#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/io/analyze_io.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/schedule_export.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/io/timeline.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/transform/recompute.hpp>

using namespace pipesched;

TEST_CASE("analyze writers: estimates, stragglers and re-plans as JSON and text", "[io][analyze]") {
  analyze_result r;
  r.name = "zb-h1";
  r.stages = 2;
  r.microbatches = 4;
  r.ops = 24;
  stage_estimate e;
  e.forward = duration_estimate{4, 1.0, 0.0};
  e.backward_input = duration_estimate{4, 1.0, 0.0};
  e.backward_weight = duration_estimate{4, 1.0, 0.0};
  e.per_microbatch = 3.0;
  r.estimates = {e, e};
  r.estimates[1].forward = duration_estimate{4, 2.0, 0.5};
  r.estimates[1].per_microbatch = 4.0;
  r.stragglers = {straggler{1, 4.0, 3.0, 1.0, 1.0 / 3, false}};
  r.plan.current = 20.0;
  replan_candidate c;
  c.generator = "zb-auto";
  c.makespan = 18.0;
  c.gain = 2.0;
  c.relative_gain = 0.1;
  r.plan.candidates = {c};
  const nlohmann::json j = analyze_to_json(r);
  CHECK(j["schedule"] == "zb-h1");
  CHECK(j["stages"][1]["F"]["median"] == 2.0);
  CHECK(j["stages"][0]["per_microbatch"] == 3.0);
  CHECK(j["stragglers"][0]["stage"] == 1);
  CHECK(j["replans"][0]["gain"] == 2.0);
  CHECK(j["current"] == 20.0);
  CHECK(analyze_text(r) ==
        "zb-h1  p=2 m=4 v=1  24 ops measured\n"
        "stage  F median (MAD)  B median (MAD)  W median (MAD)  BW median (MAD)  per mb  (times "
        "in trace units)\n"
        "    0           1 (0)           1 (0)           1 (0)                -  3\n"
        "    1         2 (0.5)           1 (0)           1 (0)                -  4\n"
        "straggler: stage 1: 4 trace units per micro-batch, 1 trace units (33.3%) above its "
        "peers\n"
        "re-plan with the measured costs (the run's order predicts 20 trace units):\n"
        "  zb-auto    18 trace units  gain 2 trace units (10.0%)\n");
  // A plan predicted slower is reported as such, not suggested.
  r.plan.candidates[0].makespan = 22.0;
  r.plan.candidates[0].gain = -2.0;
  r.plan.candidates[0].relative_gain = -0.1;
  CHECK_THAT(
      analyze_text(r),
      Catch::EndsWith(
          "  zb-auto    22 trace units  no gain: 2 trace units (10.0%) slower than the run's "
          "order\n"));
  CHECK(analyze_to_json(r)["replans"][0]["improves"] == false);
}

TEST_CASE("analyze writers: the calibration against a plan, only when asked", "[io][analyze]") {
  analyze_result r;
  r.name = "1f1b";
  r.stages = 1;
  r.microbatches = 2;
  r.ops = 6;
  stage_estimate e;
  e.per_microbatch = 3.0;
  r.estimates = {e};
  CHECK_FALSE(analyze_to_json(r).contains("calibration"));
  CHECK_THAT(analyze_text(r), !Catch::Contains("achieved fraction"));
  r.calibration = achieved_fraction_calibration{0.0135, 0.012, 1.125, 0.4};
  const nlohmann::json j = analyze_to_json(r);
  CHECK(j["calibration"]["measured_s"] == 0.0135);
  CHECK(j["calibration"]["planned_s"] == 0.012);
  CHECK(j["calibration"]["ratio"] == 1.125);
  CHECK(j["calibration"]["achieved_fraction"] == 0.4);
  CHECK_THAT(analyze_text(r),
             Catch::Contains("speed against the plan: compute 0.0135 s per micro-batch over the "
                             "stages, planned 0.012 s (1.125x); achieved fraction of peak 0.400 "
                             "(plan with --achieved-fraction 0.400)\n"));
  // A small fraction keeps its digits: "0.000" is no fraction plan takes.
  r.calibration->achieved_fraction = 0.000123;
  CHECK_THAT(analyze_text(r), Catch::Contains("achieved fraction of peak 0.000123 (plan with "
                                              "--achieved-fraction 0.000123)"));
}

TEST_CASE("analyze writers: a straggler against its plan says so", "[io][analyze]") {
  analyze_result r;
  r.name = "1f1b";
  r.stages = 2;
  r.microbatches = 2;
  r.estimates = {stage_estimate{}, stage_estimate{}};
  straggler x{1, 6.0, 5.0, 1.0, 0.2, true};
  r.stragglers = {x};
  CHECK_THAT(analyze_text(r),
             Catch::Contains("straggler: stage 1: 6 trace units per micro-batch, 1 trace units "
                             "(20.0%) above its plan at its peers' speed\n"));
  CHECK(analyze_to_json(r)["stragglers"][0]["against"] == "plan");
  r.stragglers[0].against_plan = false;
  CHECK(analyze_to_json(r)["stragglers"][0]["against"] == "peers");
}

namespace {

/// An export's schedule as a framework would run it exactly as planned: `sched` timed by
/// `costs` (in seconds), written as simulate -f chrome writes it (1 ms per second of plan, so
/// the trace's microsecond is 1e-3 s) and read back.
measured_run traced(const schedule& sched, const cost_model& costs) {
  const simulation_result sim = simulate(sched, costs);
  REQUIRE(sim.completed());
  return read_measured_run(to_chrome_trace(sched, to_timeline(sched, sim)));
}

}  // namespace

TEST_CASE("analyze: an export read back and run exactly as planned calibrates to the plan",
          "[io][analyze]") {
  // Stages the plan makes unequal (the last one holds the head) and micro-batches of
  // different lengths (pack's per-micro-batch factors): neither is a straggler nor a change
  // of speed. Through the export's files: the pipesched JSON (R ops included) and the
  // compute-only CSV, each with the exported costs.
  const std::uint32_t p = 4, m = 8;
  struct shape {
    const char* name;
    std::uint32_t v;
  };
  for (const shape& sh :
       {shape{"1f1b", 1}, shape{"zb-h1", 1}, shape{"interleaved-1f1b", 2}, shape{"zb-v", 2}}) {
    for (const bool recompute : {false, true}) {
      for (const bool varied : {false, true}) {
        CAPTURE(sh.name, recompute, varied);
        generator_params gp;
        gp.stages = p;
        gp.microbatches = m;
        gp.chunks = sh.v;
        schedule sched = default_registry().generate(sh.name, gp);
        if (recompute) {
          sched = with_recompute(sched, all_chunks(sched));
        }
        cost_model costs;
        std::vector<op_costs> per_stage;
        for (stage_index s = 0; s < p; ++s) {
          const double k = s + 1 == p ? 1.37 : 1.0 + 0.05 * s;
          per_stage.push_back(
              op_costs{0.0466 * k, 0.0566 * k, 0.0416 * k, std::nullopt,
                       recompute ? std::optional<double>(0.031 * k) : std::nullopt});
        }
        costs.set_stage_costs(per_stage).set_comm(1.1e-4);
        if (varied) {
          std::vector<cost_factors> f;
          for (microbatch_index j = 0; j < m; ++j) {
            const double x = 0.3 + 0.17 * ((j * 5) % m);
            f.push_back(cost_factors{x, 0.9 * x, 1.1 * x, std::nullopt});
          }
          costs.set_microbatch_factors(std::move(f));
        }
        const std::vector<export_file> files = schedule_export("x", sched, costs, memory_model{});
        const cost_model read_costs = read_cost_model(files[3].text);
        for (const schedule& back :
             {read_schedule_json(files[2].text), from_torch_csv(files[1].text)}) {
          const measured_run run = traced(back, read_costs);
          analyze_options o;
          o.replan.generators = {"1f1b"};
          o.planned = planned_speed{read_costs, 0.5, 1e-3};
          const analyze_result r = analyze_run(run, o);
          REQUIRE(r.calibration.has_value());
          CHECK(r.calibration->ratio == Approx(1.0).epsilon(1e-12));
          CHECK(r.calibration->achieved_fraction == Approx(0.5).epsilon(1e-12));
          CHECK_THAT(analyze_text(r), Catch::Contains("(1.000x); achieved fraction of peak 0.500 "
                                                      "(plan with --achieved-fraction 0.500)"));
          CHECK(r.stragglers.empty());
          // The same makespan as the plan (the export's order and costs).
          CHECK(simulate(order_of(run), read_costs).makespan ==
                Approx(simulate(back, costs).makespan).epsilon(1e-12));
        }
      }
    }
  }
}
