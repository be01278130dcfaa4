#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/memory_model_json.hpp>
#include <pipesched/io/schedule_export.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/plan/planner.hpp>
#include <pipesched/tools/analyze.hpp>
#include <pipesched/transform/recompute.hpp>

#include "support/plan_fixture.hpp"

using namespace pipesched;

TEST_CASE("schedule_export: five files that read back as the schedule and its models",
          "[io][export]") {
  const schedule plain = generate(zb_h1{}, 3, 6);
  const schedule sched = with_recompute(plain, {0});
  const cost_model costs = cost_model::uniform(1.0, 2.0, 1.0, 0.5);
  memory_model memory = memory_model::uniform(4.0, 1.0);
  memory.set_static_memory({10.0, 20.0, 30.0});
  const std::vector<export_file> files = schedule_export("out/x", sched, costs, memory);
  REQUIRE(files.size() == 5);
  CHECK(files[0].path == "out/x.csv");
  CHECK(files[1].path == "out/x.compute.csv");
  CHECK(files[2].path == "out/x.schedule.json");
  CHECK(files[3].path == "out/x.costs.json");
  CHECK(files[4].path == "out/x.memory.json");
  // PyTorch's files: no R ops (it recomputes inside the stage); the first one lowered.
  const schedule compute = from_torch_csv(files[1].text);
  CHECK(compute == without_recompute(sched));
  const schedule lowered = from_torch_csv(files[0].text);
  CHECK(lowered.has_comm());
  CHECK(without_recompute(sched) == plain);
  // Pipesched's: the order with its R ops, and the models as given.
  CHECK(read_schedule_json(files[2].text) == sched);
  const shaped_cost_model c = read_cost_model(files[3].text).for_shape(3, 1, "t");
  CHECK(c.at(2).forward == 1.0);
  CHECK(c.at(2).backward_input == 2.0);
  CHECK(c.at(2).backward_weight == 1.0);
  CHECK(c.comm(0, 1) == 0.5);
  const shaped_memory_model m = read_memory_model(files[4].text).for_shape(3, 1, "t");
  CHECK(m.at(1).activation == 4.0);
  CHECK(m.at(1).weight_grad_input == 1.0);
  CHECK(m.static_memory(2) == 30.0);
}

TEST_CASE("write_export: writes each file, names the one it cannot", "[io][export]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "pipesched_test_schedule_export";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string prefix = (dir / "zb").string();
  const std::vector<std::string> paths =
      write_export(schedule_export(prefix, generate(zb_h1{}, 2, 4), cost_model{}, memory_model{}));
  REQUIRE(paths.size() == 5);
  for (const std::string& p : paths) {
    CHECK(std::filesystem::is_regular_file(p));
  }
  CHECK(read_schedule_json(read_text_file(prefix + ".schedule.json")) == generate(zb_h1{}, 2, 4));
  CHECK_THROWS_WITH(write_export({{(dir / "no" / "such" / "x.csv").string(), "x"}}),
                    Catch::EndsWith("x.csv: cannot open for writing"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("schedule_export: a prefix must name files, and an export overwrites no kept file",
          "[io][export]") {
  const schedule sched = generate(zb_h1{}, 2, 4);
  const cost_model costs = cost_model::uniform(1.0, 1.0, 1.0);
  const memory_model memory = memory_model::uniform(1.0, 0.5);
  CHECK_THROWS_WITH(schedule_export("", sched, costs, memory),
                    Catch::StartsWith("schedule_export: prefix: must not be empty"));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "pipesched_test_export_prefix";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CHECK_THROWS_WITH(schedule_export(dir.string() + "/", sched, costs, memory),
                    "schedule_export: prefix: \"" + dir.string() +
                        "/\" is a directory: give a file name in it, such as " + dir.string() +
                        "/plan");
  CHECK_THROWS_WITH(schedule_export(dir.string(), sched, costs, memory),
                    Catch::Contains("is a directory"));
  const std::string prefix = (dir / "x").string();
  const std::vector<export_file> files = schedule_export(prefix, sched, costs, memory);
  { std::ofstream(prefix + ".costs.json") << "input"; }
  try {
    (void)write_export(files, {{dir.string() + "/./x.costs.json", "--model"}});
    FAIL("no error");
  } catch (const field_error& e) {
    CHECK(e.field() == "prefix");
    CHECK(e.rule() == prefix + ".costs.json would overwrite --model " + dir.string() +
                          "/./x.costs.json: choose another prefix");
  }
  // Nothing was written: the check comes first.
  CHECK_FALSE(std::filesystem::exists(prefix + ".csv"));
  CHECK(read_text_file(prefix + ".costs.json") == "input");
  // A kept file that does not exist yet (the -o report) is compared by its path.
  CHECK_THROWS_WITH(write_export(files, {{prefix + ".csv", "--output"}}),
                    Catch::Contains("x.csv would overwrite --output"));
  CHECK(write_export(files, {{(dir / "other.csv").string(), "--output"}, {"", "--gpu"}}).size() ==
        5u);
  std::filesystem::remove_all(dir);
}

// Over random valid plan inputs: the best plan's export reads back (its schedule and costs
// from the exported JSON) through validate, simulate and analyze: the same makespan, the run's
// order predicting it, and against the exported costs a calibration of exactly the planned
// achieved fraction.
TEST_CASE("schedule_export: a plan's export reads back through validate, simulate and analyze",
          "[io][export][property]") {
  std::mt19937 rng(20261205);
  plan_options o;
  o.threads = 1;
  o.top = 1;
  o.search_evaluations = 16;
  int exported = 0;
  for (int round = 0; round < 10; ++round) {
    const training_job job = test_plan::random_small_job(rng);
    const plan_result r = plan(job, o);
    if (r.plans.empty() || !r.plans.front().fits) {
      continue;
    }
    const plan_entry& e = r.plans.front();
    INFO("round " << round << ": " << detail::plan_label(e.choice));
    ++exported;
    const std::vector<export_file> files = schedule_export("x", e.sched, e.costs, e.memory);
    const schedule back = read_schedule_json(files[2].text);
    const cost_model costs = read_cost_model(files[3].text);
    CHECK(back == e.sched);
    CHECK(validate(back).ok());
    report_options ro;
    ro.costs = costs;
    ro.memory = read_memory_model(files[4].text);
    const schedule_report rep = report_schedule(back, ro);
    CHECK(rep.simulation.makespan == Approx(e.makespan_s).epsilon(1e-12));
    // The run as a trace (milliseconds), analyzed against the exported costs.
    std::ostringstream trace;
    write_chrome_trace(trace, back, rep);
    const measured_run run = read_chrome_trace_run(trace.str());
    analyze_options ao;
    ao.planned = planned_speed{costs, job.cluster.achieved_fraction, 1e-3};
    ao.replan.generators = {e.choice.schedule == "zb-v" ? "zb-v" : "zb-auto"};
    const analyze_result a = analyze_run(run, ao);
    // Each op timed as measured (R too): without the links' latency, which a trace does not
    // give, the run's order is predicted no longer than it ran.
    CHECK(a.plan.current <= rep.simulation.makespan * 1e3 * (1.0 + 1e-9));
    REQUIRE(a.calibration);
    CHECK(a.calibration->ratio == Approx(1.0).epsilon(1e-9));
    CHECK(a.calibration->achieved_fraction == Approx(job.cluster.achieved_fraction).epsilon(1e-9));
    CHECK(a.stragglers.empty());
  }
  CHECK(exported >= 5);
}
