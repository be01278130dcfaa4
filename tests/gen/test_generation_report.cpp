#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/generation_report.hpp>

using namespace pipesched;

namespace {

// A framework's own numbers: per-stage costs (ms), activations and static memory (GiB).
generator_params measured_params() {
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  p.costs.set_stage_costs(
      {{10.0, 12.0, 8.0}, {11.0, 13.0, 9.0}, {10.0, 12.0, 8.0}, {14.0, 16.0, 10.0}});
  p.memory = memory_model::uniform(1.5, 0.5);
  p.memory.set_static_memory({20.0, 18.0, 18.0, 22.0});
  p.memory_limit = 30.0;
  return p;
}

report_options options_of(const generator_params& p, std::optional<double> lower_bound) {
  report_options o;
  o.costs = p.costs;
  o.memory = p.memory;
  o.memory_limit = p.memory_limit;
  o.lower_bound = lower_bound;
  return o;
}

}  // namespace

TEST_CASE("report_schedule(generation_result) checks against what it was generated for",
          "[gen][generation_report]") {
  const generator_params p = measured_params();
  for (const char* name : {"1f1b", "zb-h1", "zb-v", "zb-auto"}) {
    INFO(name);
    const generation_result g = default_registry().generate_result(name, p);
    const schedule_report rep = report_schedule(g);
    const schedule_report given = report_schedule(g.sched, options_of(p, g.lower_bound));
    REQUIRE(rep.validation.ok());
    CHECK(rep.simulation.makespan == given.simulation.makespan);
    CHECK(rep.memory.max_peak() == given.memory.max_peak());
    CHECK(rep.memory_limit == p.memory_limit);
    CHECK(rep.lower_bound == g.lower_bound);
    CHECK(rep.ok() == given.ok());
    // Without the generation's numbers the same schedule is checked at unit costs and memory.
    const schedule_report unit = report_schedule(g.sched);
    CHECK(unit.simulation.makespan < rep.simulation.makespan / 5.0);
    CHECK(rep.memory.peak_memory(3) > 22.0);  // static memory counted
    CHECK(unit.memory.peak_memory(3) < 22.0);
  }
  CHECK(default_registry().generate_result("zb-v", p).lower_bound.has_value());
}

TEST_CASE("report_schedule(generation_result) reports the generation's memory limit",
          "[gen][generation_report]") {
  generator_params p = measured_params();
  p.memory_limit = 24.0;  // 1F1B holds p activations on stage 0: 20 + 4 x 1.5 + M_W
  const generation_result g = default_registry().generate_result("1f1b", p);
  REQUIRE_FALSE(g.memory_violations.empty());
  const schedule_report rep = report_schedule(g);
  CHECK_FALSE(rep.ok());
  CHECK(rep.validation.ok());
  CHECK(rep.memory.violations.size() == g.memory_violations.size());
  CHECK(rep.violations().size() == g.memory_violations.size());
}

TEST_CASE("report_options_for: the generation's options, to change before reporting",
          "[gen][generation_report]") {
  const generator_params p = measured_params();
  const generation_result g = default_registry().generate_result("zb-v", p);
  report_options o = report_options_for(g);
  CHECK(o.memory_limit == p.memory_limit);
  CHECK(o.lower_bound == g.lower_bound);
  CHECK(o.costs.stage_costs() == p.costs.stage_costs());
  o.simulate = false;
  const schedule_report rep = report_schedule(g.sched, o);
  CHECK(rep.simulation.stages.empty());
  CHECK(rep.memory.max_peak() == report_schedule(g).memory.max_peak());
}
