#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/pack_io.hpp>

using namespace pipesched;

namespace {

const pack_request& io_request() {
  static const pack_request r = [] {
    pack_request q;
    q.model = model_preset("llama3-8b");
    q.cluster = cluster_preset("h100-sxm-80gb");
    q.lengths = {512, 8192, 1024, 2048, 700, 3000, 256, 4096};
    q.microbatches = 4;
    q.stages = 4;
    q.schedule = "zb-h1";
    q.search_evaluations = 40;
    return q;
  }();
  return r;
}

const pack_result& io_result() {
  static const pack_result r = pack(io_request());
  return r;
}

}  // namespace

TEST_CASE("pack_to_json: the issue's keys, in seconds and bytes", "[io][pack]") {
  const nlohmann::json j = pack_to_json(io_request(), io_result());
  CHECK(j.at("version") == 1);
  REQUIRE(j.at("microbatches").size() == 4);
  std::size_t sequences = 0;
  for (const nlohmann::json& mb : j.at("microbatches")) {
    std::uint64_t tokens = 0;
    for (const nlohmann::json& i : mb.at("sequences")) {
      tokens += io_request().lengths.at(i.get<std::size_t>());
      ++sequences;
    }
    CHECK(mb.at("tokens") == tokens);
  }
  CHECK(sequences == 8);
  CHECK(j.at("order").size() == 4);
  CHECK(j.at("step_time") == io_result().chosen.step_time_s);
  CHECK(j.at("baseline_step_time") == io_result().baseline.step_time_s);
  CHECK(j.at("step_time").get<double>() <= j.at("baseline_step_time").get<double>());
  CHECK(j.at("peak_memory").size() == 4);
  CHECK(j.at("memory_limit") == cluster_preset("h100-sxm-80gb").usable_memory());
  CHECK(j.at("fits") == true);
  CHECK(j.at("schedule") == "zb-h1");
  CHECK_FALSE(j.contains("tokens_per_microbatch"));  // a count was given, not a budget
  CHECK(j.at("baseline").at("microbatches").size() == 4);
}

TEST_CASE("pack_text: the report names its units", "[io][pack]") {
  const std::string t = pack_text(io_request(), io_result());
  CHECK_THAT(t, Catch::Contains("llama3-8b on 4 x h100-sxm-80gb (TP 1, PP 4), zb-h1: 8 sequences"));
  CHECK_THAT(t, Catch::Matches("(.|\n)*step time [0-9.]+ s, naive baseline \\(file order, equal "
                               "counts, 4 micro-batches\\) [0-9.]+ s: [0-9.]+x(.|\n)*"));
  CHECK_THAT(t, Catch::Matches("(.|\n)*peak memory per stage ([0-9.]+ GiB, ){3}[0-9.]+ GiB "
                               "\\(limit [0-9.]+ GiB\\)(.|\n)*"));
  CHECK_THAT(t, Catch::Contains(" slot micro-batch    tokens   sum L^2 (tok^2)  sequences"));
}
