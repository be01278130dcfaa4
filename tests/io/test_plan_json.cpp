#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/plan_json.hpp>

#include "support/plan_fixture.hpp"

using namespace pipesched;

namespace {

/// Every number finite, no null: what a reader of the plan JSON may rely on.
void check_values(const nlohmann::json& j, const std::string& path = "") {
  INFO(path);
  CHECK_FALSE(j.is_null());
  if (j.is_number()) {
    CHECK(std::isfinite(j.get<double>()));
  }
  if (j.is_object()) {
    for (const auto& item : j.items()) {
      check_values(item.value(), path + "/" + item.key());
    }
  }
  if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      check_values(j[i], path + "/" + std::to_string(i));
    }
  }
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("pipesched-test-" + name)).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("plan JSON: model files round trip and are read strictly", "[io][plan]") {
  for (const transformer_spec& t : model_presets()) {
    const transformer_spec back = transformer_spec_from_json(transformer_spec_to_json(t));
    CHECK(back.name == t.name);
    CHECK(back.layers == t.layers);
    CHECK(back.hidden == t.hidden);
    CHECK(back.ffn == t.ffn);
    CHECK(back.heads == t.heads);
    CHECK(back.kv() == t.kv());
    CHECK(back.vocab == t.vocab);
    CHECK(back.mlp == t.mlp);
    CHECK(back.norm == t.norm);
    CHECK(back.tied_embeddings == t.tied_embeddings);
  }
  const std::string ok =
      R"({"version":1,"layers":2,"hidden":64,"ffn":256,"heads":4,"kv_heads":2,"vocab":100,)"
      R"("mlp":"swiglu","norm":"rmsnorm","tied_embeddings":false})";
  CHECK(read_transformer_spec(ok).name == "model");
  auto bad = [&](const std::string& from, const std::string& to) {
    std::string text = ok;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"mlp\":\"swiglu\"", "\"mlp\":\"relu\"")),
                    "/mlp: must be \"gelu\" or \"swiglu\", not \"relu\"");
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"kv_heads\":2", "\"kv_heads\":3")),
                    "/kv_heads: 3 must divide heads (4)");
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"heads\":4", "\"heads\":6")),
                    "/heads: 6 must divide hidden (64) unless head_dim is given");
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"heads\":4", "\"heads\":4,\"activation_bytes\":3")),
                    "/activation_bytes: must be 1, 2 or 4, not 3");
  CHECK_THROWS_WITH(
      read_transformer_spec(bad("\"heads\":4,\"kv_heads\":2", "\"heads\":128,\"kv_heads\":2")),
      "/heads: 128 must divide hidden (64) unless head_dim is given");
  CHECK_NOTHROW(read_transformer_spec(bad("\"heads\":4", "\"heads\":6,\"head_dim\":16")));
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"layers\":2", "\"layer\":2")),
                    Catch::Contains("/layer: unknown key"));
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"tied_embeddings\":false", "\"x\":1")),
                    Catch::Contains("/x: unknown key"));
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"version\":1", "\"version\":2")),
                    Catch::Contains("unsupported model format version 2"));
  CHECK_THROWS_WITH(read_transformer_spec(bad("\"hidden\":64", "\"hidden\":0")),
                    "/hidden: must be between 1 and 1099511627776, not 0");
  CHECK_THROWS_WITH(read_transformer_spec("{"), Catch::Contains("model: malformed JSON"));
}

TEST_CASE("plan JSON: cluster files round trip and are read strictly", "[io][plan]") {
  for (const cluster_spec& c : cluster_presets()) {
    const cluster_spec back = cluster_spec_from_json(cluster_spec_to_json(c));
    CHECK(back.memory_bytes == c.memory_bytes);
    CHECK(back.peak_flops_bf16 == c.peak_flops_bf16);
    CHECK(back.inter_node_bandwidth == c.inter_node_bandwidth);
    CHECK(back.gpus_per_node == c.gpus_per_node);
    CHECK(back.overlap_slowdown == c.overlap_slowdown);
  }
  // Without the key (a file written before it) compute beside a collective is not slowed.
  const std::string minimal = R"({"version":1,"memory_bytes":1,"peak_flops_bf16":1,)"
                              R"("intra_node_bandwidth":1,"inter_node_bandwidth":1)";
  CHECK(read_cluster_spec(minimal + "}").overlap_slowdown == 0.0);
  CHECK(read_cluster_spec(minimal + R"(,"overlap_slowdown":0.189})").overlap_slowdown == 0.189);
  CHECK_THROWS_WITH(read_cluster_spec(minimal + R"(,"overlap_slowdown":1.5})"),
                    "/overlap_slowdown: must be at most 1, not 1.5");
  CHECK_THROWS_WITH(read_cluster_spec(minimal + R"(,"overlap_slowdown":-0.1})"),
                    "/overlap_slowdown: must be finite and >= 0, not -0.1");
  CHECK_THROWS_WITH(read_cluster_spec(R"({"version":1,"memory_bytes":1,"peak_flops_bf16":1,)"
                                      R"("intra_node_bandwidth":1,"inter_node_bandwidth":1,)"
                                      R"("usable_fraction":2})"),
                    "/usable_fraction: must be at most 1, not 2");
  // A range the cluster's rules hold, said once and at its key: -0.5 and 0 alike are "> 0".
  for (const char* v : {"-0.5", "0"}) {
    CHECK_THROWS_WITH(
        read_cluster_spec(std::string(R"({"version":1,"memory_bytes":1,)") +
                          R"("peak_flops_bf16":1,"intra_node_bandwidth":1,)" +
                          R"("inter_node_bandwidth":1,"achieved_fraction":)" + v + "}"),
        std::string("/achieved_fraction: must be finite and > 0, not ") +
            (v[0] == '-' ? "-0.5" : "0"));
  }
  CHECK_THROWS_WITH(read_cluster_spec(R"({"version":1,"memory_bytes":1})"),
                    "/peak_flops_bf16: missing required key");
}

TEST_CASE("plan JSON: presets by name, else files", "[io][plan]") {
  CHECK(load_transformer_spec("llama3-70b").layers == 80);
  CHECK(load_cluster_spec("a100-sxm-80gb").peak_flops_bf16 == 312e12);
  CHECK_THROWS_WITH(load_transformer_spec("nope"), Catch::Contains("unknown model \"nope\""));
  CHECK_THROWS_WITH(load_transformer_spec("/no/such/model.json"),
                    Catch::Contains("/no/such/model.json: cannot open file"));
  const std::string path =
      temp_file("model.json", transformer_spec_to_json(model_preset("gpt3-175b")).dump());
  CHECK(load_transformer_spec(path).hidden == 12288);
  std::remove(path.c_str());
}

TEST_CASE("plan JSON: the plan document's contract", "[io][plan]") {
  const plan_result& r = test_plan::small_plan();
  const nlohmann::json j = plan_to_json(test_plan::small_job(), r);
  check_values(j);
  CHECK(j.at("version") == 1);
  CHECK(j.at("gpus") == 64);
  CHECK(j.at("global_batch") == 64);
  CHECK(j.at("tokens_per_step") == 64 * 8192);
  REQUIRE(j.at("plans").size() == r.plans.size());
  for (const nlohmann::json& p : j.at("plans")) {
    for (const char* k : {"tp", "pp", "dp", "v", "micro_batch", "microbatches"}) {
      CHECK(p.at("layout").contains(k));
    }
    for (const char* k : {"schedule", "recompute", "fits", "step_time_s", "tokens_per_s",
                          "tflops_per_gpu", "mfu", "bubble_rate", "flops_per_iteration"}) {
      CHECK(p.contains(k));
    }
    std::uint32_t layers = 0;
    for (const nlohmann::json& s : p.at("stages")) {
      layers += s.at("layers").get<std::uint32_t>();
      const nlohmann::json& m = s.at("memory_bytes");
      CHECK(m.at("total").get<double>() ==
            Approx(m.at("weights").get<double>() + m.at("gradients").get<double>() +
                   m.at("optimizer").get<double>() + m.at("activations").get<double>()));
    }
    CHECK(layers == 32);
  }
  REQUIRE(j.contains("baseline"));
  CHECK(j.at("baseline").at("speedup").get<double>() >= 1.0);
  CHECK(j.at("baseline").at("gpus_recovered").get<double>() ==
        Approx(j.at("baseline").at("time_saved").get<double>() * 64));
}

TEST_CASE("plan JSON: the map gives every rank one stage and every layer one chunk", "[io][plan]") {
  const plan_entry& e = test_plan::small_plan().plans.front();
  const nlohmann::json j = plan_map_to_json(test_plan::small_job(), e);
  std::uint64_t next_rank = 0;
  std::set<std::uint32_t> layers;
  for (const nlohmann::json& st : j.at("stages")) {
    CHECK(st.at("ranks").at("first") == next_rank);
    next_rank += st.at("ranks").at("count").get<std::uint64_t>();
    for (const nlohmann::json& c : st.at("chunks")) {
      for (auto l = c.at("layers")[0].get<std::uint32_t>(); l <= c.at("layers")[1]; ++l) {
        CHECK(layers.insert(l).second);
      }
    }
  }
  CHECK(next_rank == 64);
  CHECK(layers.size() == 32);
  CHECK(*layers.rbegin() == 31);
}

TEST_CASE("plan JSON: the map counts CP ranks and lists no layer for a chunk of none",
          "[io][plan]") {
  // Made by hand: the search gives no end chunk zero layers and no CP yet.
  plan_entry e;
  e.choice.layout.tp = 8;
  e.choice.layout.cp = 2;
  e.choice.layout.dp = 4;
  e.choice.layout.pp = 2;
  e.choice.layout.chunks = 2;
  e.choice.partition = {0, 16, 16, 0};
  e.stages.resize(2);
  e.stages[0].chunks = {0, 2};
  e.stages[1].chunks = {1, 3};
  const nlohmann::json j = plan_map_to_json(test_plan::small_job(), e);
  CHECK(j.at("cp") == 2);
  CHECK(j.at("rank_order") == "tp, cp, dp, pp (rank = t + tp*(c + cp*(d + dp*stage)))");
  CHECK(j.at("stages")[1].at("ranks").at("first") == 64);
  CHECK(j.at("stages")[1].at("ranks").at("count") == 64);
  const nlohmann::json& first = j.at("stages")[0].at("chunks")[0];
  CHECK(first.at("layers") == nlohmann::json::array());
  CHECK(first.at("embedding") == true);
  CHECK(j.at("stages")[0].at("chunks")[1].at("layers") == nlohmann::json::array({16, 31}));
  CHECK(j.at("stages")[1].at("chunks")[1].at("layers") == nlohmann::json::array());
  CHECK(j.at("stages")[1].at("chunks")[1].at("head") == true);
}
