#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/job_spec_json.hpp>

using namespace pipesched;

TEST_CASE("model JSON: the MoE and MLA keys round trip", "[io][job_spec_json]") {
  for (const char* name : {"deepseek-v3", "mixtral-8x7b"}) {
    transformer_spec t = model_preset(name);
    t.capacity_factor = 1.25;
    const transformer_spec back = read_transformer_spec(transformer_spec_to_json(t).dump());
    CHECK(back.experts == t.experts);
    CHECK(back.top_k == t.top_k);
    CHECK(back.expert_ffn == t.expert_ffn);
    CHECK(back.shared_experts == t.shared_experts);
    CHECK(back.dense_layers == t.dense_layers);
    CHECK(back.capacity_factor == 1.25);
    CHECK(back.mla == t.mla);
    CHECK(back.q_lora_rank == t.q_lora_rank);
    CHECK(back.kv_lora_rank == t.kv_lora_rank);
    CHECK(back.qk_nope_head_dim == t.qk_nope_head_dim);
    CHECK(back.qk_rope_head_dim == t.qk_rope_head_dim);
    CHECK(back.v_head_dim == t.v_head_dim);
    CHECK(total_parameters(back, back.vocab).total() == total_parameters(t, t.vocab).total());
  }
  // A dense model's file has none of the keys, and reads as dense.
  const nlohmann::json dense = transformer_spec_to_json(model_preset("llama3-8b"));
  for (const char* key : {"experts", "top_k", "expert_ffn", "shared_experts", "dense_layers",
                          "capacity_factor", "mla"}) {
    CHECK_FALSE(dense.contains(key));
  }
  CHECK_FALSE(transformer_spec_from_json(dense).is_moe());
  CHECK_FALSE(transformer_spec_from_json(dense).mla);
}

TEST_CASE("model JSON: bad MoE and MLA keys name the key and the rule", "[io][job_spec_json]") {
  const std::string base =
      R"({"version": 1, "layers": 8, "hidden": 1024, "ffn": 4096, "heads": 16, "kv_heads": 16,
          "vocab": 32000, "mlp": "swiglu", "norm": "rmsnorm", "tied_embeddings": false)";
  auto fails = [&](const std::string& extra, const char* message) {
    CHECK_THROWS_WITH(read_transformer_spec(base + ", " + extra + "}"), message);
  };
  fails(R"("experts": 8, "top_k": 9, "expert_ffn": 1024)", "/top_k: 9 must be at most experts (8)");
  fails(R"("experts": 8, "expert_ffn": 1024)", "/: top_k: must be at least 1 with experts (8)");
  fails(R"("experts": 8, "top_k": 2, "expert_ffn": 1024, "dense_layers": 9)",
        "/dense_layers: 9 must be at most layers (8)");
  fails(R"("experts": 8, "top_k": 2, "expert_ffn": 1024, "capacity_factor": -1)",
        "/capacity_factor: must be finite and >= 0 (0: dropless), not -1");
  fails(R"("top_k": 2)",
        "/: experts: must be at least 1 when top_k, expert_ffn, shared_experts, dense_layers or "
        "capacity_factor is given");
  fails(R"("mla": {"q_lora_rank": 0, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                   "qk_rope_head_dim": 64, "v_head_dim": 128})",
        "/mla/q_lora_rank: must be between 1 and 1099511627776, not 0");
  fails(R"("mla": {"q_lora_rank": 16})", "/mla/kv_lora_rank: missing required key");
  fails(R"("memory_efficient_norm": 1)", "/memory_efficient_norm: must be true or false, not 1");
  CHECK_NOTHROW(read_transformer_spec(base + R"(, "experts": 8, "top_k": 2, "expert_ffn": 512})"));
}

TEST_CASE("model JSON: memory_efficient_norm round trips, written only when set",
          "[io][job_spec_json]") {
  transformer_spec t = model_preset("llama3-405b");
  CHECK_FALSE(transformer_spec_to_json(t).contains("memory_efficient_norm"));
  CHECK_FALSE(read_transformer_spec(transformer_spec_to_json(t).dump()).memory_efficient_norm);
  t.memory_efficient_norm = true;
  const nlohmann::json j = transformer_spec_to_json(t);
  CHECK(j.at("memory_efficient_norm") == true);
  CHECK(read_transformer_spec(j.dump()).memory_efficient_norm);
}
