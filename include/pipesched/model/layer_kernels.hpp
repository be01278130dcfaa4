#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pipesched/model/transformer_spec.hpp"

// The kernels one rank runs for a transformer layer, the model's two ends and the optimizer
// (docs/model.md §10.2): for each op (F, B, W, R) the GEMMs, the attention core, the
// memory-bound kernels and the collectives, each with the FLOPs and the bytes it moves. The
// planner times them by a roofline (plan/job_costs.hpp); nothing here knows the GPU.

namespace pipesched {

/// What limits a kernel, which decides how it is timed.
enum class kernel_kind : std::uint8_t {
  gemm,          ///< FLOPs / (peak · GEMM efficiency(FLOPs)), at least bytes / HBM bandwidth
  attention,     ///< the flash-attention kernel: FLOPs / (peak · attention efficiency)
  memory_bound,  ///< bytes / (HBM bandwidth · memory efficiency)
  communication  ///< a collective over a group of ranks (ring formulas, model/data_parallel.hpp)
};

/// Where a step's time goes (`plan --json`: seconds by kind per stage).
enum class time_kind : std::uint8_t { gemm, attention, memory_bound, communication };
inline constexpr std::size_t time_kind_count = 4;

constexpr std::string_view to_string(time_kind k) noexcept {
  switch (k) {
    case time_kind::gemm:
      return "gemm";
    case time_kind::attention:
      return "attention";
    case time_kind::memory_bound:
      return "memory_bound";
    case time_kind::communication:
      break;
  }
  return "communication";
}

/// The collective of a communication kernel; all_to_all: the experts' dispatch and combine.
enum class collective_kind : std::uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all };
/// The group a collective runs over: the tensor-parallel ranks, the context-parallel ring, or
/// the expert-parallel ranks.
enum class comm_group : std::uint8_t { tensor, context, expert };

/// Bytes one rank sends in one all-to-all of an MoE layer (the dispatch of the routed tokens to
/// their experts, or the combine back; docs/model.md §10.6): its `tokens`·top_k copies of the
/// h-wide activation at `bytes` each, but the share whose experts are on the rank itself, 1/ep
/// with the experts spread evenly over `ep` ranks: tokens·top_k·h·bytes·(ep − 1)/ep, 0 at ep 1.
inline double expert_all_to_all_bytes(double tokens,
                                      std::uint32_t top_k,
                                      std::uint64_t hidden,
                                      double bytes,
                                      std::uint32_t ep) noexcept {
  if (ep <= 1) {
    return 0.0;
  }
  const auto e = static_cast<double>(ep);
  return tokens * static_cast<double>(top_k) * static_cast<double>(hidden) * bytes * (e - 1.0) / e;
}

/// One kernel of one op for one micro-batch on one rank.
struct kernel {
  std::string_view name;  ///< "qkv", "attention core", "norm", ... (static text)
  kernel_kind kind = kernel_kind::memory_bound;
  double flops = 0.0;  ///< gemm, attention
  /// HBM traffic (compute kinds): what a memory-bound kernel reads and writes, a GEMM's operands
  /// and result (its roofline's memory side). For a collective: the whole tensor's bytes (an
  /// all-reduce's buffer, an all-gather's output, a reduce-scatter's input).
  double bytes = 0.0;
  collective_kind collective = collective_kind::all_reduce;
  comm_group group = comm_group::tensor;
  /// Part of the attention core (for the breakdown by kind: a materialized core's batched
  /// GEMMs, softmax and dropout count as attention).
  bool attention_core = false;
  /// Context parallelism: bytes of K and V this kernel receives around the CP ring while it
  /// computes (the exchange overlaps the attention compute; what it does not hide is exposed).
  double ring_bytes = 0.0;
  /// A GEMM on fp8 operands, timed at the fp8 peak; every other compute kernel runs at the
  /// bf16 peak. FP8 training runs the linear layers in fp8 and keeps the attention core, the
  /// LM head and the MoE router in bf16: Transformer Engine's FP8 covers its linear layers
  /// (dot-product attention only on request), Megatron-Core's output layer is not one of them,
  /// and DeepSeek-V3 (arXiv 2412.19437 §3.3.1) keeps "the embedding module, the output head,
  /// MoE gating modules, normalization operators, and attention operators" in their original
  /// precision.
  bool fp8 = false;
};

/// The kernels of each op of a chunk's piece for one micro-batch on one rank.
struct op_kernels {
  std::vector<kernel> forward, backward_input, backward_weight, recompute;
};

/// The slice of a layer one rank computes for one micro-batch (docs/model.md §10.2).
struct layer_shard {
  token_counts tokens;  ///< the micro-batch's Σ L and Σ L² (all of its sequences, whole)
  std::uint32_t tp = 1;
  std::uint32_t cp = 1;  ///< context parallelism: the rank holds 1/cp of every sequence
  bool sequence_parallel = false;
  /// Expert parallelism: the routed experts spread over `ep` ranks (1: every expert on the
  /// rank, no all-to-all).
  std::uint32_t ep = 1;
  /// The busiest rank's routed token copies over the mean (>= 1; 1: balanced routing): its
  /// experts compute and keep that many times their even share (expert_token_copies).
  double expert_imbalance = 1.0;
};

/// The routed token copies the experts of one rank compute and keep for its `tokens` tokens:
/// routed_token_copies (with expert parallelism each rank receives as many copies as it sends,
/// on average), on the busiest rank: times s.expert_imbalance.
inline double expert_token_copies(const transformer_spec& t, const layer_shard& s, double tokens) {
  return routed_token_copies(t, tokens) * std::max(1.0, s.expert_imbalance);
}

namespace detail {

/// Element sizes: linear layers' inputs at the model's activation_bytes (fp8 keeps them in one
/// byte), everything else at two (bf16) unless the model computes in fp32.
struct element_bytes {
  double linear = 2.0;  ///< a GEMM's operands and the tensors a linear layer keeps
  double tensor = 2.0;  ///< every other activation, and what elementwise kernels move
  double mask = 1.0;    ///< a dropout mask element
  explicit element_bytes(const transformer_spec& t)
      : linear(static_cast<double>(t.activation_bytes)),
        tensor(t.activation_bytes == 4 ? 4.0 : 2.0) {}
};

/// The per-rank sizes of a layer's tensors.
struct shard_sizes {
  double tokens = 0.0;      ///< T: this rank's tokens (Σ L / cp)
  double squares = 0.0;     ///< this rank's share of Σ L² (causal load balance: 1/cp)
  double h_tokens = 0.0;    ///< tokens of the h-wide elementwise tensors: T, or T/tp with SP
  double h = 0.0, f = 0.0;  ///< hidden, ffn
  double q = 0.0;           ///< a·d / tp: this rank's query width
  double kv = 0.0;          ///< k·d / tp: this rank's key (and value) width
  double heads = 0.0;       ///< a / tp
  double d = 0.0;           ///< head size (of a query and a key)
  double dv = 0.0;          ///< a value head's size: d, with MLA v_head_dim
  double ffn = 0.0;         ///< f / tp: this rank's MLP width
  double mlp_in = 0.0;      ///< the up projection's output width: f/tp (GELU) or 2f/tp (SwiGLU)
  double v = 0.0;           ///< a·d / tp (a·v_head_dim / tp with MLA): the output GEMM's input
  double expert_ffn = 0.0;  ///< an expert's width on this rank: expert_ffn / tp
  double tp = 1.0;

  shard_sizes(const transformer_spec& t, const layer_shard& s) {
    const double cp = s.cp == 0 ? 1.0 : static_cast<double>(s.cp);
    tp = s.tp == 0 ? 1.0 : static_cast<double>(s.tp);
    tokens = s.tokens.tokens / cp;
    squares = s.tokens.squares / cp;
    h_tokens = s.sequence_parallel ? tokens / tp : tokens;
    h = static_cast<double>(t.hidden);
    f = static_cast<double>(t.ffn);
    q = t.query_size() / tp;
    kv = t.kv_size() / tp;
    heads = static_cast<double>(t.heads) / tp;
    d = t.query_size() / static_cast<double>(t.heads);
    dv = t.value_size() / static_cast<double>(t.heads);
    ffn = f / tp;
    mlp_in = (t.mlp == mlp_kind::swiglu ? 2.0 : 1.0) * ffn;
    v = t.value_size() / tp;
    expert_ffn = static_cast<double>(t.expert_ffn) / tp;
  }
};

/// An (m × k)·(k × n) GEMM on operands of `e` bytes (1: fp8).
inline kernel gemm_kernel(std::string_view name, double m, double n, double k, double e) {
  kernel out;
  out.name = name;
  out.kind = kernel_kind::gemm;
  out.flops = 2.0 * m * n * k;
  out.bytes = e * (m * k + k * n + m * n);
  out.fp8 = e == 1.0;
  return out;
}

inline kernel memory_kernel(std::string_view name, double bytes, bool core = false) {
  kernel out;
  out.name = name;
  out.kind = kernel_kind::memory_bound;
  out.bytes = bytes;
  out.attention_core = core;
  return out;
}

inline kernel collective(std::string_view name,
                         collective_kind c,
                         double bytes,
                         comm_group g = comm_group::tensor) {
  kernel out;
  out.name = name;
  out.kind = kernel_kind::communication;
  out.bytes = bytes;
  out.collective = c;
  out.group = g;
  return out;
}

/// Bytes of a norm's statistics per token: mean and reciprocal deviation (LayerNorm) or the
/// reciprocal root mean square (RMSNorm), fp32.
inline double norm_stat_bytes(const transformer_spec& t) {
  return t.norm == norm_kind::layernorm ? 8.0 : 4.0;
}

/// What one rank's kernels for one micro-batch are sized by, and the kernels the layer, the
/// embedding and the head have in common.
struct shard_kernels {
  element_bytes e;
  shard_sizes z;
  double T;      ///< this rank's tokens
  double Th;     ///< elements of an h-wide elementwise tensor
  double stats;  ///< bytes of a norm's statistics
  bool tp_comm;  ///< tp > 1
  bool sp;       ///< sequence parallelism (with tp > 1)

  shard_kernels(const transformer_spec& t, const layer_shard& s)
      : e(t),
        z(t, s),
        T(z.tokens),
        Th(z.h_tokens * z.h),
        stats(norm_stat_bytes(t) * z.h_tokens),
        tp_comm(s.tp > 1),
        sp(s.sequence_parallel && tp_comm) {}

  /// A norm reads the residual stream and writes the linear layer's input.
  kernel norm(std::string_view name) const {
    return memory_kernel(name, (e.tensor + e.linear) * Th + stats);
  }
  kernel norm_backward(std::string_view name) const {
    return memory_kernel(name, 3.0 * e.tensor * Th + stats);
  }
  /// With SP, a column-parallel GEMM's input is all-gathered first.
  void gather_for_gemm(std::vector<kernel>& ops, std::string_view name) const {
    if (sp) {
      ops.push_back(collective(name, collective_kind::all_gather, e.linear * T * z.h));
    }
  }
  /// A row-parallel GEMM's output is summed over the TP ranks: an all-reduce, or with SP a
  /// reduce-scatter. The backward of a column-parallel GEMM's input (identity forward, or SP
  /// all-gather) is the same.
  void reduce_after_gemm(std::vector<kernel>& ops, std::string_view name) const {
    if (sp) {
      ops.push_back(collective(name, collective_kind::reduce_scatter, e.tensor * T * z.h));
    } else if (tp_comm) {
      ops.push_back(collective(name, collective_kind::all_reduce, e.tensor * T * z.h));
    }
  }
};

}  // namespace detail

/// The kernels of one transformer layer (docs/model.md §10.2, with the rules of each kernel's
/// FLOPs and bytes): a pre-norm block, attention then MLP, as Megatron-LM and Llama run it.
/// F: norm, [SP all-gather], QKV GEMM, rotary, attention core, output GEMM, [TP all-reduce or
/// SP reduce-scatter], residual add (with bias and dropout), then the same around the MLP
/// (up GEMM, activation, down GEMM). B: every GEMM's input gradient, the core's backward, the
/// elementwise backwards, one collective per F collective. W: every GEMM's weight gradient, the
/// norms' and biases' gradients (and, with SP, the all-gathers the weight gradients of the
/// column-parallel GEMMs need again). R: the forward again (`full`) or the attention core's
/// forward (`selective`).
///
/// With MLA the QKV GEMM is four (the query's down and up projections, the latent's down and
/// its up projection to keys and values), with the two latents' norms between; the down
/// projections are whole on every TP rank. An MoE layer (`kind` moe) replaces the MLP by the
/// router GEMM and its softmax and top-k, the permutation of the T·top_k routed token copies
/// into expert order, the experts' grouped GEMMs over them (every expert on the rank without
/// expert parallelism; with a capacity factor c each expert computes c times its even share,
/// padded), the un-permutation weighting and summing each token's copies, and the shared
/// experts' MLP over all T tokens; with s.ep > 1 an all-to-all before and after the experts.
inline op_kernels kernels_of_layer(const transformer_spec& t,
                                   const layer_shard& s,
                                   recompute_kind recompute,
                                   ffn_kind kind) {
  using detail::collective;
  using detail::gemm_kernel;
  using detail::memory_kernel;
  const detail::shard_kernels shard(t, s);
  const detail::element_bytes& e = shard.e;
  const detail::shard_sizes& z = shard.z;
  const double T = shard.T;
  const double Th = shard.Th;
  const bool sp = shard.sp;
  const double mask = t.dropout ? e.mask : 0.0;
  // Score elements of the materialized core on this rank: every sequence's full square (the
  // causal mask is applied to it, not skipped).
  const double scores = z.heads * z.squares;
  op_kernels out;

  // Output + residual (+ bias) read, sum written, the dropout mask written.
  auto residual_forward = [&](std::vector<kernel>& ops) {
    ops.push_back(memory_kernel(t.dropout ? "bias-dropout-add" : "residual add",
                                3.0 * e.tensor * Th + mask * Th));
  };
  // Every other CP rank's K and V pass this rank once around the ring.
  const double ring =
      s.cp > 1 ? e.tensor * T * 2.0 * z.kv * (static_cast<double>(s.cp) - 1.0) : 0.0;
  auto flash_forward = [&] {
    kernel k;
    k.name = "flash attention";
    k.kind = kernel_kind::attention;
    k.attention_core = true;
    // QKᵀ and PV, 2·Σ L²·q and 2·Σ L²·v (q = v but with MLA); causal: half.
    k.flops = 2.0 * z.squares * (z.q + z.v) / 2.0;
    k.bytes = e.tensor * T * (2.0 * z.q + 2.0 * z.kv) + 4.0 * T * z.heads;
    k.ring_bytes = ring;
    return k;
  };
  auto core_forward = [&](std::vector<kernel>& ops) {
    if (t.attention == attention_kind::flash) {
      ops.push_back(flash_forward());
      return;
    }
    kernel qk = gemm_kernel("QKᵀ", 1.0, 1.0, 1.0, e.tensor);
    qk.flops = 2.0 * scores * z.d;
    qk.bytes = e.tensor * (scores + T * (z.q + z.kv));
    qk.attention_core = true;
    qk.ring_bytes = ring;
    ops.push_back(qk);
    ops.push_back(memory_kernel("softmax", 2.0 * e.tensor * scores, true));
    if (t.dropout) {
      ops.push_back(memory_kernel("attention dropout", (2.0 * e.tensor + e.mask) * scores, true));
    }
    kernel pv = qk;
    pv.name = "PV";
    pv.flops = 2.0 * scores * z.dv;
    pv.bytes = e.tensor * (scores + T * (z.kv + z.q));
    pv.ring_bytes = 0.0;
    ops.push_back(pv);
  };

  // Forward.
  std::vector<kernel>& F = out.forward;
  F.push_back(shard.norm("norm"));
  shard.gather_for_gemm(F, "SP all-gather (attention)");
  // MLA's sizes: the two latents (whole on each rank) and the keys' and values' up projection.
  const auto q_rank = static_cast<double>(t.q_lora_rank);
  const double kv_latent = static_cast<double>(t.kv_lora_rank + t.qk_rope_head_dim);
  const auto kv_rank = static_cast<double>(t.kv_lora_rank);
  const double kv_up = 2.0 * z.kv - static_cast<double>(t.qk_rope_head_dim) * z.heads;
  auto latent_norm = [&](std::vector<kernel>& ops, std::string_view name, double width) {
    ops.push_back(memory_kernel(name, 2.0 * e.linear * T * width + 4.0 * T));
  };
  if (t.mla) {
    F.push_back(gemm_kernel("MLA q down", T, q_rank, z.h, e.linear));
    latent_norm(F, "MLA q norm", q_rank);
    F.push_back(gemm_kernel("MLA q up", T, z.q, q_rank, e.linear));
    F.push_back(gemm_kernel("MLA kv down", T, kv_latent, z.h, e.linear));
    latent_norm(F, "MLA kv norm", kv_rank);
    F.push_back(gemm_kernel("MLA kv up", T, kv_up, kv_rank, e.linear));
  } else {
    F.push_back(gemm_kernel("QKV", T, z.q + 2.0 * z.kv, z.h, e.linear));
  }
  if (t.position == position_kind::rotary) {
    F.push_back(memory_kernel("rotary", 2.0 * e.tensor * T * (z.q + z.kv)));
  }
  core_forward(F);
  F.push_back(gemm_kernel("attention output", T, z.h, z.v, e.linear));
  shard.reduce_after_gemm(F, "TP reduce (attention)");
  residual_forward(F);
  F.push_back(shard.norm("norm"));
  shard.gather_for_gemm(F, "SP all-gather (MLP)");
  const bool moe = kind == ffn_kind::moe && t.is_moe();
  // The MoE block's sizes: R routed token copies (c·T·top_k with a capacity factor c), the
  // experts' widths, and the bytes of all E experts' weights a grouped GEMM reads.
  const double routed_tokens = routed_token_copies(t, T);
  const double expert_tokens = expert_token_copies(t, s, T);  // what this rank's experts compute
  const double gate = t.mlp == mlp_kind::swiglu ? 2.0 : 1.0;
  const auto experts = static_cast<double>(t.experts);
  const double shared_ffn = static_cast<double>(t.shared_experts) * z.expert_ffn;
  const double a2a = e.tensor * expert_all_to_all_bytes(T, t.top_k, t.hidden, 1.0, s.ep);
  auto expert_gemm = [&](std::string_view name, double m, double n, double k, double weights) {
    kernel g = gemm_kernel(name, m, n, k, e.linear);
    g.bytes += e.linear * weights * (experts / (s.ep == 0 ? 1.0 : s.ep) - 1.0);
    return g;
  };
  auto all_to_all = [&](std::vector<kernel>& ops, std::string_view name) {
    if (s.ep > 1) {
      ops.push_back(collective(name, collective_kind::all_to_all, a2a, comm_group::expert));
    }
  };
  auto activation_kernel = [&](std::vector<kernel>& ops, double tokens, double width) {
    ops.push_back(memory_kernel(t.mlp == mlp_kind::swiglu ? "SwiGLU" : "GELU",
                                (gate * e.tensor + e.linear) * tokens * width));
  };
  // A tensor-parallel MLP of `width` over the T tokens, the dense one or the shared experts':
  // the up GEMM (gate·width wide), the activation, the down GEMM. Its kernels' names, static
  // text as kernel::name views:
  struct mlp_names {
    std::string_view up, down, down_dgrad, up_dgrad, down_wgrad, up_wgrad;
  };
  static constexpr mlp_names dense_mlp{"MLP up",       "MLP down",       "MLP down dgrad",
                                       "MLP up dgrad", "MLP down wgrad", "MLP up wgrad"};
  static constexpr mlp_names shared_mlp{"shared experts up",         "shared experts down",
                                        "shared experts down dgrad", "shared experts up dgrad",
                                        "shared experts down wgrad", "shared experts up wgrad"};
  auto mlp_forward = [&](const mlp_names& name, double width) {
    F.push_back(gemm_kernel(name.up, T, gate * width, z.h, e.linear));
    activation_kernel(F, T, width);
    F.push_back(gemm_kernel(name.down, T, z.h, width, e.linear));
  };
  if (moe) {
    F.push_back(gemm_kernel("router", T, experts, z.h, e.tensor));
    // The router's scores in fp32, their softmax (or sigmoid) and the top-k choice.
    F.push_back(memory_kernel("router top-k", (e.tensor + 2.0 * 4.0) * T * experts));
    // Each token's input copied top_k times into expert order (with the indices, 4 bytes each).
    F.push_back(
        memory_kernel("permute", e.linear * T * z.h + (e.linear * z.h + 4.0) * routed_tokens));
    all_to_all(F, "EP all-to-all (dispatch)");
    F.push_back(expert_gemm("experts up", expert_tokens, gate * z.expert_ffn, z.h,
                            z.h * gate * z.expert_ffn));
    activation_kernel(F, expert_tokens, z.expert_ffn);
    F.push_back(expert_gemm("experts down", expert_tokens, z.h, z.expert_ffn, z.expert_ffn * z.h));
    all_to_all(F, "EP all-to-all (combine)");
    // Each token's copies read back, weighted by their router probabilities and summed.
    F.push_back(memory_kernel("unpermute",
                              e.tensor * (routed_tokens * z.h + T * z.h) + 4.0 * routed_tokens));
    if (shared_ffn > 0.0) {
      mlp_forward(shared_mlp, shared_ffn);
    }
  } else {
    mlp_forward(dense_mlp, z.ffn);
  }
  shard.reduce_after_gemm(F, "TP reduce (MLP)");
  residual_forward(F);

  // Input gradients, in backward order.
  std::vector<kernel>& B = out.backward_input;
  auto residual_backward = [&](std::vector<kernel>& ops) {
    if (t.dropout) {
      ops.push_back(memory_kernel("dropout backward", (2.0 * e.tensor + e.mask) * Th));
    }
    // The residual stream's gradient and the block's meet where the stream forks: read two,
    // write one.
    ops.push_back(memory_kernel("residual gradient", 3.0 * e.tensor * Th));
  };
  // The backward of a column-parallel GEMM's input is reduce_after_gemm's collective; that of a
  // row-parallel one's output (all-reduce, or SP reduce-scatter) nothing (or an all-gather).
  auto row_output_backward = [&](std::vector<kernel>& ops, std::string_view name) {
    if (sp) {
      ops.push_back(collective(name, collective_kind::all_gather, e.tensor * T * z.h));
    }
  };
  auto activation_backward = [&](std::vector<kernel>& ops, double tokens, double width) {
    ops.push_back(
        memory_kernel(t.mlp == mlp_kind::swiglu ? "SwiGLU backward" : "GELU backward",
                      (t.mlp == mlp_kind::swiglu ? 5.0 : 3.0) * e.tensor * tokens * width));
  };
  auto mlp_backward = [&](const mlp_names& name, double width) {
    B.push_back(gemm_kernel(name.down_dgrad, T, width, z.h, e.linear));
    activation_backward(B, T, width);
    B.push_back(gemm_kernel(name.up_dgrad, T, z.h, gate * width, e.linear));
  };
  residual_backward(B);
  row_output_backward(B, "SP all-gather (MLP gradient)");
  if (moe) {
    if (shared_ffn > 0.0) {
      mlp_backward(shared_mlp, shared_ffn);
    }
    // The combine's backward: the gradient copied to each token's top_k copies, and the
    // router probabilities' gradient (a dot product per copy).
    B.push_back(
        memory_kernel("unpermute backward",
                      e.tensor * (T * z.h + 2.0 * routed_tokens * z.h) + 4.0 * routed_tokens));
    all_to_all(B, "EP all-to-all (combine gradient)");
    B.push_back(
        expert_gemm("experts down dgrad", expert_tokens, z.expert_ffn, z.h, z.expert_ffn * z.h));
    activation_backward(B, expert_tokens, z.expert_ffn);
    B.push_back(expert_gemm("experts up dgrad", expert_tokens, z.h, gate * z.expert_ffn,
                            z.h * gate * z.expert_ffn));
    all_to_all(B, "EP all-to-all (dispatch gradient)");
    B.push_back(memory_kernel("permute backward", e.tensor * (routed_tokens * z.h + T * z.h)));
    B.push_back(memory_kernel("router top-k backward", (4.0 * 2.0 + e.tensor) * T * experts));
    B.push_back(gemm_kernel("router dgrad", T, z.h, experts, e.tensor));
  } else {
    mlp_backward(dense_mlp, z.ffn);
  }
  shard.reduce_after_gemm(B, "TP reduce (MLP input gradient)");
  B.push_back(shard.norm_backward("norm backward"));
  residual_backward(B);
  row_output_backward(B, "SP all-gather (attention gradient)");
  B.push_back(gemm_kernel("attention output dgrad", T, z.v, z.h, e.linear));
  if (t.attention == attention_kind::flash) {
    kernel k = flash_forward();
    // FlashAttention-2 (arXiv 2307.08691 §3.1): the backward does 2.5 times the forward's
    // matmul FLOPs (five matmuls against two, the scores recomputed); reads Q, K, V, O, dO and
    // the log-sum-exp, writes dQ, dK, dV; with CP dK and dV travel back around the ring.
    k.name = "flash attention backward";
    k.flops *= 2.5;
    k.bytes = e.tensor * T * (3.0 * z.q + 4.0 * z.kv) + 4.0 * T * z.heads;
    k.ring_bytes *= 2.0;
    B.push_back(k);
  } else {
    kernel g = gemm_kernel("PV backward", 1.0, 1.0, 1.0, e.tensor);
    g.attention_core = true;
    g.flops = 4.0 * scores * z.dv;  // dP = dO·Vᵀ and dV = Pᵀ·dO
    g.bytes = e.tensor * (2.0 * scores + T * (2.0 * z.kv + 2.0 * z.q));
    B.push_back(g);
    if (t.dropout) {
      B.push_back(
          memory_kernel("attention dropout backward", (2.0 * e.tensor + e.mask) * scores, true));
    }
    B.push_back(memory_kernel("softmax backward", 3.0 * e.tensor * scores, true));
    kernel g2 = g;
    g2.name = "QKᵀ backward";  // dQ = dS·K and dK = dSᵀ·Q
    g2.flops = 4.0 * scores * z.d;
    g2.ring_bytes = 2.0 * ring;  // dK and dV travel back
    B.push_back(g2);
  }
  if (t.position == position_kind::rotary) {
    B.push_back(memory_kernel("rotary backward", 2.0 * e.tensor * T * (z.q + z.kv)));
  }
  if (t.mla) {
    B.push_back(gemm_kernel("MLA kv up dgrad", T, kv_rank, kv_up, e.linear));
    B.push_back(memory_kernel("MLA kv norm backward", 3.0 * e.tensor * T * kv_rank + 4.0 * T));
    B.push_back(gemm_kernel("MLA kv down dgrad", T, z.h, kv_latent, e.linear));
    B.push_back(gemm_kernel("MLA q up dgrad", T, q_rank, z.q, e.linear));
    B.push_back(memory_kernel("MLA q norm backward", 3.0 * e.tensor * T * q_rank + 4.0 * T));
    B.push_back(gemm_kernel("MLA q down dgrad", T, z.h, q_rank, e.linear));
  } else {
    B.push_back(gemm_kernel("QKV dgrad", T, z.h, z.q + 2.0 * z.kv, e.linear));
  }
  shard.reduce_after_gemm(B, "TP reduce (attention input gradient)");
  B.push_back(shard.norm_backward("norm backward"));

  // Weight gradients.
  std::vector<kernel>& W = out.backward_weight;
  auto mlp_weight = [&](const mlp_names& name, double width) {
    W.push_back(gemm_kernel(name.down_wgrad, width, z.h, T, e.linear));
    W.push_back(gemm_kernel(name.up_wgrad, z.h, gate * width, T, e.linear));
  };
  shard.gather_for_gemm(W, "SP all-gather (MLP up input, again)");
  if (moe) {
    // Each expert's weight gradient over the token copies routed to it: one grouped GEMM.
    W.push_back(
        expert_gemm("experts down wgrad", z.expert_ffn, z.h, expert_tokens, z.expert_ffn * z.h));
    W.push_back(expert_gemm("experts up wgrad", z.h, gate * z.expert_ffn, expert_tokens,
                            z.h * gate * z.expert_ffn));
    if (shared_ffn > 0.0) {
      mlp_weight(shared_mlp, shared_ffn);
    }
    W.push_back(gemm_kernel("router wgrad", z.h, experts, T, e.tensor));
  } else {
    mlp_weight(dense_mlp, z.ffn);
  }
  shard.gather_for_gemm(W, "SP all-gather (QKV input, again)");
  W.push_back(gemm_kernel("attention output wgrad", z.v, z.h, T, e.linear));
  if (t.mla) {
    W.push_back(gemm_kernel("MLA kv up wgrad", kv_rank, kv_up, T, e.linear));
    W.push_back(gemm_kernel("MLA kv down wgrad", z.h, kv_latent, T, e.linear));
    W.push_back(gemm_kernel("MLA q up wgrad", q_rank, z.q, T, e.linear));
    W.push_back(gemm_kernel("MLA q down wgrad", z.h, q_rank, T, e.linear));
  } else {
    W.push_back(gemm_kernel("QKV wgrad", z.h, z.q + 2.0 * z.kv, T, e.linear));
  }
  // Each norm's weight (and bias) gradient reads its normalised input and output gradient.
  W.push_back(memory_kernel("norm weight gradients", 2.0 * 2.0 * e.tensor * Th));
  if (t.bias) {
    // A bias gradient sums its GEMM's output gradient over the tokens.
    W.push_back(
        memory_kernel("bias gradients", e.tensor * T * (z.q + 2.0 * z.kv + z.mlp_in + 2.0 * z.h)));
  }

  // Recomputation.
  switch (recompute) {
    case recompute_kind::none:
      break;
    case recompute_kind::selective:
      core_forward(out.recompute);
      break;
    case recompute_kind::full:
      out.recompute = F;
      break;
  }
  return out;
}

/// kernels_of_layer of a layer of the kind most of the model's layers are (MoE when it has
/// experts).
inline op_kernels kernels_of_layer(const transformer_spec& t,
                                   const layer_shard& s,
                                   recompute_kind recompute) {
  return kernels_of_layer(t, s, recompute, t.is_moe() ? ffn_kind::moe : ffn_kind::dense);
}

/// The kernels of the model's first end for one micro-batch on one rank: the vocabulary-
/// parallel embedding (its rows gathered, the TP slices summed by an all-reduce, or a
/// reduce-scatter with SP), the learned position table added, dropout; W: the embedding's
/// gradient scattered into its fp32 main gradient.
inline op_kernels kernels_of_embedding(const transformer_spec& t, const layer_shard& s) {
  using detail::memory_kernel;
  const detail::shard_kernels shard(t, s);
  const detail::element_bytes& e = shard.e;
  const detail::shard_sizes& z = shard.z;
  const double T = shard.T;
  const double Th = shard.Th;
  op_kernels out;
  out.forward.push_back(memory_kernel("embedding lookup", 2.0 * e.tensor * T * z.h));
  shard.reduce_after_gemm(out.forward, "TP reduce (embedding)");
  if (t.position == position_kind::learned) {
    out.forward.push_back(memory_kernel("position embedding", 3.0 * e.tensor * Th));
  }
  if (t.dropout) {
    out.forward.push_back(memory_kernel("embedding dropout", (2.0 * e.tensor + e.mask) * Th));
    out.backward_input.push_back(
        memory_kernel("embedding dropout backward", (2.0 * e.tensor + e.mask) * Th));
  }
  out.backward_weight.push_back(
      memory_kernel("embedding gradient", (e.tensor + 2.0 * 4.0) * T * z.h));
  return out;
}

/// The kernels of the model's last end for one micro-batch on one rank, `vocab` the padded
/// vocabulary: the final norm, the LM head's GEMMs (vocabulary-parallel: V/tp columns a rank)
/// and the cross-entropy over the vocabulary, in fp32 (Megatron-LM's vocabulary-parallel loss:
/// the logits cast, their maximum, the shifted exponentials and their sum, read and written
/// over the T × V/tp logits, with three small all-reduces of a value per token; its backward
/// reads the kept softmax and writes the logits' gradient).
inline op_kernels kernels_of_head(const transformer_spec& t,
                                  const layer_shard& s,
                                  std::uint64_t vocab) {
  using detail::collective;
  using detail::gemm_kernel;
  using detail::memory_kernel;
  const detail::shard_kernels shard(t, s);
  const detail::element_bytes& e = shard.e;
  const detail::shard_sizes& z = shard.z;
  const double T = shard.T;
  const double v = static_cast<double>(vocab) / z.tp;
  op_kernels out;
  std::vector<kernel>& F = out.forward;
  F.push_back(shard.norm("final norm"));
  shard.gather_for_gemm(F, "SP all-gather (head)");
  F.push_back(gemm_kernel("LM head", T, v, z.h, e.tensor));
  // Cast to fp32 (read e, write 4), maximum (read 4), exponentials of the shifted logits (read
  // 4, write 4) and their sum (read 4).
  F.push_back(memory_kernel("cross-entropy", (e.tensor + 4.0 * 4.0) * T * v));
  if (s.tp > 1) {
    F.push_back(collective("TP reduce (loss)", collective_kind::all_reduce, 3.0 * 4.0 * T));
  }
  std::vector<kernel>& B = out.backward_input;
  B.push_back(memory_kernel("cross-entropy backward", (4.0 + e.tensor) * T * v));
  B.push_back(gemm_kernel("LM head dgrad", T, z.h, v, e.tensor));
  shard.reduce_after_gemm(B, shard.sp ? "SP reduce (head gradient)" : "TP reduce (head gradient)");
  B.push_back(shard.norm_backward("final norm backward"));
  std::vector<kernel>& W = out.backward_weight;
  shard.gather_for_gemm(W, "SP all-gather (head input, again)");
  W.push_back(gemm_kernel("LM head wgrad", z.h, v, T, e.tensor));
  W.push_back(memory_kernel("final norm weight gradient", 2.0 * e.tensor * shard.Th));
  return out;
}

}  // namespace pipesched
