#include <catch2/catch.hpp>

#include <pipesched/model/layer_tensors.hpp>

using namespace pipesched;

namespace {

transformer_spec korthikanti() {
  // GELU with f = 4h, a·d = h, dropout, the scores materialized: Korthikanti et al.'s layer.
  transformer_spec t;
  t.name = "gpt";
  t.layers = 1;
  t.hidden = 6144;
  t.ffn = 4 * 6144;
  t.heads = 64;
  t.vocab = 51200;
  t.attention = attention_kind::materialized;
  t.dropout = true;
  return t;
}

transformer_spec model_preset_llama3_8b() {
  transformer_spec t;
  t.name = "llama3-8b";
  t.layers = 32;
  t.hidden = 4096;
  t.ffn = 14336;
  t.heads = 32;
  t.kv_heads = 8;
  t.vocab = 128256;
  t.mlp = mlp_kind::swiglu;
  t.norm = norm_kind::rmsnorm;
  return t;
}

}  // namespace

TEST_CASE("layer tensors: Korthikanti et al.'s Table 2, tensor by tensor", "[model][tensors]") {
  const transformer_spec t = korthikanti();
  const double s = 2048, b = 4, h = 6144, a = 64;
  const double stats = 2 * 8 * s * b;  // two LayerNorms' fp32 mean and reciprocal deviation
  for (double tp : {1.0, 2.0, 8.0}) {
    const layer_shard no_sp{token_counts::uniform(2048, 4), static_cast<std::uint32_t>(tp), 1,
                            false};
    const layer_activation_bytes x = activation_bytes_of_tensors(t, no_sp);
    CHECK(x.full == Approx(s * b * h * (10 + 24 / tp) + 5 * a * s * s * b / tp + stats));
    CHECK(x.without_core == Approx(s * b * h * (10 + 24 / tp) + stats));
    CHECK(x.input == Approx(2 * s * b * h));
    const layer_shard sp{token_counts::uniform(2048, 4), static_cast<std::uint32_t>(tp), 1, true};
    const layer_activation_bytes y = activation_bytes_of_tensors(t, sp);
    CHECK(y.full == Approx((s * b * h * 34 + 5 * a * s * s * b + stats) / tp));
    CHECK(y.input == Approx(2 * s * b * h / tp));
    // Megatron-LM's estimator agrees where the layer is Korthikanti's, but for the statistics.
    const layer_activation_bytes m =
        activation_bytes_of_layer(t, 2048, 4, static_cast<std::uint32_t>(tp), true);
    CHECK(y.full == Approx(m.full + stats / tp));
  }
}

TEST_CASE("layer tensors: flash attention keeps no s×s tensor, Llama no dropout mask",
          "[model][tensors]") {
  // Llama 3 8B: SwiGLU, GQA (8 of 32 heads for K and V), RMSNorm, flash attention, no dropout.
  const transformer_spec t = model_preset_llama3_8b();
  const double T = 8192, h = 4096, q = 4096, kv = 1024, f = 14336, a = 32;
  const double per_token = 2 * h + (2 * h + 4)    // attention norm input; QKV input and 1/rms
                           + 2 * (q + 2 * kv)     // Q, K, V after rotary
                           + 4 * a                // the log-sum-exp, fp32 per head
                           + 2 * q                // the attention output
                           + 2 * h + (2 * h + 4)  // MLP norm input; up input and 1/rms
                           + 2 * 2 * f            // gate and up outputs
                           + 2 * f;               // the down GEMM's input
  const layer_activation_bytes x =
      activation_bytes_of_tensors(t, layer_shard{token_counts::uniform(8192, 1), 1, 1, false});
  CHECK(x.full == Approx(per_token * T));
  CHECK(x.without_core == Approx((per_token - 4 * a) * T));
  // Linear in the sequence: no s² term.
  const layer_activation_bytes y =
      activation_bytes_of_tensors(t, layer_shard{token_counts::uniform(16384, 1), 1, 1, false});
  CHECK(y.full == Approx(2 * x.full));
  for (const kept_tensor& k :
       tensors_of_layer(t, layer_shard{token_counts::uniform(8192, 1), 1, 1, false})) {
    CHECK(k.name.find("mask") == std::string_view::npos);
  }
  // Context parallelism: each rank 1/cp of the tokens.
  const layer_activation_bytes c =
      activation_bytes_of_tensors(t, layer_shard{token_counts::uniform(8192, 1), 1, 4, false});
  CHECK(c.full == Approx(x.full / 4));
}

TEST_CASE("layer tensors: FP8 keeps the linear layers' inputs in one byte", "[model][tensors]") {
  transformer_spec t = model_preset_llama3_8b();
  const layer_shard s{token_counts::uniform(4096, 1), 1, 1, false};
  const layer_activation_bytes bf16 = activation_bytes_of_tensors(t, s);
  t.activation_bytes = 1;
  const layer_activation_bytes fp8 = activation_bytes_of_tensors(t, s);
  const double T = 4096, h = 4096, q = 4096, f = 14336;
  // QKV input, MLP up input, down input lose a byte per element; the attention output keeps its
  // bf16 copy for the flash backward and adds an fp8 one.
  CHECK(bf16.full - fp8.full == Approx(T * (h + h + f) - T * q));
  // The weight-gradient operands are at most the kept tensors.
  CHECK(fp8.weight_grad <= fp8.without_core);
}

TEST_CASE("layer tensors: an MoE layer keeps top_k copies of the experts' inputs",
          "[model][tensors]") {
  transformer_spec t = model_preset_llama3_8b();
  t.experts = 8;
  t.top_k = 2;
  t.expert_ffn = 14336;
  REQUIRE_NOTHROW(t.check());
  const layer_shard s{token_counts::uniform(4096, 1), 1, 1, false};
  const double T = 4096;
  auto named = [](const std::vector<kept_tensor>& v, std::string_view name) {
    double sum = 0.0;
    for (const kept_tensor& k : v) {
      sum += k.name == name ? k.bytes : 0.0;
    }
    return sum;
  };
  const std::vector<kept_tensor> moe = tensors_of_layer(t, s, ffn_kind::moe);
  CHECK(named(moe, "experts' input copies") == 2.0 * 2 * T * 4096);
  CHECK(named(moe, "gate and up outputs") == 2.0 * 2 * T * 2 * 14336);
  CHECK(named(moe, "experts down input") == 2.0 * 2 * T * 14336);
  CHECK(named(moe, "router probabilities and choices") == 4.0 * T * 8 + 8.0 * 2 * T);
  CHECK(named(moe, "MLP down input") == 0.0);
  // Mixtral's MoE layer (top-2 of experts as wide as Llama's MLP) keeps its MLP's tensors twice.
  const layer_activation_bytes dense = activation_bytes_of_tensors(t, s, ffn_kind::dense);
  const layer_activation_bytes routed = activation_bytes_of_tensors(t, s, ffn_kind::moe);
  CHECK(routed.full > dense.full + 2.0 * T * 3 * 14336);
  CHECK(routed.weight_grad <= routed.without_core);
  // A capacity factor keeps c times the copies.
  t.capacity_factor = 1.5;
  CHECK(named(tensors_of_layer(t, s, ffn_kind::moe), "experts' input copies") ==
        1.5 * 2.0 * 2 * T * 4096);
}

TEST_CASE("layer tensors: memory-efficient norms keep no norm input", "[model][tensors]") {
  transformer_spec t = model_preset_llama3_8b();
  const double T = 8192, h = 4096;
  for (const bool sp : {false, true}) {
    const layer_shard s{token_counts::uniform(8192, 1), 8, 1, sp};
    t.memory_efficient_norm = false;
    const layer_activation_bytes kept = activation_bytes_of_tensors(t, s);
    t.memory_efficient_norm = true;
    const layer_activation_bytes efficient = activation_bytes_of_tensors(t, s);
    // The two norms' inputs, h wide in bf16, split by TP only with sequence parallelism.
    const double norm_inputs = 2 * 2 * T * h / (sp ? 8 : 1);
    CHECK(kept.full - efficient.full == Approx(norm_inputs));
    CHECK(kept.without_core - efficient.without_core == Approx(norm_inputs));
    // Full recomputation still keeps the layer's input (its checkpoint).
    CHECK(efficient.input == kept.input);
    for (const kept_tensor& k : tensors_of_layer(t, s)) {
      CHECK(k.name.find("norm input") == std::string_view::npos);
    }
  }
  // In FP8 the next GEMM keeps a one-byte copy, so the norm keeps its output in two bytes: the
  // same bytes as its input.
  t.activation_bytes = 1;
  const layer_shard s{token_counts::uniform(4096, 1), 1, 1, false};
  t.memory_efficient_norm = false;
  const double fp8_kept = activation_bytes_of_tensors(t, s).full;
  t.memory_efficient_norm = true;
  CHECK(activation_bytes_of_tensors(t, s).full == Approx(fp8_kept));
  std::size_t outputs = 0;
  for (const kept_tensor& k : tensors_of_layer(t, s)) {
    outputs += k.name.find("norm output") != std::string_view::npos ? 1U : 0U;
  }
  CHECK(outputs == 2);
}
