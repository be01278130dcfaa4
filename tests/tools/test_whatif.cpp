#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/tools/whatif.hpp>

#include "support/options.hpp"

using namespace pipesched;
using namespace test_options;

namespace {

schedule whatif_schedule(const std::string& name) {
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  return default_registry().generate(name, gp);
}

/// The field and rule of the field_error `req` throws, "field: rule" ("" when it does not).
std::string whatif_error(const schedule& s, const whatif_request& req) {
  try {
    (void)run_whatif(s, req);
  } catch (const field_error& e) {
    return e.field() + ": " + e.rule();
  }
  return "";
}

}  // namespace

TEST_CASE("run_whatif: the three runs are the library's, number for number", "[plan][whatif]") {
  const schedule s = whatif_schedule("zb-h1");
  whatif_request req;
  req.cv = 0.1;
  req.stragglers = {{2, 1.1}};
  req.seed = 4;
  req.samples = 20;
  const whatif_result r = run_whatif(s, req);
  perturbation n;
  n.set_cv(0.1).set_straggler(4, 2, 1.1).set_seed(4);
  robustness_options ro;
  ro.samples = 20;
  const robustness_result direct = monte_carlo(s, cost_model{}, with_noise(ro, n));
  CHECK(r.robustness.iteration.mean == direct.iteration.mean);
  CHECK(r.robustness.iteration.max == direct.iteration.max);
  CHECK(r.name == "zb-h1");
  CHECK(r.seed == 4u);
  CHECK_FALSE(r.data_parallel);

  req.dynamic = true;
  const whatif_result d = run_whatif(s, req);
  CHECK(d.name == "dynamic policy on zb-h1's placement");
  CHECK(d.robustness.iteration.mean == monte_carlo_dynamic(schedule::on("dynamic", s.layout(), 8),
                                                           cost_model{}, dynamic_mc(n, {}, ro))
                                           .iteration.mean);

  req.dynamic = false;
  req.replicas = 3;
  req.gradient_bytes = 5.0;
  req.keep_samples = true;
  const whatif_result dp = run_whatif(s, req);
  REQUIRE(dp.data_parallel);
  CHECK(dp.replicas == 3u);
  data_parallel_model m;
  m.replicas = 3;
  m.gradient_bytes = {5.0};
  CHECK(dp.data_parallel->iteration.mean ==
        monte_carlo_data_parallel(s, cost_model{}, dp_options(n, m, 20)).iteration.mean);
  CHECK(dp.samples().size() == 20u);
}

TEST_CASE("run_whatif: a memory limit needs the dynamic policy, memory the schedule's shape",
          "[plan][whatif]") {
  const schedule s = whatif_schedule("1f1b");  // p = 4
  whatif_request req;
  req.samples = 2;
  req.memory_limit = 3.0;
  CHECK(whatif_error(s, req) == "memory_limit: only meaningful with dynamic");
  req.dynamic = true;
  CHECK(whatif_error(s, req).empty());
  req.memory.set_stage_memory({{1.0, 0.5}, {1.0, 0.5}, {1.0, 0.5}});  // p = 3
  CHECK_THAT(whatif_error(s, req),
             Catch::StartsWith("memory: whatif: memory model stages table (3 entries) must hold "
                               "one entry per stage (p=4)"));
  req.dynamic = false;  // unread without the dynamic policy, and still wrong
  req.memory_limit = {};
  CHECK_THAT(whatif_error(s, req), Catch::StartsWith("memory: whatif: memory model stages"));
}

TEST_CASE("run_whatif: the request's rules name the field", "[plan][whatif]") {
  const schedule s = whatif_schedule("1f1b");
  whatif_request req;
  req.samples = 0;
  CHECK(whatif_error(s, req) == "samples: must be at least 1, got 0");
  req.samples = 5;
  req.cv = -0.1;
  CHECK(whatif_error(s, req) == "cv: must be a finite number >= 0 and <= 10, got -0.1");
  req.cv = 1e155;
  CHECK(whatif_error(s, req) == "cv: must be a finite number >= 0 and <= 10, got 1e+155");
  req.cv = 0.0;
  req.stragglers = {{1, 1.5}, {1, 2.0}};
  CHECK(whatif_error(s, req) == "stragglers: stage 1 is given twice (1.5 and 2)");
  req.stragglers = {{4, 1.5}};
  CHECK(whatif_error(s, req) == "stragglers: stage 4 must be < stages (p=4)");
  req.stragglers = {{1, -1.0}};
  CHECK(whatif_error(s, req) == "stage_slowdown: stage 1's factor must be finite and > 0, got -1");
  req.stragglers.clear();
  req.stalls = stall_model{0.1, -1.0};
  CHECK(whatif_error(s, req) == "stalls.duration: must be finite and >= 0, got -1");
  req.stalls.reset();
  req.gradient_bytes = 1.0;
  CHECK(whatif_error(s, req) == "gradient_bytes: only meaningful with replicas");
  req.gradient_bytes.reset();
  req.bandwidth = 2.0;
  CHECK(whatif_error(s, req) == "bandwidth: only meaningful with replicas");
  req.bandwidth.reset();
  req.replicas = 4;
  CHECK(whatif_error(s, req) ==
        "gradient_bytes: required with replicas (the bytes each stage all-reduces; 0 for none)");
  req.replicas = 1;
  req.gradient_bytes = 1.0;
  CHECK(whatif_error(s, req) ==
        "replicas: must be at least 2, got 1 (one replica is the pipeline alone: leave replicas "
        "out)");
  req.replicas = 2;
  req.dynamic = true;
  CHECK(whatif_error(s, req) == "replicas: not with dynamic");
  req.dynamic = false;
  req.bandwidth = 0.0;
  CHECK(whatif_error(s, req) == "bandwidth: must be finite and > 0, got 0");
  req.bandwidth = 1e-10;
  req.gradient_bytes = 1e308;
  CHECK_THAT(whatif_error(s, req),
             Catch::StartsWith("gradient_bytes: stage 0's all-reduce (1e+308 bytes"));
  req.bandwidth.reset();
  req.gradient_bytes = 1.0;
  req.allreduce_latency = -1.0;
  CHECK(whatif_error(s, req) == "allreduce_latency: must be finite and >= 0, got -1");
}

TEST_CASE("time_links: the request's links, without noise, are simulate_links'", "[plan][whatif]") {
  const schedule s = whatif_schedule("1f1b");
  whatif_request req;
  req.link_bandwidth = std::vector<double>{1.0};
  req.message_bytes = std::vector<double>{0.5};
  req.replicas = 4;
  req.gradient_bytes = 16.0;
  req.buckets = 4;
  link_discipline traffic = link_discipline::priority;
  const link_timing_result fifo = time_links(s, req, &traffic);
  CHECK(traffic == link_discipline::fifo);
  link_model lm;
  lm.bandwidth = {1.0};
  lm.activation_bytes = lm.gradient_bytes = 0.5;
  lm.bulk = bulk_traffic{4, {16.0}, 0.0, 4};
  const link_timing_result direct = simulate_links(s, cost_model{}, {.links = lm});
  CHECK(fifo.iteration == direct.iteration);
  CHECK(fifo.stall_behind_bulk == direct.stall_behind_bulk);
  CHECK(fifo.stall_behind_bulk > 0.0);
  req.traffic = "priority";
  const link_timing_result prio = time_links(s, req);
  CHECK(prio.stall_behind_bulk == 0.0);
  CHECK(prio.makespan < fifo.makespan);
  // The same rules as run_whatif.
  req.bandwidth = 2.0;
  CHECK(whatif_error(s, req) ==
        "bandwidth: not with link_bandwidth (the all-reduce shares the links)");
  CHECK_THROWS_AS(time_links(s, req), field_error);
  req.bandwidth.reset();
  req.link_bandwidth.reset();
  CHECK_THROWS_WITH(time_links(s, req), Catch::Contains("message_bytes: only meaningful with "
                                                        "link_bandwidth"));
}
