#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>

using namespace pipesched;

namespace {
// 1F1B with p = 2, m = 2 whose last op of stage 1 is missing.
schedule incomplete() {
  schedule s = generate(one_f_one_b{}, 2, 2);
  s.stage_ops(1).pop_back();
  return s;
}
}  // namespace

TEST_CASE("schedule report: a valid schedule", "[io][schedule_report]") {
  const schedule s = generate(zb_h1{}, 4, 8);
  report_options o;
  o.costs = cost_model::uniform(1, 2, 1);
  o.lower_bound = 30.0;
  const schedule_report r = report_schedule(s, o);
  CHECK(r.ok());
  CHECK(r.validation.ok());
  CHECK(!r.not_simulated);
  CHECK(r.violations().empty());
  const simulation_result sim = simulate(s, o.costs);
  CHECK(r.simulation.makespan == sim.makespan);
  CHECK(r.simulation.bubble_rate == sim.bubble_rate);
  CHECK(r.memory.peak_memory(0) == check_memory(s).peak_memory(0));
  CHECK(r.memory.violations.empty());
  CHECK(r.lower_bound == 30.0);  // carried through for the writers
  CHECK(!r.memory_limit);
}

TEST_CASE("schedule report: over the memory limit", "[io][schedule_report]") {
  const schedule s = generate(one_f_one_b{}, 4, 8);  // stage 0 peaks at p * M_B = 4
  report_options o;
  o.memory_limit = 3.0;
  const schedule_report r = report_schedule(s, o);
  CHECK(!r.ok());
  CHECK(r.validation.ok());
  REQUIRE(r.memory.violations.size() == 1);
  CHECK(r.memory_limit == 3.0);
  const std::vector<std::string> lines = r.violations();
  REQUIRE(lines.size() == 1);
  CHECK(lines == violation_lines(r.memory.violations));
  CHECK_THAT(lines[0], Catch::StartsWith("memory_budget: stage 0 exceeds its memory limit 3"));
}

TEST_CASE("schedule report: an invalid schedule", "[io][schedule_report]") {
  const schedule s = incomplete();
  const schedule_report r = report_schedule(s);
  CHECK(!r.ok());
  CHECK(!r.validation.ok());
  CHECK(r.simulation.stages.size() == 2);  // analyzed anyway (the default)
  // The validation lines; the memory checker's lifetime errors would only restate them.
  CHECK(r.violations() == violation_lines(r.validation));
  CHECK_THAT(r.violations()[0], Catch::StartsWith("missing: "));

  report_options stop;
  stop.analyze_invalid = false;
  const schedule_report q = report_schedule(s, stop);
  CHECK(!q.ok());
  CHECK(q.simulation.stages.empty());
  CHECK(q.memory.stages.empty());

  // A declared shape far beyond the ops: simulate() refuses, the report says why.
  const schedule huge = schedule::on("huge", placement::sequential(2), 16777216);
  const schedule_report h = report_schedule(huge);
  CHECK(!h.ok());
  REQUIRE(h.not_simulated);
  CHECK_THAT(*h.not_simulated, Catch::StartsWith("simulate: "));
  CHECK(h.simulation.stages.size() == 2);
}

TEST_CASE("schedule report: unusable options still throw", "[io][schedule_report]") {
  report_options o;
  o.costs.set_stage_costs({{1, 1, 1}, {1, 1, 1}});  // 2 entries for 4 stages
  CHECK_THROWS_AS(report_schedule(generate(one_f_one_b{}, 4, 8), o), invalid_argument);
}

TEST_CASE("schedule report: violation lines", "[io][schedule_report]") {
  const schedule s = incomplete();
  validate_options vo;
  vo.max_violations = 1;
  const validation_report v = validate(s, vo);
  REQUIRE(v.total > 1);
  const std::vector<std::string> lines = violation_lines(v);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == std::string(to_string(v.violations[0].kind)) + ": " + v.violations[0].message);
  CHECK(lines[1] == "... and " + std::to_string(v.total - 1) + " more violations");
  CHECK(violation_lines(validate(generate(one_f_one_b{}, 2, 2))).empty());

  const memory_report m = check_memory(s);
  REQUIRE(!m.errors.empty());
  const std::vector<std::string> ml = violation_lines(m);
  CHECK(ml.size() == m.errors.size());
  CHECK(ml[0] == "memory_lifetime: " + m.errors[0].message);
}

TEST_CASE("schedule report: without timing (pipesched validate)", "[io][schedule_report]") {
  report_options o;
  o.simulate = false;
  o.memory_limit = 3.0;
  const schedule over = generate(one_f_one_b{}, 4, 8);  // stage 0 peaks at 4 > 3
  const schedule_report r = report_schedule(over, o);
  CHECK(!r.ok());
  CHECK(r.simulation.stages.empty());  // not timed
  CHECK(r.simulation.makespan == 0.0);
  REQUIRE(r.memory.violations.size() == 1);
  CHECK(r.memory.peak_memory(0) == 4.0);
  CHECK(r.violations() == violation_lines(r.memory.violations));

  o.memory_limit = 4.0;
  CHECK(report_schedule(over, o).ok());
  // Invalid: the validation lines, memory not checked when analyze_invalid is off.
  o.analyze_invalid = false;
  const schedule_report bad = report_schedule(incomplete(), o);
  CHECK(!bad.ok());
  CHECK(bad.memory.stages.empty());
  CHECK(bad.violations() == violation_lines(bad.validation));
}
