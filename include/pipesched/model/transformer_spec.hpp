#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "pipesched/ir/error.hpp"

// A dense decoder-only transformer, and what one of its layers weighs, costs and holds
// (docs/model.md §10). The formulas are written here once: the planner (plan/), the
// transformer-derived costs (model/transformer_costs.hpp) and the tests call them.

namespace pipesched {

/// The MLP of a layer: GELU (two matrices, h×f and f×h) or SwiGLU (three: gate and up h×f,
/// down f×h).
enum class mlp_kind : std::uint8_t { gelu, swiglu };
/// The normalisation: LayerNorm (weight and bias) or RMSNorm (weight only).
enum class norm_kind : std::uint8_t { layernorm, rmsnorm };

/// How the attention core runs: `flash` (FlashAttention, Dao et al. arXiv 2205.14135 and
/// 2307.08691: the s×s scores are never stored; the backward recomputes them inside the
/// kernel; the causal mask skips the upper half) or `materialized` (the scores and the softmax
/// written to memory as separate kernels, the full square computed and masked: Megatron-LM
/// before flash attention).
enum class attention_kind : std::uint8_t { flash, materialized };
/// Where the position information comes from: rotary embeddings applied to Q and K in every
/// layer (Llama), or a learned table added to the token embedding once (GPT).
enum class position_kind : std::uint8_t { rotary, learned };

constexpr std::string_view to_string(mlp_kind k) noexcept {
  return k == mlp_kind::gelu ? "gelu" : "swiglu";
}
constexpr std::string_view to_string(norm_kind k) noexcept {
  return k == norm_kind::layernorm ? "layernorm" : "rmsnorm";
}
constexpr std::string_view to_string(attention_kind k) noexcept {
  return k == attention_kind::flash ? "flash" : "materialized";
}
constexpr std::string_view to_string(position_kind k) noexcept {
  return k == position_kind::rotary ? "rotary" : "learned";
}

/// "flash" or "materialized"; nullopt for any other text.
constexpr std::optional<attention_kind> parse_attention_kind(std::string_view s) noexcept {
  for (attention_kind k : {attention_kind::flash, attention_kind::materialized}) {
    if (to_string(k) == s) {
      return k;
    }
  }
  return std::nullopt;
}

/// Activation recomputation of a layer (Korthikanti et al., arXiv 2205.05198): none (every
/// activation kept from the forward to the backward), selective (the attention core's
/// s×s tensors are not kept but recomputed in the backward, as flash attention does), full
/// (only each layer's input is kept; the whole forward runs again before the backward).
enum class recompute_kind : std::uint8_t { none, selective, full };

constexpr std::string_view to_string(recompute_kind k) noexcept {
  switch (k) {
    case recompute_kind::none:
      return "none";
    case recompute_kind::selective:
      return "selective";
    case recompute_kind::full:
      break;
  }
  return "full";
}

/// "none", "selective" or "full"; nullopt for any other text.
constexpr std::optional<recompute_kind> parse_recompute_kind(std::string_view s) noexcept {
  for (recompute_kind k : {recompute_kind::none, recompute_kind::selective, recompute_kind::full}) {
    if (to_string(k) == s) {
      return k;
    }
  }
  return std::nullopt;
}

/// The feed-forward block of a layer: a dense MLP of `ffn`, or a mixture of experts (routed
/// experts, shared experts and a router, docs/model.md §10.6).
enum class ffn_kind : std::uint8_t { dense, moe };

/// Most transformer layers a model may have: over 30 times the deepest published dense model
/// (Llama 3 405B: 126), and what keeps a partition's search (p·layers values) in memory.
inline constexpr std::uint32_t max_model_layers = 4096;

/// A decoder-only transformer (docs/model.md §10), dense unless `experts` is set (a mixture of
/// experts, §10.6). Sizes are counts, not bytes.
struct transformer_spec {
  std::string name;            ///< e.g. "llama3-405b" (free text; presets are in plan/)
  std::uint32_t layers = 0;    ///< L, transformer layers
  std::uint64_t hidden = 0;    ///< h
  std::uint64_t ffn = 0;       ///< f, the MLP's inner size
  std::uint32_t heads = 0;     ///< a, query heads
  std::uint32_t kv_heads = 0;  ///< k, key / value heads (GQA); 0 = heads (multi-head)
  std::uint64_t head_dim = 0;  ///< d, size of one head; 0 = h / a
  std::uint64_t vocab = 0;     ///< V, vocabulary (before padding: padded_vocab())
  mlp_kind mlp = mlp_kind::gelu;
  norm_kind norm = norm_kind::layernorm;
  bool tied_embeddings = false;  ///< the LM head reuses the input embedding's weights
  /// Bytes per activation element: 2 (bf16 / fp16), 1 (fp8) or 4 (fp32); dropout masks stay 1.
  /// With 1, the GEMMs run at the fp8 peak and the linear layers keep their inputs in one byte
  /// (Transformer Engine's FP8 recipe); every other tensor stays in two.
  std::uint32_t activation_bytes = 2;
  attention_kind attention = attention_kind::flash;
  /// Dropout layers (after the embedding, on the attention probabilities, after the attention
  /// and MLP blocks): their 1-byte masks are kept for the backward. Llama has none.
  bool dropout = false;
  /// Biases on the linear layers (GPT, Megatron-LM's default): memory-bound work fused into
  /// the activation and the residual add; no parameters counted (as Megatron's estimator).
  bool bias = false;
  position_kind position = position_kind::rotary;
  /// Norms whose backward reads their output instead of their input (apex's memory-efficient
  /// LayerNorm and RMSNorm, Megatron-LM's --memory-efficient-layer-norm): a layer keeps neither
  /// norm's input, only the output its next GEMM keeps anyway. A stack that frees each pipeline
  /// stage's input (Llama 3, arXiv 2407.21783 §3.3.2) runs such norms: the stage input is what
  /// the first norm reads. false: the norm keeps its input (Transformer Engine, PyTorch).
  bool memory_efficient_norm = false;

  /// Mixture of experts (docs/model.md §10.6; Mixtral, DeepSeek-V3): every layer from
  /// `dense_layers` on replaces its MLP by `experts` routed experts, each token going through
  /// `top_k` of them and through all `shared_experts`, each expert an MLP (of `mlp` kind) of
  /// size `expert_ffn`. 0 experts: a dense model (the other fields then unused and 0).
  std::uint32_t experts = 0;
  std::uint32_t top_k = 0;           ///< routed experts per token
  std::uint64_t expert_ffn = 0;      ///< each expert's inner size (routed and shared alike)
  std::uint32_t shared_experts = 0;  ///< experts every token goes through
  std::uint32_t dense_layers = 0;    ///< leading layers with a dense MLP of `ffn` (DeepSeek-V3: 3)
  /// Tokens an expert takes at most, as a multiple of an even share (T·top_k/E); 0: dropless
  /// (every routed token computed, the default of Megatron-LM and DeepSeek-V3).
  double capacity_factor = 0.0;

  /// Multi-head latent attention (DeepSeek-V2/V3, arXiv 2412.19437 §2.1.1) instead of Q, K,
  /// V and O matrices: the query through a rank-`q_lora_rank` bottleneck, keys and values from
  /// a shared rank-`kv_lora_rank` latent, each head's query and key `qk_nope_head_dim` wide
  /// plus `qk_rope_head_dim` carrying the rotary embedding, its value `v_head_dim`. A flag
  /// beside `attention`, which still says how the core runs (flash or materialized).
  bool mla = false;
  std::uint64_t q_lora_rank = 0;
  std::uint64_t kv_lora_rank = 0;
  std::uint64_t qk_nope_head_dim = 0;
  std::uint64_t qk_rope_head_dim = 0;
  std::uint64_t v_head_dim = 0;

  bool is_moe() const noexcept { return experts != 0; }
  /// Layer i's (from 0) feed-forward block: the leading dense_layers are dense.
  ffn_kind ffn_of_layer(std::uint32_t i) const noexcept {
    return is_moe() && i >= dense_layers ? ffn_kind::moe : ffn_kind::dense;
  }
  /// Layers with a mixture of experts.
  std::uint32_t moe_layers() const noexcept {
    return is_moe() && layers > dense_layers ? layers - dense_layers : 0;
  }
  /// Layers in [first, first + count) of each kind: {dense, moe}.
  std::pair<std::uint32_t, std::uint32_t> layer_kinds(std::uint32_t first,
                                                      std::uint32_t count) const noexcept {
    const std::uint32_t end = first + count;
    const std::uint32_t cut = is_moe() ? std::min(dense_layers, layers) : end;
    const std::uint32_t dense = first >= cut ? 0 : std::min(end, cut) - first;
    return {dense, count - dense};
  }

  std::uint32_t kv() const noexcept { return kv_heads == 0 ? heads : kv_heads; }
  /// Whether tensor parallelism of degree `tp` splits the heads and the KV heads evenly (each
  /// rank whole heads of both): the one rule the planner, its search and pack check.
  bool tp_splits_heads(std::uint64_t tp) const noexcept {
    return tp != 0 && heads % tp == 0 && kv() % tp == 0;
  }
  /// a·d: h unless head_dim is given; with MLA a·(qk_nope_head_dim + qk_rope_head_dim), the
  /// width of the queries and keys.
  double query_size() const noexcept {
    if (mla) {
      return static_cast<double>(heads) * static_cast<double>(qk_nope_head_dim + qk_rope_head_dim);
    }
    return head_dim == 0 ? static_cast<double>(hidden)
                         : static_cast<double>(heads) * static_cast<double>(head_dim);
  }
  /// k·d: h·k/a unless head_dim is given; with MLA the mean of the keys' and the values' widths
  /// (a·(qk_nope + qk_rope + v) / 2), so that K and V together are 2·kv_size() wide.
  double kv_size() const noexcept {
    if (mla) {
      return (query_size() + value_size()) / 2.0;
    }
    return query_size() * static_cast<double>(kv()) / static_cast<double>(heads);
  }
  /// The attention output's width, the output matrix's input: a·d, with MLA a·v_head_dim.
  double value_size() const noexcept {
    return mla ? static_cast<double>(heads) * static_cast<double>(v_head_dim) : query_size();
  }

  /// Throws field_error (who, field, rule) naming the field and the rule, so a reader can
  /// point at the field it came from (the model JSON's pointer).
  void check(std::string_view who = "transformer_spec") const {
    const std::string where(who);
    auto at_least_one = [&](bool ok, const char* field) {
      if (!ok) {
        detail::fail_field(where, field, "must be at least 1");
      }
    };
    at_least_one(layers >= 1, "layers");
    if (layers > max_model_layers) {
      detail::fail_field(where, "layers", layers, " must be at most ", max_model_layers,
                         " (max_model_layers)");
    }
    at_least_one(hidden >= 1, "hidden");
    at_least_one(ffn >= 1, "ffn");
    at_least_one(heads >= 1, "heads");
    at_least_one(vocab >= 1, "vocab");
    if (kv_heads != 0 && heads % kv_heads != 0) {
      detail::fail_field(where, "kv_heads", kv_heads, " must divide heads (", heads, ")");
    }
    // Without head_dim a head is h / a wide: a must divide h (fewer than one element a head,
    // or a fraction of one, is no model).
    if (head_dim == 0 && hidden % heads != 0) {
      detail::fail_field(where, "heads", heads, " must divide hidden (", hidden,
                         ") unless head_dim is given");
    }
    if (activation_bytes != 1 && activation_bytes != 2 && activation_bytes != 4) {
      detail::fail_field(where, "activation_bytes", "must be 1, 2 or 4, not ", activation_bytes);
    }
    if (experts != 0) {
      if (top_k == 0) {
        detail::fail_field(where, "top_k", "must be at least 1 with experts (", experts, ")");
      }
      if (top_k > experts) {
        detail::fail_field(where, "top_k", top_k, " must be at most experts (", experts, ")");
      }
      at_least_one(expert_ffn >= 1, "expert_ffn");
      if (dense_layers > layers) {
        detail::fail_field(where, "dense_layers", dense_layers, " must be at most layers (", layers,
                           ")");
      }
      if (!std::isfinite(capacity_factor) || capacity_factor < 0.0) {
        detail::fail_field(where, "capacity_factor", "must be finite and >= 0 (0: dropless), not ",
                           detail::shortest(capacity_factor));
      }
    } else if (top_k != 0 || expert_ffn != 0 || shared_experts != 0 || dense_layers != 0 ||
               capacity_factor != 0.0) {
      // A typo'd or dropped "experts" would otherwise read as a dense model silently.
      detail::fail_field(where, "experts",
                         "must be at least 1 when top_k, expert_ffn, shared_experts, "
                         "dense_layers or capacity_factor is given");
    }
    if (mla) {
      for (auto [v, field] :
           {std::pair{q_lora_rank, "q_lora_rank"}, std::pair{kv_lora_rank, "kv_lora_rank"},
            std::pair{qk_nope_head_dim, "qk_nope_head_dim"},
            std::pair{qk_rope_head_dim, "qk_rope_head_dim"}, std::pair{v_head_dim, "v_head_dim"}}) {
        if (v == 0) {
          detail::fail_field(where, field, "must be at least 1 with MLA attention");
        }
      }
    }
    // Every count below is a double computed from products of these: keep them exact. Each
    // product is named by the size that is not the hidden width, the one to look at.
    const auto h = static_cast<double>(hidden);
    auto below_2_53 = [&](double product, const char* field, const char* what) {
      if (product >= 9.0e15) {
        detail::fail_field(where, field, "too large: ", what, " (", detail::shortest(product),
                           ") must stay below 2^53");
      }
    };
    below_2_53(h * static_cast<double>(ffn), "ffn", "hidden·ffn");
    below_2_53(h * static_cast<double>(vocab), "vocab", "hidden·vocab");
    below_2_53(h * static_cast<double>(expert_ffn) * static_cast<double>(experts + shared_experts),
               "expert_ffn", "hidden·expert_ffn·(experts + shared_experts)");
    if (!mla) {
      below_2_53(h * query_size(), head_dim != 0 ? "head_dim" : "hidden", "hidden·heads·head_dim");
      return;
    }
    const auto a = static_cast<double>(heads);
    const auto qk = static_cast<double>(qk_nope_head_dim) + static_cast<double>(qk_rope_head_dim);
    const auto kv_width = static_cast<double>(qk_nope_head_dim) + static_cast<double>(v_head_dim);
    below_2_53(h * a * qk,
               qk_nope_head_dim >= qk_rope_head_dim ? "qk_nope_head_dim" : "qk_rope_head_dim",
               "hidden·heads·(qk_nope_head_dim + qk_rope_head_dim)");
    below_2_53(h * a * static_cast<double>(v_head_dim), "v_head_dim", "hidden·heads·v_head_dim");
    below_2_53(static_cast<double>(q_lora_rank) * std::max(h, a * qk), "q_lora_rank",
               "q_lora_rank·max(hidden, heads·(qk_nope_head_dim + qk_rope_head_dim))");
    below_2_53(static_cast<double>(kv_lora_rank) * std::max(h, a * kv_width), "kv_lora_rank",
               "kv_lora_rank·max(hidden, heads·(qk_nope_head_dim + v_head_dim))");
  }
};

/// The token copies an MoE layer's experts compute for `tokens` tokens: tokens·top_k when
/// dropless, c times that with a capacity factor c (each expert padded to its capacity).
inline double routed_token_copies(const transformer_spec& t, double tokens) noexcept {
  return tokens * static_cast<double>(t.top_k) *
         (t.capacity_factor > 0.0 ? t.capacity_factor : 1.0);
}

/// The vocabulary as Megatron-LM pads it: rounded up to a multiple of multiple·tp (multiple
/// 128 by default, `--make-vocab-size-divisible-by`), so every tensor-parallel rank holds an
/// equal slice of the embedding and the LM head.
constexpr std::uint64_t padded_vocab(std::uint64_t vocab,
                                     std::uint32_t tp,
                                     std::uint32_t multiple = 128) noexcept {
  const std::uint64_t step = std::uint64_t{multiple} * (tp == 0 ? 1 : tp);
  return step == 0 ? vocab : (vocab + step - 1) / step * step;
}

/// Parameters of one transformer layer, split by how tensor parallelism holds them.
struct layer_parameters {
  double sharded = 0.0;     ///< attention, MLP and expert matrices: a 1/t slice on each TP rank
  double replicated = 0.0;  ///< norms, the router, MLA's down projections: whole on every rank
  /// The matrices among `replicated` (the router, MLA's down projections): GEMM work.
  double replicated_matrices = 0.0;
  double total() const noexcept { return sharded + replicated; }
  /// What the forward's GEMMs multiply by, per token: 2 FLOPs each.
  double matrices() const noexcept { return sharded + replicated_matrices; }
};

/// One norm: h weights (RMSNorm) or h weights and h biases (LayerNorm).
inline double norm_parameters(const transformer_spec& t) {
  return static_cast<double>(t.hidden) * (t.norm == norm_kind::rmsnorm ? 1.0 : 2.0);
}

namespace detail {

/// The attention block's parameters: Q (h×a·d), K and V (h×k·d each), O (a·d×h); with MLA the
/// query's down (h×q_lora) and up (q_lora×a·(nope + rope)) projections, the shared latent and
/// rotary key (h×(kv_lora + rope)), its up projection to keys and values (kv_lora×a·(nope +
/// v)), O (a·v×h) and the two latents' RMSNorms. The down projections are whole on every TP
/// rank, as Megatron-LM's MLA holds them.
inline layer_parameters attention_parameters(const transformer_spec& t) {
  const auto h = static_cast<double>(t.hidden);
  if (!t.mla) {
    return {h * (t.query_size() + 2.0 * t.kv_size()) + t.value_size() * h, 0.0, 0.0};
  }
  const auto a = static_cast<double>(t.heads);
  const auto q_rank = static_cast<double>(t.q_lora_rank);
  const auto kv_rank = static_cast<double>(t.kv_lora_rank);
  const auto nope = static_cast<double>(t.qk_nope_head_dim);
  const auto rope = static_cast<double>(t.qk_rope_head_dim);
  const auto v = static_cast<double>(t.v_head_dim);
  const double down = h * q_rank + h * (kv_rank + rope);
  const double up = q_rank * a * (nope + rope) + kv_rank * a * (nope + v) + a * v * h;
  return {up, down + q_rank + kv_rank, down};
}

/// One MLP of inner size f: h·f·(2 or 3).
inline double mlp_parameters(const transformer_spec& t, std::uint64_t f) {
  return static_cast<double>(t.hidden) * static_cast<double>(f) *
         (t.mlp == mlp_kind::swiglu ? 3.0 : 2.0);
}

/// A layer's parameters with `routed` of its routed experts counted (E for the total, top_k
/// for what one token activates).
inline layer_parameters layer_parameters_with(const transformer_spec& t,
                                              ffn_kind kind,
                                              double routed) {
  layer_parameters out = attention_parameters(t);
  out.replicated += 2.0 * norm_parameters(t);
  if (kind == ffn_kind::dense || !t.is_moe()) {
    out.sharded += mlp_parameters(t, t.ffn);
    return out;
  }
  // The router: h×E, whole on every rank.
  const double router = static_cast<double>(t.hidden) * static_cast<double>(t.experts);
  out.sharded += (routed + static_cast<double>(t.shared_experts)) * mlp_parameters(t, t.expert_ffn);
  out.replicated += router;
  out.replicated_matrices += router;
  return out;
}

}  // namespace detail

/// A layer's parameters (no biases, as Megatron-LM's own estimator counts them): the attention
/// block (detail::attention_parameters), two norms of h·(1 or 2), and a dense MLP of `ffn`,
/// or E routed and the shared experts of `expert_ffn` each with the router (h×E).
inline layer_parameters parameters_of_layer(const transformer_spec& t, ffn_kind kind) {
  return detail::layer_parameters_with(t, kind, static_cast<double>(t.experts));
}

/// The parameters of a layer of the kind most of the model's layers are (MoE when it has
/// experts).
inline layer_parameters parameters_of_layer(const transformer_spec& t) {
  return parameters_of_layer(t, t.is_moe() ? ffn_kind::moe : ffn_kind::dense);
}

/// The routed experts' share of a layer's parameters (among its `sharded` ones): E MLPs of
/// `expert_ffn` in an MoE layer, 0 in a dense one. Expert parallelism splits them over its
/// ranks, and their gradients reduce over the expert-data-parallel ranks (docs/model.md §10.6).
inline double routed_expert_parameters(const transformer_spec& t, ffn_kind kind) {
  return kind == ffn_kind::moe && t.is_moe()
             ? static_cast<double>(t.experts) * detail::mlp_parameters(t, t.expert_ffn)
             : 0.0;
}

/// The parameters one token goes through in a layer: all but the routed experts it is not
/// sent to (top_k of E).
inline layer_parameters activated_parameters_of_layer(const transformer_spec& t, ffn_kind kind) {
  return detail::layer_parameters_with(t, kind, static_cast<double>(t.top_k));
}

/// The input embedding, or an untied LM head: V_padded × h (split over TP by vocabulary).
inline double embedding_parameters(const transformer_spec& t, std::uint64_t vocab_padded) {
  return static_cast<double>(t.hidden) * static_cast<double>(vocab_padded);
}

/// A whole model's parameters by part (docs/model.md §10.6).
struct model_parameters {
  double embedding = 0.0;  ///< V_padded × h
  double layers = 0.0;     ///< every layer, dense and MoE by kind
  double head = 0.0;       ///< the final norm, and the LM head unless tied
  double total() const noexcept { return embedding + layers + head; }
};

namespace detail {

template <class PerLayer>
model_parameters sum_parameters(const transformer_spec& t,
                                std::uint64_t vocab_padded,
                                PerLayer per_layer) {
  model_parameters out;
  out.embedding = embedding_parameters(t, vocab_padded);
  const std::uint32_t moe = t.moe_layers();
  out.layers = static_cast<double>(t.layers - moe) * per_layer(ffn_kind::dense).total() +
               static_cast<double>(moe) * per_layer(ffn_kind::moe).total();
  out.head = norm_parameters(t) + (t.tied_embeddings ? 0.0 : out.embedding);
  return out;
}

}  // namespace detail

/// Every parameter of the model (`vocab_padded`: padded_vocab's).
inline model_parameters total_parameters(const transformer_spec& t, std::uint64_t vocab_padded) {
  return detail::sum_parameters(t, vocab_padded,
                                [&](ffn_kind k) { return parameters_of_layer(t, k); });
}

/// The parameters one token goes through: the layers' with top_k of the E routed experts, and
/// both ends whole. Conventions differ on the input embedding (a lookup of one row): Mistral's
/// 12.9B for Mixtral counts it, DeepSeek's 36.6B for DeepSeek-V3 (README_WEIGHTS.md) does not;
/// the parts are apart so a caller sums what its source does.
inline model_parameters activated_parameters(const transformer_spec& t,
                                             std::uint64_t vocab_padded) {
  return detail::sum_parameters(t, vocab_padded,
                                [&](ffn_kind k) { return activated_parameters_of_layer(t, k); });
}

/// FLOPs of one op of one layer for one micro-batch (docs/model.md §10), as Megatron-LM's
/// model-FLOPs count has them: a multiply-add is 2 FLOPs; the forward is 2 FLOPs per matrix
/// weight per token (`linear`) plus the attention core (QKᵀ and softmax·V, 2·s·(a·d) each per
/// token, halved by the causal mask: `core`). The backward splits into B, the input
/// gradients (the same GEMMs as the forward again, and the attention core's backward, twice
/// its forward), and W, the weight gradients (the same GEMMs once more, nothing for the core):
/// F = linear + core, B = linear + 2·core, W = linear, so F + B + W = 3·F.
struct layer_flops {
  double linear = 0.0;  ///< matrix FLOPs of the forward: 2·tokens·(sharded parameters)
  double core = 0.0;    ///< attention core FLOPs of the forward
  double forward() const noexcept { return linear + core; }
  double backward_input() const noexcept { return linear + 2.0 * core; }
  double backward_weight() const noexcept { return linear; }
};

/// What one micro-batch's work and memory depend on (docs/model.md §10.1): its sequences of
/// lengths L_i packed together, each attending only within itself (document masking). The
/// linear work, the activations and the transfers grow with the tokens Σ L_i; the attention
/// core with Σ L_i². b sequences of s tokens are the special case s·b and s²·b.
struct token_counts {
  double tokens = 0.0;   ///< Σ L_i
  double squares = 0.0;  ///< Σ L_i²

  /// b sequences of s tokens each: s·b tokens, s²·b squares.
  static token_counts uniform(std::uint64_t sequence, std::uint64_t micro_batch) noexcept {
    const auto s = static_cast<double>(sequence);
    const auto b = static_cast<double>(micro_batch);
    return token_counts{s * b, s * s * b};
  }
  /// Sequences of these lengths packed into one micro-batch.
  static token_counts of(std::span<const std::uint64_t> lengths) noexcept {
    token_counts out;
    for (std::uint64_t l : lengths) {
      const auto x = static_cast<double>(l);
      out.tokens += x;
      out.squares += x * x;
    }
    return out;
  }
};

/// FLOPs of one layer's ops for a micro-batch of `n` tokens: linear = 2·Σ L·(the matrices a
/// token goes through: of an MoE layer the router, the shared and top_k routed experts, as
/// DeepSeek and Megatron-LM count model FLOPs), core = Σ L²·(QKᵀ width + PV width), a·d each
/// (a·(nope + rope) and a·v with MLA), with the causal mask (each sequence its own square,
/// halved), twice that without (`causal` false: the zero-bubble paper's convention,
/// model/transformer_costs.hpp).
inline layer_flops flops_of_layer(const transformer_spec& t,
                                  const token_counts& n,
                                  ffn_kind kind,
                                  bool causal = true) {
  layer_flops out;
  out.linear = 2.0 * n.tokens * activated_parameters_of_layer(t, kind).matrices();
  out.core = (causal ? 1.0 : 2.0) * n.squares * (t.query_size() + t.value_size());
  return out;
}

/// flops_of_layer of a layer of the kind most of the model's layers are (MoE when it has
/// experts).
inline layer_flops flops_of_layer(const transformer_spec& t,
                                  const token_counts& n,
                                  bool causal = true) {
  return flops_of_layer(t, n, t.is_moe() ? ffn_kind::moe : ffn_kind::dense, causal);
}

/// One micro-batch of b sequences of s tokens: flops_of_layer(t, token_counts::uniform(s, b)).
inline layer_flops flops_of_layer(const transformer_spec& t,
                                  std::uint64_t sequence,
                                  std::uint64_t micro_batch,
                                  bool causal = true) {
  return flops_of_layer(t, token_counts::uniform(sequence, micro_batch), causal);
}

/// The forward FLOPs of all the model's layers for a micro-batch of `n` tokens, each layer by
/// its kind (the leading dense ones, then the MoE ones).
inline double layers_forward_flops(const transformer_spec& t, const token_counts& n) {
  const std::uint32_t moe = t.moe_layers();
  return static_cast<double>(t.layers - moe) * flops_of_layer(t, n, ffn_kind::dense).forward() +
         static_cast<double>(moe) * flops_of_layer(t, n, ffn_kind::moe).forward();
}

/// FLOPs of the LM head (the logits) for a micro-batch of `tokens` tokens: 2·tokens·h·V_padded
/// in each of F, B (input gradient) and W (weight gradient). The embedding lookup, the final
/// norm and the loss count nothing, as in Megatron-LM's model FLOPs.
inline double head_flops(const transformer_spec& t, double tokens, std::uint64_t vocab_padded) {
  return 2.0 * tokens * static_cast<double>(t.hidden) * static_cast<double>(vocab_padded);
}

/// head_flops for b sequences of s tokens (s·b tokens).
inline double head_flops(const transformer_spec& t,
                         std::uint64_t sequence,
                         std::uint64_t micro_batch,
                         std::uint64_t vocab_padded) {
  return head_flops(t, token_counts::uniform(sequence, micro_batch).tokens, vocab_padded);
}

/// What one layer keeps for its backward, in bytes, for one micro-batch on one
/// tensor-parallel rank (docs/model.md §10; Korthikanti et al., arXiv 2205.05198, Table 2,
/// with the MLP generalised to f as Megatron-LM's estimator does: its two f-wide tensors
/// whatever the MLP kind). At 2-byte activations, tp = t, sequence parallel off: s·b·h·(10 +
/// (8 + 4f/h)/t) + 5·a·s²·b/t; with sequence parallelism all of it / t. Tensors scale with
/// activation_bytes / 2, the 1-byte dropout masks do not.
struct layer_activation_bytes {
  /// Kept from F to B with no recomputation: everything, the attention core's s×s tensors
  /// (softmax output, its dropout mask and output: (2e + 1)·a·s²·b / t) included.
  double full = 0.0;
  /// Kept with the attention core recomputed (selective recompute): `full` without the core.
  double without_core = 0.0;
  /// The layer's input alone (e·s·b·h, / t with sequence parallelism): what full recompute
  /// keeps.
  double input = 0.0;
  /// Kept from B to W: each matrix's input and output gradient (docs/model.md §10), the
  /// weight-gradient GEMMs' operands; 32·s·b·h at 2 bytes for f = 4h, k = a, t = 1 (the
  /// zero-bubble paper's M_W). Never above without_core.
  double weight_grad = 0.0;
};

/// What one layer keeps for a micro-batch of `n` tokens: the terms above with s·b = Σ L and the
/// attention core's s²·b = Σ L² (document masking: each sequence's own s×s tensors).
inline layer_activation_bytes activation_bytes_of_layer(const transformer_spec& t,
                                                        const token_counts& n,
                                                        std::uint32_t tp,
                                                        bool sequence_parallel) {
  const double tpd = tp == 0 ? 1.0 : static_cast<double>(tp);
  const auto h = static_cast<double>(t.hidden);
  const auto f = static_cast<double>(t.ffn);
  const auto a = static_cast<double>(t.heads);
  const double q = t.query_size();
  const double kv = t.kv_size();
  const auto e = static_cast<double>(t.activation_bytes);
  const double sbh = n.tokens * h;
  // Tensors every TP rank holds whole unless the sequence is split too: the two norms' inputs,
  // the QKV and first MLP matrices' inputs (4 tensors), and the two 1-byte dropout masks.
  const double whole = 4.0 * e * sbh + 2.0 * sbh;
  // Tensors split over TP: Q, K, V, the attention output, the MLP's two f-wide tensors.
  const double split = e * sbh * (4.0 + 2.0 * f / h);
  const double core = (2.0 * e + 1.0) * a * n.squares;
  const double whole_div = sequence_parallel ? tpd : 1.0;
  layer_activation_bytes out;
  out.without_core = whole / whole_div + split / tpd;
  out.full = out.without_core + core / tpd;
  out.input = e * sbh / whole_div;
  // W's operands: the inputs of QKV and the first MLP matrix and the output gradients of O and
  // the second MLP matrix are h-wide and whole on each rank without sequence parallelism; the
  // output gradients of QKV and the first MLP matrix and the inputs of O and the second are
  // split.
  const double w_whole = 4.0 * e * sbh;
  const double w_split = e * n.tokens * (q + 2.0 * kv + q + 2.0 * f);
  // Megatron's activation terms take a·d = h; only a·d > h could put W's operands above them.
  out.weight_grad = std::min(w_whole / whole_div + w_split / tpd, out.without_core);
  return out;
}

/// One micro-batch of b sequences of s tokens: activation_bytes_of_layer(t,
/// token_counts::uniform(s, b), ...).
inline layer_activation_bytes activation_bytes_of_layer(const transformer_spec& t,
                                                        std::uint64_t sequence,
                                                        std::uint64_t micro_batch,
                                                        std::uint32_t tp,
                                                        bool sequence_parallel) {
  return activation_bytes_of_layer(t, token_counts::uniform(sequence, micro_batch), tp,
                                   sequence_parallel);
}

}  // namespace pipesched
