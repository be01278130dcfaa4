#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/io/simulation_json.hpp>

#include "support/error_of.hpp"

using namespace pipesched;
using nlohmann::json;

namespace {
using test_support::error_of;
}  // namespace

TEST_CASE("simulation json: write, read back and errors", "[io][simulation_json][model_json]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  const timeline tl = cost_timeline(s);
  const auto mem = memory_curves(s, tl, memory_model::uniform(1, 0.5));
  const json j = simulation_to_json(s, tl, &mem);
  CHECK(j["makespan"] == 9.0);
  CHECK(j["bubble_rate"].get<double>() == Approx(1.0 / 3.0));
  CHECK(j["stages"][0]["span"] == 9.0);
  CHECK(j["stages"][0]["idle"] == 3.0);
  CHECK(j["stages"][0]["peak_memory"] == 2.0);  // 1F1B stage 0 of p=2: p*M_B
  CHECK(j["stages"][1]["peak_memory"] == 1.0);
  CHECK(j["stages"][1]["ops"][1] ==
        json::parse(R"({"kind":"BW","mb":0,"chunk":0,"start":2.0,"end":4.0})"));

  const simulation_record r = simulation_from_json(j);
  CHECK(r.name == "1f1b");
  CHECK(r.stages == 2);
  CHECK(r.makespan == 9.0);
  CHECK(r.peak_memory[0] == 2.0);
  REQUIRE(r.ops);
  CHECK(r.ops->stages == tl.stages);
  CHECK(simulation_to_json(s, *r.ops, &mem) == j);
  json other = j;
  other["bubble_rate"] = 0.25;  // the simulator's own number is kept, not re-derived
  CHECK(simulation_from_json(other).ops->bubble_rate() == 0.25);

  const json no_ops = simulation_to_json(s, tl, nullptr, false);
  CHECK(no_ops["stages"][0]["peak_memory"].is_null());
  const simulation_record r2 = read_simulation(no_ops.dump());
  CHECK(!r2.ops);
  CHECK(!r2.peak_memory[0]);

  // utilization is written (Σ busy / (p·makespan) = 12 / 18); lower_bound, memory_limit and
  // violations are optional keys the CLI sets, and they read back.
  CHECK(j["utilization"].get<double>() == Approx(12.0 / 18.0));
  CHECK(*r.utilization == Approx(12.0 / 18.0));
  CHECK(!r.lower_bound);
  CHECK(!r.memory_limit);
  CHECK(r.violations.empty());
  json extra = j;
  extra["lower_bound"] = 8.0;
  extra["memory_limit"] = 1.5;
  extra["violations"] = {"memory_budget: stage 0 exceeds its memory limit 1.5"};
  const simulation_record re = simulation_from_json(extra);
  CHECK(*re.lower_bound == 8.0);
  CHECK(re.memory_limit == 1.5);
  CHECK(re.violations ==
        std::vector<std::string>{"memory_budget: stage 0 exceeds its memory limit 1.5"});
  json old = j;
  old.erase("utilization");  // files written before utilization existed still read
  CHECK(!simulation_from_json(old).utilization);

  // From the simulator with a memory report over budget: the violations are in the JSON.
  const simulation_result sim = simulate(s);
  const memory_report over =
      check_memory(s, memory_model::uniform(1, 0.5), memory_options::with_limit(1.5), sim);
  const json jo = simulation_to_json(s, sim, &over, false);
  REQUIRE(jo.contains("violations"));
  CHECK(jo["violations"].size() == 1);
  CHECK(jo["violations"][0].get<std::string>().rfind("memory_budget: stage 0 exceeds", 0) == 0);
  CHECK(simulation_from_json(jo).violations.size() == 1);
  CHECK(jo["utilization"].get<double>() == Approx(sim.utilization));

  json bad = j;
  bad["stages"][1]["ops"][3]["kind"] = "X";
  CHECK(error_of([&] { (void)simulation_from_json(bad); }) ==
        "/stages/1/ops/3/kind: unknown op kind \"X\"");
  bad = j;
  bad["stages"][0]["ops"][0]["mb"] = 2;
  CHECK(error_of([&] { (void)simulation_from_json(bad); }) ==
        "/stages/0/ops/0/mb: must be between 0 and 1, not 2");
}

TEST_CASE("simulation json: from a schedule report", "[io][simulation_json][model_json]") {
  const schedule s = generate(one_f_one_b{}, 4, 8);
  report_options o;
  o.memory_limit = 3.0;
  o.lower_bound = 30.0;
  const schedule_report r = report_schedule(s, o);
  const json j = simulation_to_json(s, r);
  // The simulator's JSON, without ops, plus what the report adds.
  json expected = simulation_to_json(s, r.simulation, &r.memory, false);
  expected["lower_bound"] = 30.0;
  expected["memory_limit"] = 3.0;
  CHECK(j == expected);
  REQUIRE(j.contains("violations"));
  CHECK(j["violations"].get<std::vector<std::string>>() == r.violations());
  CHECK(!j["stages"][0].contains("ops"));
  CHECK(simulation_to_json(s, r, true)["stages"][0]["ops"].size() == s.ops(0).size());
  const simulation_record back = simulation_from_json(j);
  CHECK(back.lower_bound == 30.0);
  CHECK(back.memory_limit == 3.0);
  CHECK(back.violations == r.violations());

  // Per-stage limits are written as one number per stage and read back as such.
  report_options per_stage = o;
  per_stage.memory_limit = {3.0, 4.0, 4.0, 4.0};
  const schedule_report rp = report_schedule(s, per_stage);
  const json jp = simulation_to_json(s, rp);
  CHECK(jp["memory_limit"] == json::array({3.0, 4.0, 4.0, 4.0}));
  CHECK(rp.memory.violations.size() == 1);  // only stage 0 (peak 4) is over its 3
  CHECK(simulation_from_json(jp).memory_limit == memory_limits({3.0, 4.0, 4.0, 4.0}));

  // Nothing optional when the report has nothing to add.
  const json plain = simulation_to_json(s, report_schedule(s));
  CHECK(!plain.contains("lower_bound"));
  CHECK(!plain.contains("memory_limit"));
  CHECK(!plain.contains("violations"));
  CHECK(!plain.contains("deadlock"));

  // An invalid schedule: its validation lines, then the budget lines.
  schedule bad = generate(one_f_one_b{}, 4, 8);
  bad.stage_ops(3).pop_back();
  const schedule_report rb = report_schedule(bad, o);
  const json jb = simulation_to_json(bad, rb);
  CHECK(jb["violations"].get<std::vector<std::string>>() == rb.violations());
  CHECK_THAT(jb["violations"][0].get<std::string>(), Catch::StartsWith("missing: "));

  // One simulate() refuses: reported as not simulated, still one entry per stage.
  const schedule huge = schedule::on("huge", placement::sequential(2), 16777216);
  const json jh = simulation_to_json(huge, report_schedule(huge));
  CHECK_THAT(jh["deadlock"].get<std::string>(), Catch::StartsWith("not simulated: simulate: "));
  CHECK(jh["stages"].size() == 2);
  CHECK(simulation_from_json(jh).deadlock);
}
