#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "pipesched/model/layer_kernels.hpp"
#include "pipesched/model/transformer_spec.hpp"

// What a transformer layer keeps from its forward for its backward, tensor by tensor
// (docs/model.md §10.3), derived from the layer's structure: the planner's default activation
// model. Megatron-LM's estimator (Korthikanti et al.'s formula, activation_bytes_of_layer in
// transformer_spec.hpp) stays selectable.

namespace pipesched {

/// One tensor the backward needs, on one rank, for one micro-batch.
struct kept_tensor {
  std::string_view name;
  double bytes = 0.0;
  /// The attention core's: not kept under selective recomputation (recomputed instead).
  bool core = false;
  /// An operand of a weight-gradient GEMM (kept from B to W under a split backward).
  bool weight_operand = false;
};

/// The tensors one layer keeps for its backward (bf16 = 2 bytes; with activation_bytes 1 the
/// linear layers' inputs in one byte, as Transformer Engine's FP8 recipe keeps them), split by
/// tensor parallelism (and the h-wide ones by sequence parallelism), each rank 1/cp of the
/// tokens with context parallelism:
///  - the attention block: the norm's input (the residual stream) and output (the QKV GEMM's
///    input) and its statistics; Q, K and V after rotary (K and V k·d wide under GQA); the
///    core's own: flash attention keeps its output and the log-sum-exp (fp32, one per head and
///    token), the materialized core the softmax output and, with dropout, the mask and the
///    dropped-out probabilities; the attention output (the output GEMM's input); the dropout
///    mask after the block;
///  - the MLP block: the norm's input and output and statistics; GELU's input, or SwiGLU's gate
///    and up outputs; the activation's output (the down GEMM's input); the dropout mask.
/// With memory-efficient norms (transformer_spec::memory_efficient_norm) no norm's input is kept:
/// its backward reads its output, which the next GEMM keeps (when that GEMM keeps an fp8 copy,
/// the norm keeps its output in two bytes instead: the same bytes as its input).
/// With MLA the two latents (the up projections' inputs, whole on each rank) and their norms'
/// inputs are kept too. An MoE layer (`kind` moe) keeps, instead of the MLP's, the router's
/// probabilities (fp32, T·E) and its choices, the R = T·top_k routed copies of the experts'
/// input (c·T·top_k with a capacity factor c), the experts' gate and up outputs and activation
/// output over those R copies, the experts' output copies (what the combine's backward weighs),
/// and the shared experts' tensors over the T tokens.
inline std::vector<kept_tensor> tensors_of_layer(const transformer_spec& t,
                                                 const layer_shard& s,
                                                 ffn_kind kind) {
  const detail::element_bytes e(t);
  const detail::shard_sizes z(t, s);
  const double T = z.tokens;
  const double Th = z.h_tokens * z.h;
  const double stats = detail::norm_stat_bytes(t) * z.h_tokens;
  std::vector<kept_tensor> out;
  auto keep = [&](std::string_view name, double bytes, bool core = false, bool operand = false) {
    out.push_back(kept_tensor{name, bytes, core, operand});
  };
  // What a norm keeps beside the next GEMM's input: its input; with a memory-efficient norm
  // nothing (its backward reads that GEMM input, its output), or its output in two bytes where
  // the GEMM keeps an fp8 copy.
  auto keep_norm_input = [&](std::string_view input, std::string_view output, double elements) {
    if (!t.memory_efficient_norm) {
      keep(input, e.tensor * elements);
    } else if (e.linear != e.tensor) {
      keep(output, e.tensor * elements);
    }
  };
  keep_norm_input("attention norm input", "attention norm output", Th);
  keep("QKV input", e.linear * Th + stats, false, true);
  if (t.mla) {
    const auto q_rank = static_cast<double>(t.q_lora_rank);
    const auto kv_rank = static_cast<double>(t.kv_lora_rank);
    keep_norm_input("MLA latents' norm inputs", "MLA latents' norm outputs",
                    T * (q_rank + kv_rank));
    keep("MLA latents (up projections' inputs)", e.linear * T * (q_rank + kv_rank), false, true);
  }
  keep("Q, K, V", e.tensor * T * (z.q + 2.0 * z.kv));
  if (t.attention == attention_kind::flash) {
    keep("log-sum-exp", 4.0 * T * z.heads, true);
    // The kernel's output is what its backward reads and the output GEMM's input: one tensor,
    // unless the GEMM keeps an fp8 copy of its own.
    keep("attention output", e.tensor * T * z.v, false, e.linear == e.tensor);
    if (e.linear != e.tensor) {
      keep("attention output (fp8 GEMM input)", e.linear * T * z.v, false, true);
    }
  } else {
    const double scores = z.heads * z.squares;
    keep("softmax output", e.tensor * scores, true);
    if (t.dropout) {
      keep("attention dropout mask", e.mask * scores, true);
      keep("attention probabilities after dropout", e.tensor * scores, true);
    }
    keep("attention output", e.linear * T * z.v, false, true);
  }
  if (t.dropout) {
    keep("attention block dropout mask", e.mask * Th);
  }
  keep_norm_input("MLP norm input", "MLP norm output", Th);
  keep("MLP up input", e.linear * Th + stats, false, true);
  const char* activation_input = t.mlp == mlp_kind::swiglu ? "gate and up outputs" : "GELU input";
  const double gate = t.mlp == mlp_kind::swiglu ? 2.0 : 1.0;
  if (kind == ffn_kind::moe && t.is_moe()) {
    const double routed = routed_token_copies(t, T);
    keep("router probabilities and choices",
         4.0 * T * static_cast<double>(t.experts) + 8.0 * routed);
    // The copies this rank's experts compute (the busiest rank's with an imbalance).
    const double computed = expert_token_copies(t, s, T);
    keep("experts' input copies", e.linear * computed * z.h, false, true);
    keep(activation_input, e.tensor * computed * gate * z.expert_ffn);
    keep("experts down input", e.linear * computed * z.expert_ffn, false, true);
    keep("experts' output copies", e.tensor * computed * z.h);
    if (t.shared_experts != 0) {
      const double shared = static_cast<double>(t.shared_experts) * z.expert_ffn;
      keep(activation_input, e.tensor * T * gate * shared);
      keep("shared experts down input", e.linear * T * shared, false, true);
    }
  } else {
    keep(activation_input, e.tensor * T * z.mlp_in);
    keep("MLP down input", e.linear * T * z.ffn, false, true);
  }
  if (t.dropout) {
    keep("MLP block dropout mask", e.mask * Th);
  }
  return out;
}

/// tensors_of_layer of a layer of the kind most of the model's layers are (MoE when it has
/// experts).
inline std::vector<kept_tensor> tensors_of_layer(const transformer_spec& t, const layer_shard& s) {
  return tensors_of_layer(t, s, t.is_moe() ? ffn_kind::moe : ffn_kind::dense);
}

/// A layer's activation bytes (layer_activation_bytes' four sizes) from its tensor list: `full`
/// every tensor, `without_core` all but the core's, `input` the layer's input (the attention
/// norm's, what full recomputation keeps), `weight_grad` the weight-gradient GEMMs' operands:
/// their inputs (kept from F) and their outputs' gradients (made by B; the row-parallel GEMMs'
/// whole T × h after sequence parallelism's gather), at most `without_core` (the memory model's
/// M_W never above M_B).
/// With experts, the gradients of the expert GEMMs' outputs are over the routed copies.
inline layer_activation_bytes activation_bytes_of_tensors(const transformer_spec& t,
                                                          const layer_shard& s,
                                                          ffn_kind kind) {
  const detail::element_bytes e(t);
  const detail::shard_sizes z(t, s);
  layer_activation_bytes out;
  double operands = 0.0;
  for (const kept_tensor& k : tensors_of_layer(t, s, kind)) {
    out.full += k.bytes;
    out.without_core += k.core ? 0.0 : k.bytes;
    operands += k.weight_operand ? k.bytes : 0.0;
  }
  out.input = e.tensor * z.h_tokens * z.h;
  const double T = z.tokens;
  double ffn_gradients = T * (z.mlp_in + z.h);
  if (kind == ffn_kind::moe && t.is_moe()) {
    const double gate = t.mlp == mlp_kind::swiglu ? 2.0 : 1.0;
    const double routed = expert_token_copies(t, s, T);
    const double shared = static_cast<double>(t.shared_experts) * z.expert_ffn;
    ffn_gradients = routed * (gate * z.expert_ffn + z.h) +
                    (shared > 0.0 ? T * (gate * shared + z.h) : 0.0) +
                    T * static_cast<double>(t.experts);
  }
  const double gradients = e.tensor * (T * (z.q + 2.0 * z.kv + z.h) + ffn_gradients);
  out.weight_grad = std::min(operands + gradients, out.without_core);
  return out;
}

/// activation_bytes_of_tensors of a layer of the kind most of the model's layers are.
inline layer_activation_bytes activation_bytes_of_tensors(const transformer_spec& t,
                                                          const layer_shard& s) {
  return activation_bytes_of_tensors(t, s, t.is_moe() ? ffn_kind::moe : ffn_kind::dense);
}

}  // namespace pipesched
