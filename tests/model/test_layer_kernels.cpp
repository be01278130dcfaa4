#include <catch2/catch.hpp>

#include <pipesched/model/layer_kernels.hpp>

using namespace pipesched;

namespace {

transformer_spec gpt() {
  transformer_spec t;
  t.name = "gpt";
  t.layers = 1;
  t.hidden = 6144;
  t.ffn = 4 * 6144;
  t.heads = 64;
  t.head_dim = 96;
  t.vocab = 51200;
  t.attention = attention_kind::materialized;
  t.dropout = true;
  t.bias = true;
  t.position = position_kind::learned;
  return t;
}

transformer_spec llama() {
  transformer_spec t;
  t.name = "llama";
  t.layers = 1;
  t.hidden = 4096;
  t.ffn = 14336;
  t.heads = 32;
  t.kv_heads = 8;
  t.vocab = 128256;
  t.mlp = mlp_kind::swiglu;
  t.norm = norm_kind::rmsnorm;
  return t;
}

struct sums {
  double gemm = 0, attention = 0, memory = 0;
  int all_reduce = 0, all_gather = 0, reduce_scatter = 0;
};

sums of(const std::vector<kernel>& v) {
  sums s;
  for (const kernel& k : v) {
    switch (k.kind) {
      case kernel_kind::gemm:
        (k.attention_core ? s.attention : s.gemm) += k.flops;
        break;
      case kernel_kind::attention:
        s.attention += k.flops;
        break;
      case kernel_kind::memory_bound:
        s.memory += k.bytes;
        break;
      case kernel_kind::communication:
        (k.collective == collective_kind::all_reduce   ? s.all_reduce
         : k.collective == collective_kind::all_gather ? s.all_gather
                                                       : s.reduce_scatter) += 1;
        break;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("layer kernels: the GEMMs' FLOPs are the model's, split over TP", "[model][kernels]") {
  for (const transformer_spec& t : {gpt(), llama()}) {
    for (std::uint32_t tp : {1u, 2u, 8u}) {
      const token_counts n = token_counts::uniform(2048, 4);
      const op_kernels k = kernels_of_layer(t, layer_shard{n, tp, 1, false}, recompute_kind::none);
      const layer_flops f = flops_of_layer(t, n);
      CHECK(of(k.forward).gemm == Approx(f.linear / tp));
      CHECK(of(k.backward_input).gemm == Approx(f.linear / tp));
      CHECK(of(k.backward_weight).gemm == Approx(f.linear / tp));
      if (t.attention == attention_kind::flash) {
        // The causal half; the backward 2.5 times the forward (FlashAttention-2).
        CHECK(of(k.forward).attention == Approx(f.core / tp));
        CHECK(of(k.backward_input).attention == Approx(2.5 * f.core / tp));
      } else {
        // The materialized core computes the whole square: twice the causal count.
        CHECK(of(k.forward).attention == Approx(2.0 * f.core / tp));
        CHECK(of(k.backward_input).attention == Approx(4.0 * f.core / tp));
      }
    }
  }
}

TEST_CASE("layer kernels: TP's collectives, with and without sequence parallelism",
          "[model][kernels]") {
  const token_counts n = token_counts::uniform(2048, 1);
  const op_kernels none =
      kernels_of_layer(gpt(), layer_shard{n, 1, 1, false}, recompute_kind::none);
  CHECK(of(none.forward).all_reduce + of(none.forward).all_gather == 0);
  const op_kernels tp = kernels_of_layer(gpt(), layer_shard{n, 8, 1, false}, recompute_kind::none);
  CHECK(of(tp.forward).all_reduce == 2);
  CHECK(of(tp.backward_input).all_reduce == 2);
  CHECK(of(tp.backward_weight).all_reduce == 0);
  const op_kernels sp = kernels_of_layer(gpt(), layer_shard{n, 8, 1, true}, recompute_kind::none);
  CHECK(of(sp.forward).all_gather == 2);
  CHECK(of(sp.forward).reduce_scatter == 2);
  CHECK(of(sp.backward_input).all_gather == 2);
  CHECK(of(sp.backward_input).reduce_scatter == 2);
  CHECK(of(sp.backward_weight).all_gather == 2);  // the inputs gathered again for W
  // Sequence parallelism splits the h-wide elementwise kernels' bytes over TP.
  CHECK(of(sp.forward).memory < of(tp.forward).memory);
}

TEST_CASE("layer kernels: memory-bound bytes of a norm, the MLP activation and dropout",
          "[model][kernels]") {
  const double s = 2048, b = 1, h = 6144;
  const op_kernels k = kernels_of_layer(
      gpt(), layer_shard{token_counts::uniform(2048, 1), 1, 1, false}, recompute_kind::none);
  // LayerNorm: read and write s·b·h in bf16, and its fp32 mean and reciprocal deviation.
  CHECK(k.forward.front().name == "norm");
  CHECK(k.forward.front().bytes == Approx(4 * s * b * h + 8 * s * b));
  bool gelu = false;
  for (const kernel& x : k.forward) {
    if (x.name == "GELU") {
      gelu = true;
      CHECK(x.bytes == Approx(4 * s * b * 4 * h));
    }
    if (x.name == "attention dropout") {
      CHECK(x.bytes == Approx(5 * 64 * s * s * b));  // read e, write e and a 1-byte mask
    }
  }
  CHECK(gelu);
  // Without dropout, no dropout kernels.
  transformer_spec t = gpt();
  t.dropout = false;
  for (const kernel& x :
       kernels_of_layer(t, layer_shard{token_counts::uniform(2048, 1), 1, 1, false},
                        recompute_kind::none)
           .forward) {
    CHECK(x.name.find("dropout") == std::string_view::npos);
  }
}

TEST_CASE("layer kernels: recomputation re-runs the forward or the attention core",
          "[model][kernels]") {
  const layer_shard s{token_counts::uniform(4096, 2), 2, 1, true};
  const op_kernels full = kernels_of_layer(gpt(), s, recompute_kind::full);
  CHECK(full.recompute.size() == full.forward.size());
  const op_kernels sel = kernels_of_layer(gpt(), s, recompute_kind::selective);
  for (const kernel& k : sel.recompute) {
    CHECK(k.attention_core);
  }
  CHECK(kernels_of_layer(gpt(), s, recompute_kind::none).recompute.empty());
  const op_kernels flash = kernels_of_layer(llama(), s, recompute_kind::selective);
  REQUIRE(flash.recompute.size() == 1);
  CHECK(flash.recompute.front().kind == kernel_kind::attention);
}

TEST_CASE("layer kernels: context parallelism splits the tokens and passes K and V around",
          "[model][kernels]") {
  const token_counts n = token_counts::uniform(131072, 1);
  const op_kernels one =
      kernels_of_layer(llama(), layer_shard{n, 8, 1, true}, recompute_kind::none);
  const op_kernels cp =
      kernels_of_layer(llama(), layer_shard{n, 8, 16, true}, recompute_kind::none);
  CHECK(of(cp.forward).gemm == Approx(of(one.forward).gemm / 16));
  CHECK(of(cp.forward).attention == Approx(of(one.forward).attention / 16));
  double ring = 0.0;
  for (const kernel& k : cp.forward) {
    ring += k.ring_bytes;
  }
  // Each rank receives the other 15 ranks' K and V (k·d wide each, per TP rank).
  CHECK(ring == Approx(2.0 * (131072.0 / 16) * 2 * (8.0 * 128 / 8) * 15));
}

TEST_CASE("model ends: the embedding and the head", "[model][kernels]") {
  const layer_shard s{token_counts::uniform(2048, 1), 8, 1, false};
  const op_kernels e = kernels_of_embedding(gpt(), s);
  CHECK(of(e.forward).all_reduce == 1);
  CHECK_FALSE(e.backward_weight.empty());
  const op_kernels h = kernels_of_head(gpt(), s, 51200);
  CHECK(of(h.forward).gemm == Approx(2.0 * 2048 * 6144 * 51200 / 8));
  CHECK(of(h.backward_input).gemm == Approx(2.0 * 2048 * 6144 * 51200 / 8));
  CHECK(of(h.backward_weight).gemm == Approx(2.0 * 2048 * 6144 * 51200 / 8));
  CHECK(of(h.forward).memory > 16.0 * 2048 * 51200 / 8);  // the fp32 cross-entropy passes
}

namespace {

transformer_spec moe(bool mla) {
  transformer_spec t = llama();
  t.experts = 8;
  t.top_k = 2;
  t.expert_ffn = 2048;
  t.shared_experts = 1;
  t.dense_layers = 1;
  t.layers = 4;
  if (mla) {
    t.kv_heads = 0;
    t.mla = true;
    t.q_lora_rank = 512;
    t.kv_lora_rank = 256;
    t.qk_nope_head_dim = 128;
    t.qk_rope_head_dim = 64;
    t.v_head_dim = 128;
  }
  return t;
}

double bytes_named(const std::vector<kernel>& v, std::string_view name) {
  for (const kernel& k : v) {
    if (k.name == name) {
      return k.bytes;
    }
  }
  return -1.0;
}

}  // namespace

TEST_CASE("layer kernels: an MoE layer's GEMMs are the router's and the activated experts'",
          "[model][kernels]") {
  for (bool mla : {false, true}) {
    const transformer_spec t = moe(mla);
    REQUIRE_NOTHROW(t.check());
    for (std::uint32_t tp : {1u, 2u}) {
      INFO("mla " << mla << " tp " << tp);
      const token_counts n = token_counts::uniform(2048, 2);
      for (ffn_kind kind : {ffn_kind::dense, ffn_kind::moe}) {
        const op_kernels k =
            kernels_of_layer(t, layer_shard{n, tp, 1, false}, recompute_kind::none, kind);
        const layer_flops f = flops_of_layer(t, n, kind);
        // Every matrix split over TP but the replicated ones (the router, MLA's down
        // projections), which each rank computes whole.
        const layer_parameters p = activated_parameters_of_layer(t, kind);
        const double per_rank = 2.0 * n.tokens * (p.sharded / tp + p.replicated_matrices);
        CHECK(of(k.forward).gemm == Approx(per_rank));
        CHECK(of(k.backward_input).gemm == Approx(per_rank));
        CHECK(of(k.backward_weight).gemm == Approx(per_rank));
        CHECK(of(k.forward).attention == Approx(f.core / tp));
        if (tp == 1) {
          CHECK(of(k.forward).gemm == Approx(f.linear));
        }
      }
    }
  }
  // The permutation copies each token's input top_k times (and a 4-byte index per copy).
  const transformer_spec t = moe(false);
  const op_kernels k = kernels_of_layer(t, layer_shard{token_counts::uniform(1024, 1), 1, 1, false},
                                        recompute_kind::none);
  CHECK(bytes_named(k.forward, "permute") == 2.0 * 1024 * 4096 + (2.0 * 4096 + 4.0) * 2048);
  CHECK(bytes_named(k.forward, "MLP up") == -1.0);
  // Without expert parallelism no all-to-all; with it, dispatch and combine each way.
  for (const kernel& x : k.forward) {
    CHECK(x.kind != kernel_kind::communication);
  }
  layer_shard ep{token_counts::uniform(1024, 1), 1, 1, false};
  ep.ep = 4;
  const op_kernels e = kernels_of_layer(t, ep, recompute_kind::none);
  int a2a = 0;
  for (const std::vector<kernel>* v : {&e.forward, &e.backward_input}) {
    for (const kernel& x : *v) {
      if (x.kind == kernel_kind::communication) {
        CHECK(x.collective == collective_kind::all_to_all);
        CHECK(x.group == comm_group::expert);
        CHECK(x.bytes == 1024.0 * 2 * 4096 * 2 * 3 / 4);
        ++a2a;
      }
    }
  }
  CHECK(a2a == 4);
}

TEST_CASE("layer kernels: the all-to-all's bytes", "[model][kernels]") {
  // tokens × top_k × hidden × bytes, less the share staying on the rank.
  CHECK(expert_all_to_all_bytes(4096, 8, 7168, 2.0, 1) == 0.0);
  CHECK(expert_all_to_all_bytes(4096, 8, 7168, 2.0, 64) == 4096.0 * 8 * 7168 * 2 * 63 / 64);
  CHECK(expert_all_to_all_bytes(100, 2, 10, 1.0, 2) == 1000.0);
}

TEST_CASE("layer kernels: in FP8 the linear layers' GEMMs are fp8, attention, head and router bf16",
          "[model][kernels]") {
  const layer_shard s{token_counts::uniform(8192, 1), 4, 1, true};
  struct compute {
    std::string_view name;
    bool fp8, bf16_expected;
  };
  // Every compute kernel of F, B and W; the attention core's (flash or the batched GEMMs of a
  // materialized core) and the router's expected in bf16.
  auto computes_of = [](const op_kernels& ops) {
    std::vector<compute> out;
    for (const auto* v : {&ops.forward, &ops.backward_input, &ops.backward_weight}) {
      for (const kernel& k : *v) {
        if (k.kind == kernel_kind::gemm || k.kind == kernel_kind::attention) {
          out.push_back({k.name, k.fp8, k.attention_core || k.name.find("router") == 0});
        }
      }
    }
    return out;
  };
  for (const bool flash : {true, false}) {
    transformer_spec t = moe(false);
    t.attention = flash ? attention_kind::flash : attention_kind::materialized;
    t.activation_bytes = 1;
    int linear = 0, kept = 0;
    for (const ffn_kind kind : {ffn_kind::dense, ffn_kind::moe}) {
      for (const compute& c : computes_of(kernels_of_layer(t, s, recompute_kind::none, kind))) {
        INFO(c.name);
        CHECK(c.fp8 == !c.bf16_expected);
        (c.fp8 ? linear : kept) += 1;
      }
    }
    CHECK(linear >= 2 * 4 * 3);  // QKV, attention output, MLP up and down: F, B and W, twice
    CHECK(kept >= 2 * 2);        // the attention core's forward and backward, twice
    for (const compute& c : computes_of(kernels_of_head(t, s, 128256))) {
      INFO(c.name);
      CHECK_FALSE(c.fp8);
    }
    // In bf16 nothing is fp8.
    t.activation_bytes = 2;
    for (const compute& c :
         computes_of(kernels_of_layer(t, s, recompute_kind::none, ffn_kind::moe))) {
      INFO(c.name);
      CHECK_FALSE(c.fp8);
    }
  }
}
