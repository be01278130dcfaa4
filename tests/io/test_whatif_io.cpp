#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/whatif_io.hpp>

using namespace pipesched;

namespace {

whatif_result whatif_fixture() {
  whatif_result r;
  r.name = "zb-h1";
  r.stages = 4;
  r.microbatches = 8;
  r.chunks = 1;
  r.seed = 7;
  r.robustness.clean = 27.0;
  r.robustness.iteration = {3, 28.5, 0.25, 28.0, 28.5, 29.0, 29.0};
  return r;
}

}  // namespace

TEST_CASE("whatif writers: a static order's distribution as JSON and text", "[io][whatif]") {
  whatif_result r = whatif_fixture();
  CHECK(whatif_to_json(r).dump() ==
        R"({"clean":27.0,"max":29.0,"mean":28.5,"min":28.0,"p50":28.5,"p99":29.0,)"
        R"("samples":3,"schedule":"zb-h1","seed":7,"stddev":0.25})");
  CHECK(whatif_text(r) ==
        "zb-h1  p=4 m=8 v=1  3 samples, seed 7\n"
        "iteration time in cost units: clean 27  mean 28.5  sd 0.25  min 28  p50 28.5  p99 29  max "
        "29\n");
  r.robustness.sensitivity = {0.5, 0.25};
  CHECK(whatif_to_json(r)["sensitivity"] == nlohmann::json::array({0.5, 0.25}));
  CHECK_THAT(whatif_text(r),
             Catch::EndsWith("sensitivity (mean increase per 1% slowdown of stage k): 0.5 0.25\n"));
}

TEST_CASE("whatif writers: D data-parallel replicas as JSON and text", "[io][whatif]") {
  whatif_result r = whatif_fixture();
  r.replicas = 4;
  r.data_parallel = data_parallel_stats{};
  r.data_parallel->iteration = {2, 30.0, 1.0, 29.0, 29.0, 31.0, 31.0};
  r.data_parallel->slowest_replica_share = 0.125;
  CHECK(whatif_to_json(r).dump() ==
        R"({"max":31.0,"mean":30.0,"p50":29.0,"p99":31.0,"replicas":4,"samples":2,)"
        R"("schedule":"zb-h1","slowest_replica_share":0.125})");
  CHECK(whatif_text(r) ==
        "zb-h1  p=4 m=8 v=1  D=4 replicas  2 iterations, seed 7\n"
        "iteration time (pipeline + ring all-reduce) in cost units: mean 30  p50 29  p99 31  max "
        "31; lost to "
        "the slowest replica 12.50%\n");
}

TEST_CASE("whatif writers: a schedule over links as JSON and text", "[io][whatif]") {
  schedule s = schedule::on("two", placement::sequential(2), 1);
  link_timing_result r;
  r.makespan = 10;
  r.iteration = 12.5;
  r.pipeline_wait = 1;
  r.stall_behind_bulk = 0.5;
  r.links.resize(2);
  r.links[0].busy = 3;
  r.links[0].pipeline_messages = 1;
  r.links[0].pipeline_bytes = 2;
  r.links[0].allreduce_end = 12.5;
  const nlohmann::json j = links_to_json(s, r, link_discipline::fifo, 2);
  CHECK(j["iteration"] == 12.5);
  CHECK(j["traffic"] == "fifo");
  CHECK(j["replicas"] == 2);
  CHECK(j["links"].size() == 2u);
  CHECK(j["links"][0]["allreduce_end"] == 12.5);
  CHECK_THAT(
      links_text(s, r, link_discipline::fifo, 2),
      Catch::StartsWith(
          "two  p=2 m=1 v=1  links, fifo traffic, D=2 replicas\n"
          "makespan 10 cost units  iteration 12.5 cost units (with the "
          "all-reduce)  pipeline sends waited 1 cost units, 0.5 of them behind all-reduce bytes\n"
          "link 0: busy 3 cost units, 1 pipeline messages (2 bytes) waited 0 cost units, 0 "
          "all-reduce messages (0 bytes), all-reduce ends at 12.5 cost units\n"));
}
