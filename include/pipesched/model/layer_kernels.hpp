#pragma once

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

/// The collective of a communication kernel.
enum class collective_kind : std::uint8_t { all_reduce, all_gather, reduce_scatter };
/// The group a collective runs over: the tensor-parallel ranks, or the context-parallel ring.
enum class comm_group : std::uint8_t { tensor, context };

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
};

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
  double d = 0.0;           ///< head size
  double ffn = 0.0;         ///< f / tp: this rank's MLP width
  double mlp_in = 0.0;      ///< the up projection's output width: f/tp (GELU) or 2f/tp (SwiGLU)
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
    ffn = f / tp;
    mlp_in = (t.mlp == mlp_kind::swiglu ? 2.0 : 1.0) * ffn;
  }
};

inline kernel gemm_kernel(std::string_view name, double m, double n, double k, double e) {
  kernel out;
  out.name = name;
  out.kind = kernel_kind::gemm;
  out.flops = 2.0 * m * n * k;
  out.bytes = e * (m * k + k * n + m * n);
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
inline op_kernels kernels_of_layer(const transformer_spec& t,
                                   const layer_shard& s,
                                   recompute_kind recompute) {
  using detail::collective;
  using detail::gemm_kernel;
  using detail::memory_kernel;
  const detail::element_bytes e(t);
  const detail::shard_sizes z(t, s);
  const double T = z.tokens;
  const double Th = z.h_tokens * z.h;  // elements of an h-wide elementwise tensor
  const double stats = detail::norm_stat_bytes(t) * z.h_tokens;
  const bool tp_comm = s.tp > 1;
  const bool sp = s.sequence_parallel && tp_comm;
  const double mask = t.dropout ? e.mask : 0.0;
  // Score elements of the materialized core on this rank: every sequence's full square (the
  // causal mask is applied to it, not skipped).
  const double scores = z.heads * z.squares;
  op_kernels out;

  auto gather_for_gemm = [&](std::vector<kernel>& ops, std::string_view name) {
    if (sp) {
      ops.push_back(collective(name, collective_kind::all_gather, e.linear * T * z.h));
    }
  };
  auto reduce_after_gemm = [&](std::vector<kernel>& ops, std::string_view name) {
    if (sp) {
      ops.push_back(collective(name, collective_kind::reduce_scatter, e.tensor * T * z.h));
    } else if (tp_comm) {
      ops.push_back(collective(name, collective_kind::all_reduce, e.tensor * T * z.h));
    }
  };
  // Forward: the norm reads the residual stream and writes the linear layer's input.
  auto norm_forward = [&](std::vector<kernel>& ops) {
    ops.push_back(memory_kernel("norm", (e.tensor + e.linear) * Th + stats));
  };
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
    k.flops = 4.0 * z.squares * z.q / 2.0;  // QKᵀ and PV, 2·Σ L²·q each; causal: half
    k.bytes = e.tensor * T * (2.0 * z.q + 2.0 * z.kv) + 4.0 * T * z.heads;
    k.ring_bytes = ring;
    return k;
  };
  auto core_forward = [&](std::vector<kernel>& ops) {
    if (t.attention == attention_kind::flash) {
      ops.push_back(flash_forward());
      return;
    }
    kernel qk = gemm_kernel("QKᵀ", 1.0, 1.0, 1.0, 1.0);
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
    pv.bytes = e.tensor * (scores + T * (z.kv + z.q));
    pv.ring_bytes = 0.0;
    ops.push_back(pv);
  };

  // Forward.
  std::vector<kernel>& F = out.forward;
  norm_forward(F);
  gather_for_gemm(F, "SP all-gather (attention)");
  F.push_back(gemm_kernel("QKV", T, z.q + 2.0 * z.kv, z.h, e.linear));
  if (t.position == position_kind::rotary) {
    F.push_back(memory_kernel("rotary", 2.0 * e.tensor * T * (z.q + z.kv)));
  }
  core_forward(F);
  F.push_back(gemm_kernel("attention output", T, z.h, z.q, e.linear));
  reduce_after_gemm(F, "TP reduce (attention)");
  residual_forward(F);
  norm_forward(F);
  gather_for_gemm(F, "SP all-gather (MLP)");
  F.push_back(gemm_kernel("MLP up", T, z.mlp_in, z.h, e.linear));
  F.push_back(memory_kernel(t.mlp == mlp_kind::swiglu ? "SwiGLU" : "GELU",
                            (z.mlp_in / z.ffn * e.tensor + e.linear) * T * z.ffn));
  F.push_back(gemm_kernel("MLP down", T, z.h, z.ffn, e.linear));
  reduce_after_gemm(F, "TP reduce (MLP)");
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
  auto norm_backward = [&](std::vector<kernel>& ops) {
    ops.push_back(memory_kernel("norm backward", 3.0 * e.tensor * Th + stats));
  };
  // The backward of a column-parallel GEMM's input (identity forward, or SP all-gather) is an
  // all-reduce (or a reduce-scatter); that of a row-parallel one (all-reduce, or SP
  // reduce-scatter) nothing (or an all-gather).
  auto column_input_backward = [&](std::vector<kernel>& ops, std::string_view name) {
    if (sp) {
      ops.push_back(collective(name, collective_kind::reduce_scatter, e.tensor * T * z.h));
    } else if (tp_comm) {
      ops.push_back(collective(name, collective_kind::all_reduce, e.tensor * T * z.h));
    }
  };
  auto row_output_backward = [&](std::vector<kernel>& ops, std::string_view name) {
    if (sp) {
      ops.push_back(collective(name, collective_kind::all_gather, e.tensor * T * z.h));
    }
  };
  residual_backward(B);
  row_output_backward(B, "SP all-gather (MLP gradient)");
  B.push_back(gemm_kernel("MLP down dgrad", T, z.ffn, z.h, e.linear));
  B.push_back(memory_kernel(t.mlp == mlp_kind::swiglu ? "SwiGLU backward" : "GELU backward",
                            (t.mlp == mlp_kind::swiglu ? 5.0 : 3.0) * e.tensor * T * z.ffn));
  B.push_back(gemm_kernel("MLP up dgrad", T, z.h, z.mlp_in, e.linear));
  column_input_backward(B, "TP reduce (MLP input gradient)");
  norm_backward(B);
  residual_backward(B);
  row_output_backward(B, "SP all-gather (attention gradient)");
  B.push_back(gemm_kernel("attention output dgrad", T, z.q, z.h, e.linear));
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
    kernel g = gemm_kernel("PV backward", 1.0, 1.0, 1.0, 1.0);
    g.attention_core = true;
    g.flops = 4.0 * scores * z.d;  // dP = dO·Vᵀ and dV = Pᵀ·dO
    g.bytes = e.tensor * (2.0 * scores + T * (2.0 * z.kv + 2.0 * z.q));
    B.push_back(g);
    if (t.dropout) {
      B.push_back(
          memory_kernel("attention dropout backward", (2.0 * e.tensor + e.mask) * scores, true));
    }
    B.push_back(memory_kernel("softmax backward", 3.0 * e.tensor * scores, true));
    kernel g2 = g;
    g2.name = "QKᵀ backward";    // dQ = dS·K and dK = dSᵀ·Q
    g2.ring_bytes = 2.0 * ring;  // dK and dV travel back
    B.push_back(g2);
  }
  if (t.position == position_kind::rotary) {
    B.push_back(memory_kernel("rotary backward", 2.0 * e.tensor * T * (z.q + z.kv)));
  }
  B.push_back(gemm_kernel("QKV dgrad", T, z.h, z.q + 2.0 * z.kv, e.linear));
  column_input_backward(B, "TP reduce (attention input gradient)");
  norm_backward(B);

  // Weight gradients.
  std::vector<kernel>& W = out.backward_weight;
  gather_for_gemm(W, "SP all-gather (MLP up input, again)");
  W.push_back(gemm_kernel("MLP down wgrad", z.ffn, z.h, T, e.linear));
  W.push_back(gemm_kernel("MLP up wgrad", z.h, z.mlp_in, T, e.linear));
  gather_for_gemm(W, "SP all-gather (QKV input, again)");
  W.push_back(gemm_kernel("attention output wgrad", z.q, z.h, T, e.linear));
  W.push_back(gemm_kernel("QKV wgrad", z.h, z.q + 2.0 * z.kv, T, e.linear));
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

/// The kernels of the model's first end for one micro-batch on one rank: the vocabulary-
/// parallel embedding (its rows gathered, the TP slices summed by an all-reduce, or a
/// reduce-scatter with SP), the learned position table added, dropout; W: the embedding's
/// gradient scattered into its fp32 main gradient.
inline op_kernels kernels_of_embedding(const transformer_spec& t, const layer_shard& s) {
  using detail::collective;
  using detail::memory_kernel;
  const detail::element_bytes e(t);
  const detail::shard_sizes z(t, s);
  const double T = z.tokens;
  const double Th = z.h_tokens * z.h;
  op_kernels out;
  out.forward.push_back(memory_kernel("embedding lookup", 2.0 * e.tensor * T * z.h));
  if (s.tp > 1) {
    out.forward.push_back(collective(
        "TP reduce (embedding)",
        s.sequence_parallel ? collective_kind::reduce_scatter : collective_kind::all_reduce,
        e.tensor * T * z.h));
  }
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
  const detail::element_bytes e(t);
  const detail::shard_sizes z(t, s);
  const double T = z.tokens;
  const double Th = z.h_tokens * z.h;
  const double v = static_cast<double>(vocab) / z.tp;
  const double stats = detail::norm_stat_bytes(t) * z.h_tokens;
  const bool sp = s.sequence_parallel && s.tp > 1;
  op_kernels out;
  std::vector<kernel>& F = out.forward;
  F.push_back(memory_kernel("final norm", (e.tensor + e.linear) * Th + stats));
  if (sp) {
    F.push_back(
        collective("SP all-gather (head)", collective_kind::all_gather, e.linear * T * z.h));
  }
  F.push_back(gemm_kernel("LM head", T, v, z.h, e.linear));
  // Cast to fp32 (read e, write 4), maximum (read 4), exponentials of the shifted logits (read
  // 4, write 4) and their sum (read 4).
  F.push_back(memory_kernel("cross-entropy", (e.tensor + 4.0 * 4.0) * T * v));
  if (s.tp > 1) {
    F.push_back(collective("TP reduce (loss)", collective_kind::all_reduce, 3.0 * 4.0 * T));
  }
  std::vector<kernel>& B = out.backward_input;
  B.push_back(memory_kernel("cross-entropy backward", (4.0 + e.tensor) * T * v));
  B.push_back(gemm_kernel("LM head dgrad", T, z.h, v, e.linear));
  if (sp) {
    B.push_back(collective("SP reduce (head gradient)", collective_kind::reduce_scatter,
                           e.tensor * T * z.h));
  } else if (s.tp > 1) {
    B.push_back(
        collective("TP reduce (head gradient)", collective_kind::all_reduce, e.tensor * T * z.h));
  }
  B.push_back(memory_kernel("final norm backward", 3.0 * e.tensor * Th + stats));
  std::vector<kernel>& W = out.backward_weight;
  if (sp) {
    W.push_back(collective("SP all-gather (head input, again)", collective_kind::all_gather,
                           e.linear * T * z.h));
  }
  W.push_back(gemm_kernel("LM head wgrad", z.h, v, T, e.linear));
  W.push_back(memory_kernel("final norm weight gradient", 2.0 * e.tensor * Th));
  return out;
}

}  // namespace pipesched
