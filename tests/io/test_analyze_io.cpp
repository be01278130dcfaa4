#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/analyze_io.hpp>

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
  r.stragglers = {straggler{1, 4.0, 3.0, 1.0, 1.0 / 3}};
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
        "stage  F median (MAD)  B median (MAD)  W median (MAD)  BW median (MAD)  per mb\n"
        "    0           1 (0)           1 (0)           1 (0)                -  3\n"
        "    1         2 (0.5)           1 (0)           1 (0)                -  4\n"
        "straggler: stage 1: 4 per micro-batch, 1 (33.3%) above its peers\n"
        "re-plan with the measured costs (the run's order predicts 20 trace units):\n"
        "  zb-auto    18 trace units  gain 2 (10.0%)\n");
  // A plan predicted slower is reported as such, not suggested.
  r.plan.candidates[0].makespan = 22.0;
  r.plan.candidates[0].gain = -2.0;
  r.plan.candidates[0].relative_gain = -0.1;
  CHECK_THAT(analyze_text(r),
             Catch::EndsWith(
                 "  zb-auto    22 trace units  no gain: 2 (10.0%) slower than the run's order\n"));
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
             Catch::Contains("speed against the plan: F + B + W 0.0135 s per micro-batch over the "
                             "stages, planned 0.012 s (1.125x); achieved fraction of peak 0.400 "
                             "(plan with --achieved-fraction 0.400)\n"));
  // A small fraction keeps its digits: "0.000" is no fraction plan takes.
  r.calibration->achieved_fraction = 0.000123;
  CHECK_THAT(analyze_text(r), Catch::Contains("achieved fraction of peak 0.000123 (plan with "
                                              "--achieved-fraction 0.000123)"));
}
