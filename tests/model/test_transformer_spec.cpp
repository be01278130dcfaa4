#include <cstdint>
#include <random>
#include <utility>

#include <catch2/catch.hpp>

#include <pipesched/model/transformer_spec.hpp>

using namespace pipesched;

namespace {

transformer_spec spec_405b() {
  transformer_spec t;
  t.name = "llama3-405b";
  t.layers = 126;
  t.hidden = 16384;
  t.ffn = 53248;
  t.heads = 128;
  t.kv_heads = 8;
  t.vocab = 128256;
  t.mlp = mlp_kind::swiglu;
  t.norm = norm_kind::rmsnorm;
  return t;
}

transformer_spec gpt_layer(std::uint64_t h, std::uint32_t a) {
  transformer_spec t;
  t.layers = 1;
  t.hidden = h;
  t.ffn = 4 * h;
  t.heads = a;
  t.vocab = 1;
  return t;
}

}  // namespace

TEST_CASE("transformer_spec: Llama 3 405B has 405.85 billion parameters", "[model][transformer]") {
  const transformer_spec t = spec_405b();
  const layer_parameters lp = parameters_of_layer(t);
  // Q and O 16384², K and V 16384 x 1024 each; SwiGLU 3 x 16384 x 53248; two RMSNorms.
  CHECK(lp.sharded == 16384.0 * 16384 * 2 + 16384.0 * 1024 * 2 + 3.0 * 16384 * 53248);
  CHECK(lp.replicated == 2.0 * 16384);
  const double total =
      t.layers * lp.total() + 2 * embedding_parameters(t, t.vocab) + norm_parameters(t);
  CHECK(total == 405853388800.0);  // Hugging Face's count of Meta-Llama-3.1-405B
  transformer_spec ln = t;
  ln.norm = norm_kind::layernorm;
  CHECK(norm_parameters(ln) == 2.0 * 16384);
}

TEST_CASE("transformer_spec: FLOPs split F, B, W with F + B + W = 3F", "[model][transformer]") {
  const transformer_spec t = spec_405b();
  const layer_flops f = flops_of_layer(t, 8192, 2);
  CHECK(f.linear == 2.0 * 8192 * 2 * parameters_of_layer(t).sharded);
  // Causal: QK^T and softmax·V, 2·s·(a·d) each per token, halved.
  CHECK(f.core == 2.0 * 8192.0 * 8192 * 2 * 16384);
  CHECK(f.forward() + f.backward_input() + f.backward_weight() == 3 * f.forward());
  CHECK(f.backward_weight() < f.forward());
  CHECK(f.forward() < f.backward_input());
  // The zero-bubble paper's layer, unmasked: F = sbh(24h + 4s), B = sbh(24h + 8s), W = 24sbh².
  const transformer_spec g = gpt_layer(1024, 16);
  const layer_flops z = flops_of_layer(g, 512, 3, false);
  const double sbh = 512.0 * 3 * 1024;
  CHECK(z.forward() == sbh * (24 * 1024 + 4 * 512));
  CHECK(z.backward_input() == sbh * (24 * 1024 + 8 * 512));
  CHECK(z.backward_weight() == 24 * sbh * 1024);
  CHECK(head_flops(t, 8192, 1, 128256) == 2.0 * 8192 * 16384 * 128256);
}

TEST_CASE("transformer_spec: activation bytes follow Korthikanti et al., Table 2",
          "[model][transformer]") {
  const transformer_spec g = gpt_layer(4096, 32);
  const double s = 2048, b = 2, h = 4096, a = 32;
  const double sbh = s * b * h;
  // No parallelism: 34sbh + 5as²b; M_W 32sbh (the zero-bubble paper's).
  const layer_activation_bytes one = activation_bytes_of_layer(g, 2048, 2, 1, false);
  CHECK(one.full == 34 * sbh + 5 * a * s * s * b);
  CHECK(one.without_core == 34 * sbh);
  CHECK(one.weight_grad == 32 * sbh);
  CHECK(one.input == 2 * sbh);
  // Tensor parallel t: sbh(10 + 24/t + 5as/(ht)); with sequence parallelism all / t.
  const layer_activation_bytes tp = activation_bytes_of_layer(g, 2048, 2, 8, false);
  CHECK(tp.full == Approx(sbh * (10 + 24.0 / 8 + 5 * a * s / (h * 8))).epsilon(1e-15));
  CHECK(tp.without_core == Approx(sbh * (10 + 24.0 / 8)).epsilon(1e-15));
  const layer_activation_bytes sp = activation_bytes_of_layer(g, 2048, 2, 8, true);
  CHECK(sp.full == Approx((34 * sbh + 5 * a * s * s * b) / 8).epsilon(1e-15));
  CHECK(sp.without_core == Approx(34 * sbh / 8).epsilon(1e-15));
  CHECK(sp.input == Approx(2 * sbh / 8).epsilon(1e-15));
  // Megatron's generalisation to any f: s·b·h·(18 + 4f/h)/t with SP and selective recompute.
  const transformer_spec big = spec_405b();
  const layer_activation_bytes m = activation_bytes_of_layer(big, 8192, 1, 8, true);
  CHECK(m.without_core == Approx(8192.0 * 16384 * (18 + 4.0 * 53248 / 16384) / 8).epsilon(1e-15));
  // fp8 activations: tensors halve, the two 1-byte masks do not.
  transformer_spec f8 = g;
  f8.activation_bytes = 1;
  CHECK(activation_bytes_of_layer(f8, 2048, 2, 1, false).without_core == 16 * sbh + 2 * sbh);
}

TEST_CASE("transformer_spec: W's operands never exceed what the backward keeps",
          "[model][transformer]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    transformer_spec t;
    t.layers = 1;
    t.heads = 1u << (rng() % 8);
    t.kv_heads = t.heads >> (rng() % 4);
    if (t.kv_heads == 0) {
      t.kv_heads = 1;
    }
    t.hidden = t.heads * (16 + rng() % 256);
    t.ffn = t.hidden * (1 + rng() % 6);
    t.vocab = 1000;
    t.mlp = rng() % 2 ? mlp_kind::swiglu : mlp_kind::gelu;
    t.activation_bytes = rng() % 2 ? 1 : 2;
    const auto tp = static_cast<std::uint32_t>(1u << (rng() % 4));
    const layer_activation_bytes a =
        activation_bytes_of_layer(t, 64 + rng() % 4096, 1 + rng() % 4, tp, rng() % 2 == 0);
    CHECK(a.weight_grad <= a.without_core);
    CHECK(a.without_core <= a.full);
    CHECK(a.input <= a.without_core);
  }
}

TEST_CASE("transformer_spec: Megatron's vocabulary padding", "[model][transformer]") {
  CHECK(padded_vocab(128256, 8) == 129024);
  CHECK(padded_vocab(128256, 4) == 128512);
  CHECK(padded_vocab(128256, 2) == 128256);
  CHECK(padded_vocab(51200, 8) == 51200);
  CHECK(padded_vocab(50257, 1) == 50304);
  CHECK(padded_vocab(50257, 8, 1) == 50264);
}

TEST_CASE("transformer_spec: check names the field and the rule", "[model][transformer]") {
  transformer_spec t = spec_405b();
  CHECK_NOTHROW(t.check());
  t.kv_heads = 7;
  CHECK_THROWS_WITH(t.check("m"), "m: kv_heads: 7 must divide heads (128)");
  t = spec_405b();
  t.layers = 0;
  CHECK_THROWS_WITH(t.check("m"), "m: layers: must be at least 1");
  t.layers = max_model_layers;
  CHECK_NOTHROW(t.check("m"));
  t.layers = 2147483648u;  // a size only declared: refused before anything is allocated for it
  CHECK_THROWS_WITH(t.check("m"), "m: layers: 2147483648 must be at most 4096 (max_model_layers)");
  t = spec_405b();
  t.activation_bytes = 3;
  CHECK_THROWS_WITH(t.check("m"), "m: activation_bytes: must be 1, 2 or 4, not 3");
  t = spec_405b();
  t.hidden = std::uint64_t{1} << 40;
  t.ffn = std::uint64_t{1} << 40;
  CHECK_THROWS_WITH(t.check("m"), Catch::Contains("too large"));
}

TEST_CASE("transformer_spec: heads must divide hidden unless head_dim is given",
          "[model][transformer]") {
  transformer_spec t = spec_405b();  // h 16384, a 128
  t.heads = 15;
  t.kv_heads = 15;
  CHECK_THROWS_WITH(t.check("m"),
                    "m: heads: 15 must divide hidden (16384) unless head_dim is given");
  t.heads = 32768;  // more heads than hidden elements
  t.kv_heads = 8;
  CHECK_THROWS_WITH(t.check("m"),
                    "m: heads: 32768 must divide hidden (16384) unless head_dim is given");
  t.head_dim = 128;  // a head's size given: a·d need not be h
  CHECK_NOTHROW(t.check("m"));
  t.heads = 15;
  t.kv_heads = 15;
  CHECK_NOTHROW(t.check("m"));
  try {
    t.head_dim = 0;
    t.check("m");
    FAIL("no error");
  } catch (const field_error& e) {
    CHECK(e.field() == "heads");
  }
}

TEST_CASE(
    "transformer_spec: packed sequences count Σ L for the linear work and Σ L² for the "
    "attention core",
    "[model][transformer][microbatch]") {
  const transformer_spec t = spec_405b();
  const std::uint64_t lengths[] = {1000, 3000, 4192};
  const token_counts n = token_counts::of(lengths);
  CHECK(n.tokens == 8192);
  CHECK(n.squares == 1000.0 * 1000 + 3000.0 * 3000 + 4192.0 * 4192);
  const layer_flops packed = flops_of_layer(t, n);
  const layer_flops one = flops_of_layer(t, 8192, 1);
  CHECK(packed.linear == one.linear);  // the same tokens
  CHECK(packed.core == one.core * n.squares / (8192.0 * 8192.0));
  // b sequences of s tokens are the special case, bit for bit.
  for (std::uint64_t s : {1u, 512u, 8192u, 131072u}) {
    for (std::uint64_t b : {1u, 3u, 16u}) {
      const layer_flops x = flops_of_layer(t, s, b);
      const layer_flops y = flops_of_layer(t, token_counts::uniform(s, b));
      CHECK(x.linear == y.linear);
      CHECK(x.core == y.core);
      const layer_activation_bytes u = activation_bytes_of_layer(t, s, b, 8, true);
      const layer_activation_bytes w =
          activation_bytes_of_layer(t, token_counts::uniform(s, b), 8, true);
      CHECK(u.full == w.full);
      CHECK(u.without_core == w.without_core);
      CHECK(u.weight_grad == w.weight_grad);
    }
  }
  // Activations: the core's s×s tensors per sequence (Σ L²); the rest per token.
  const layer_activation_bytes p = activation_bytes_of_layer(t, n, 1, false);
  const layer_activation_bytes q = activation_bytes_of_layer(t, 8192, 1, 1, false);
  CHECK(p.without_core == q.without_core);
  CHECK(p.full - p.without_core == Approx((q.full - q.without_core) * n.squares / (8192.0 * 8192)));
}

TEST_CASE("transformer_spec: tensor parallelism splits whole heads and KV heads", "[model]") {
  const transformer_spec t = spec_405b();  // 128 heads, 8 KV heads
  CHECK(t.tp_splits_heads(1));
  CHECK(t.tp_splits_heads(8));
  CHECK_FALSE(t.tp_splits_heads(0));
  CHECK_FALSE(t.tp_splits_heads(16));  // divides the heads, not the KV heads
  CHECK_FALSE(t.tp_splits_heads(3));
}

namespace {

// A small mixture of experts: 4 layers, the first dense, 8 routed experts of which 2 per token,
// one shared expert.
transformer_spec small_moe() {
  transformer_spec t;
  t.layers = 4;
  t.hidden = 64;
  t.ffn = 256;
  t.heads = 4;
  t.vocab = 1000;
  t.mlp = mlp_kind::swiglu;
  t.norm = norm_kind::rmsnorm;
  t.experts = 8;
  t.top_k = 2;
  t.expert_ffn = 32;
  t.shared_experts = 1;
  t.dense_layers = 1;
  return t;
}

}  // namespace

TEST_CASE("transformer_spec: MoE layers weigh their experts, a token activates top_k",
          "[model][transformer_spec]") {
  const transformer_spec t = small_moe();
  REQUIRE_NOTHROW(t.check());
  CHECK(t.is_moe());
  CHECK(t.moe_layers() == 3);
  CHECK(t.ffn_of_layer(0) == ffn_kind::dense);
  CHECK(t.ffn_of_layer(1) == ffn_kind::moe);
  CHECK(t.layer_kinds(0, 2) == std::pair<std::uint32_t, std::uint32_t>{1, 1});
  CHECK(t.layer_kinds(1, 3) == std::pair<std::uint32_t, std::uint32_t>{0, 3});
  const double attention = 4.0 * 64 * 64;
  const double norms = 2.0 * 64;
  const double expert = 3.0 * 64 * 32;
  const double router = 64.0 * 8;
  const layer_parameters dense = parameters_of_layer(t, ffn_kind::dense);
  CHECK(dense.total() == attention + norms + 3.0 * 64 * 256);
  const layer_parameters moe = parameters_of_layer(t, ffn_kind::moe);
  CHECK(moe.sharded == attention + 9.0 * expert);
  CHECK(moe.replicated == norms + router);
  CHECK(moe.replicated_matrices == router);
  const layer_parameters active = activated_parameters_of_layer(t, ffn_kind::moe);
  CHECK(active.sharded == attention + 3.0 * expert);
  CHECK(parameters_of_layer(t).total() == moe.total());  // most layers are MoE

  const model_parameters total = total_parameters(t, 1024);
  CHECK(total.embedding == 64.0 * 1024);
  CHECK(total.head == 64.0 + 64.0 * 1024);
  CHECK(total.layers == dense.total() + 3.0 * moe.total());
  const model_parameters act = activated_parameters(t, 1024);
  CHECK(act.layers == dense.total() + 3.0 * active.total());
  CHECK(act.total() < total.total());

  // A dense model: total and activated alike, the MoE kind read as dense.
  const transformer_spec d = spec_405b();
  CHECK(activated_parameters(d, 128256).total() == total_parameters(d, 128256).total());
  CHECK(parameters_of_layer(d, ffn_kind::moe).total() == parameters_of_layer(d).total());
}

TEST_CASE("transformer_spec: model FLOPs count the router and the activated experts only",
          "[model][transformer_spec]") {
  const transformer_spec t = small_moe();
  const token_counts n = token_counts::uniform(128, 2);
  const double expert = 3.0 * 64 * 32;
  const double attention = 4.0 * 64 * 64;
  const layer_flops moe = flops_of_layer(t, n, ffn_kind::moe);
  CHECK(moe.linear == 2.0 * 256 * (attention + 3.0 * expert + 64.0 * 8));
  CHECK(moe.core == 128.0 * 128 * 2 * (64.0 + 64.0));
  const layer_flops dense = flops_of_layer(t, n, ffn_kind::dense);
  CHECK(dense.linear == 2.0 * 256 * (attention + 3.0 * 64 * 256));
  CHECK(layers_forward_flops(t, n) == dense.forward() + 3.0 * moe.forward());
  // A dense model's layers are all alike.
  const transformer_spec d = spec_405b();
  CHECK(layers_forward_flops(d, n) == 126.0 * flops_of_layer(d, n).forward());
}

namespace {

/// `t` with DeepSeek-V3's MLA sizes (its ranks and head dims).
transformer_spec with_deepseek_mla(transformer_spec t) {
  t.mla = true;
  t.q_lora_rank = 1536;
  t.kv_lora_rank = 512;
  t.qk_nope_head_dim = 128;
  t.qk_rope_head_dim = 64;
  t.v_head_dim = 128;
  return t;
}

}  // namespace

TEST_CASE("transformer_spec: MLA's projections and core widths", "[model][transformer_spec]") {
  transformer_spec t;
  t.layers = 1;
  t.hidden = 7168;
  t.ffn = 18432;
  t.heads = 128;
  t.vocab = 129280;
  t.mlp = mlp_kind::swiglu;
  t.norm = norm_kind::rmsnorm;
  t = with_deepseek_mla(t);
  REQUIRE_NOTHROW(t.check());
  CHECK(t.query_size() == 128.0 * 192);
  CHECK(t.value_size() == 128.0 * 128);
  CHECK(2.0 * t.kv_size() == 128.0 * (192 + 128));
  const layer_parameters p = parameters_of_layer(t, ffn_kind::dense);
  // DeepSeek-V3's attention: q_a, q_b, kv_a (with the rotary key), kv_b, o, and two norms.
  const double down = 7168.0 * 1536 + 7168.0 * (512 + 64);
  const double up = 1536.0 * 128 * 192 + 512.0 * 128 * (128 + 128) + 128.0 * 128 * 7168;
  CHECK(p.replicated_matrices == down);
  CHECK(p.sharded == up + 3.0 * 7168 * 18432);
  CHECK(p.replicated == down + 1536 + 512 + 2.0 * 7168);
  CHECK(down + up == 187105280.0);
}

TEST_CASE("transformer_spec: check names the MoE and MLA field and its rule",
          "[model][transformer_spec]") {
  auto fails = [](transformer_spec t, const char* message) {
    CHECK_THROWS_WITH(t.check(), message);
  };
  transformer_spec t = small_moe();
  t.top_k = 9;
  fails(t, "transformer_spec: top_k: 9 must be at most experts (8)");
  t.top_k = 0;
  fails(t, "transformer_spec: top_k: must be at least 1 with experts (8)");
  t = small_moe();
  t.dense_layers = 5;
  fails(t, "transformer_spec: dense_layers: 5 must be at most layers (4)");
  t = small_moe();
  t.expert_ffn = 0;
  fails(t, "transformer_spec: expert_ffn: must be at least 1");
  t = small_moe();
  t.capacity_factor = -1.0;
  fails(t, "transformer_spec: capacity_factor: must be finite and >= 0 (0: dropless), not -1");
  t = small_moe();
  t.experts = 0;
  fails(t,
        "transformer_spec: experts: must be at least 1 when top_k, expert_ffn, shared_experts, "
        "dense_layers or capacity_factor is given");
  t = small_moe();
  t.dense_layers = 4;  // every layer dense: allowed, no MoE layer
  CHECK_NOTHROW(t.check());
  CHECK(t.moe_layers() == 0);
  t = small_moe();
  t.mla = true;
  t.q_lora_rank = 16;
  t.kv_lora_rank = 0;
  t.qk_nope_head_dim = 16;
  t.qk_rope_head_dim = 8;
  t.v_head_dim = 16;
  fails(t, "transformer_spec: kv_lora_rank: must be at least 1 with MLA attention");
}

TEST_CASE("transformer_spec: a size too large to count exactly is named by its own field",
          "[model][transformer_spec]") {
  auto field_of = [](const transformer_spec& t) -> std::string {
    try {
      t.check();
    } catch (const field_error& e) {
      return e.field();
    }
    return "";
  };
  transformer_spec t = spec_405b();  // h 16384, a 128
  t.head_dim = 1'000'000'000'000;
  CHECK(field_of(t) == "head_dim");
  CHECK_THROWS_WITH(t.check(), Catch::Contains("hidden·heads·head_dim"));
  t = spec_405b();
  t.vocab = std::uint64_t{1} << 40;
  CHECK(field_of(t) == "vocab");
  t = small_moe();
  t.expert_ffn = std::uint64_t{1} << 50;
  CHECK(field_of(t) == "expert_ffn");
  t = small_moe();
  t.hidden = 16384;
  t.heads = 128;
  t.kv_heads = 128;
  t = with_deepseek_mla(t);
  CHECK(field_of(t).empty());
  t.kv_lora_rank = 1'000'000'000'000;
  CHECK(field_of(t) == "kv_lora_rank");
  t.kv_lora_rank = 512;
  t.qk_nope_head_dim = 1'000'000'000'000;
  CHECK(field_of(t) == "qk_nope_head_dim");
}
