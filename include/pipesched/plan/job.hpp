#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/model/efficiency_curve.hpp"
#include "pipesched/model/transformer_spec.hpp"

// What a training job is, in the user's terms (docs/model.md §10): the model, the GPUs, the
// batch, and how a layout cuts them (tensor, pipeline and data parallelism, micro-batches).

namespace pipesched {

/// The built-in models (`pipesched plan --model NAME`): Llama 3 8B / 70B / 405B (arXiv
/// 2407.21783, Table 3), GPT-3 175B (arXiv 2005.14165, Table 2.1), DeepSeek-V3 (arXiv
/// 2412.19437 and its config.json, without the multi-token-prediction module) and Mixtral
/// 8x7B (arXiv 2401.04088 and its config.json); each value's source in docs/model.md §10.6.
inline std::span<const transformer_spec> model_presets() {
  static const std::array<transformer_spec, 6> presets = [] {
    std::array<transformer_spec, 6> p{};
    auto llama = [](std::string name, std::uint32_t layers, std::uint64_t hidden, std::uint64_t ffn,
                    std::uint32_t heads) {
      transformer_spec t;
      t.name = std::move(name);
      t.layers = layers;
      t.hidden = hidden;
      t.ffn = ffn;
      t.heads = heads;
      t.kv_heads = 8;
      t.vocab = 128256;
      t.mlp = mlp_kind::swiglu;
      t.norm = norm_kind::rmsnorm;
      t.tied_embeddings = false;
      t.attention = attention_kind::flash;  // Meta's stack; no dropout, no biases, rotary
      return t;
    };
    p[0] = llama("llama3-8b", 32, 4096, 14336, 32);
    p[1] = llama("llama3-70b", 80, 8192, 28672, 64);
    p[2] = llama("llama3-405b", 126, 16384, 53248, 128);
    transformer_spec gpt;
    gpt.name = "gpt3-175b";
    gpt.layers = 96;
    gpt.hidden = 12288;
    gpt.ffn = 4 * 12288;
    gpt.heads = 96;
    gpt.vocab = 51200;
    gpt.mlp = mlp_kind::gelu;
    gpt.norm = norm_kind::layernorm;
    gpt.tied_embeddings = true;
    // As Megatron-LM ran it in 2020-22: scores materialized, dropout, biases, learned positions.
    gpt.attention = attention_kind::materialized;
    gpt.dropout = true;
    gpt.bias = true;
    gpt.position = position_kind::learned;
    p[3] = gpt;
    transformer_spec ds;
    ds.name = "deepseek-v3";
    ds.layers = 61;
    ds.hidden = 7168;
    ds.ffn = 18432;  // the leading dense layers' MLP
    ds.heads = 128;
    ds.vocab = 129280;
    ds.mlp = mlp_kind::swiglu;
    ds.norm = norm_kind::rmsnorm;
    ds.tied_embeddings = false;
    ds.experts = 256;
    ds.top_k = 8;
    ds.expert_ffn = 2048;
    ds.shared_experts = 1;
    ds.dense_layers = 3;
    ds.mla = true;
    ds.q_lora_rank = 1536;
    ds.kv_lora_rank = 512;
    ds.qk_nope_head_dim = 128;
    ds.qk_rope_head_dim = 64;
    ds.v_head_dim = 128;
    p[4] = ds;
    transformer_spec mx;
    mx.name = "mixtral-8x7b";
    mx.layers = 32;
    mx.hidden = 4096;
    mx.ffn = 14336;  // unused: every layer is MoE
    mx.heads = 32;
    mx.kv_heads = 8;
    mx.vocab = 32000;
    mx.mlp = mlp_kind::swiglu;
    mx.norm = norm_kind::rmsnorm;
    mx.tied_embeddings = false;
    mx.experts = 8;
    mx.top_k = 2;
    mx.expert_ffn = 14336;
    p[5] = mx;
    return p;
  }();
  return presets;
}

namespace detail {

/// The presets' names, "a, b, c" (in the order they are listed).
template <class Spec>
std::string preset_names(std::span<const Spec> presets) {
  std::string out;
  for (const Spec& p : presets) {
    out += (out.empty() ? "" : ", ") + p.name;
  }
  return out;
}

/// The preset named `name` in `presets` (anything with a `name`); otherwise throws
/// invalid_argument "unknown <what> "<name>" (presets: <names>, or a <what> JSON file)" (model
/// and cluster alike: `file` says which file the CLI takes instead).
template <class Spec>
const Spec& preset_named(std::span<const Spec> presets,
                         std::string_view name,
                         std::string_view what,
                         std::string_view file) {
  for (const Spec& p : presets) {
    if (p.name == name) {
      return p;
    }
  }
  detail::fail("unknown ", what, " \"", name, "\" (presets: ", preset_names(presets), ", or a ",
               file, " JSON file)");
}

}  // namespace detail

/// A preset by name; throws invalid_argument listing the known names.
inline const transformer_spec& model_preset(std::string_view name) {
  return detail::preset_named(model_presets(), name, "model", "model");
}

/// The model presets' names, "llama3-8b, llama3-70b, ..." (for help texts).
inline std::string model_preset_names() {
  return detail::preset_names(model_presets());
}

/// One kind of GPU and how the cluster connects them (docs/model.md §10). Bandwidths are per
/// GPU and direction, in bytes/s, as a ring collective's link sees them; latencies per ring step.
struct cluster_spec {
  std::string name;
  double memory_bytes = 0.0;  ///< HBM per GPU
  /// Share of memory_bytes a job can fill: the rest is the CUDA context, the communication
  /// library's buffers and the caching allocator's fragmentation.
  double usable_fraction = 0.9;
  double peak_flops_bf16 = 0.0;  ///< dense, per GPU
  double peak_flops_fp8 = 0.0;   ///< dense, per GPU; 0 when the GPU has no fp8
  /// An overall scale on every compute kernel's rate (GEMM, attention, memory-bound): 1 when
  /// the curves below describe the GPU; without them (an older cluster file) the one share of
  /// the peak every op achieves (0.5 by default then), as `pipesched analyze` of a trace gives
  /// it.
  double achieved_fraction = 0.5;
  /// HBM bandwidth, bytes/s (vendor figure); 0: memory-bound kernels are not timed (op times
  /// from FLOPs alone, as a cluster file without it was read before).
  double hbm_bandwidth = 0.0;
  /// Share of the peak a GEMM achieves by its FLOPs (docs/model.md §10.2); empty: 1.
  efficiency_curve gemm_efficiency;
  /// Share of the peak the flash-attention kernel achieves by its FLOPs; empty: the GEMM curve.
  efficiency_curve attention_efficiency;
  /// Share of hbm_bandwidth a memory-bound kernel (norm, activation, dropout, softmax, loss,
  /// optimizer) achieves.
  double memory_efficiency = 1.0;
  /// How much slower compute runs while a collective runs beside it (the communication
  /// kernels take SMs and HBM bandwidth): compute that hides h seconds of communication lasts
  /// overlap_slowdown·h longer (overlap_split, docs/model.md §10.2). 0: hiding is free.
  double overlap_slowdown = 0.0;
  std::uint32_t gpus_per_node = 8;
  double intra_node_bandwidth = 0.0;  ///< bytes/s (NVLink)
  double intra_node_latency = 0.0;    ///< s
  double inter_node_bandwidth = 0.0;  ///< bytes/s (the network, per GPU)
  double inter_node_latency = 0.0;    ///< s

  double usable_memory() const noexcept { return memory_bytes * usable_fraction; }
  /// The dense peak for activations of `activation_bytes` (1: fp8, else bf16).
  double peak_flops(std::uint32_t activation_bytes) const noexcept {
    return activation_bytes == 1 ? peak_flops_fp8 : peak_flops_bf16;
  }

  /// Throws field_error (who, field, rule), so a reader can point at the field.
  void check(std::string_view who = "cluster_spec") const {
    const std::string where(who);
    auto positive = [&](double v, const char* field) {
      if (!std::isfinite(v) || v <= 0.0) {
        detail::fail_field(where, field, "must be finite and > 0, not ", detail::shortest(v));
      }
    };
    auto non_negative = [&](double v, const char* field) {
      if (!std::isfinite(v) || v < 0.0) {
        detail::fail_field(where, field, "must be finite and >= 0, not ", detail::shortest(v));
      }
    };
    positive(memory_bytes, "memory_bytes");
    positive(usable_fraction, "usable_fraction");
    if (usable_fraction > 1.0) {
      detail::fail_field(where, "usable_fraction", "must be at most 1, not ",
                         detail::shortest(usable_fraction));
    }
    positive(peak_flops_bf16, "peak_flops_bf16");
    non_negative(peak_flops_fp8, "peak_flops_fp8");
    positive(achieved_fraction, "achieved_fraction");
    if (achieved_fraction > 1.0) {
      detail::fail_field(where, "achieved_fraction", "must be at most 1, not ",
                         detail::shortest(achieved_fraction));
    }
    non_negative(hbm_bandwidth, "hbm_bandwidth");
    gemm_efficiency.check(where, "gemm_efficiency");
    attention_efficiency.check(where, "attention_efficiency");
    positive(memory_efficiency, "memory_efficiency");
    if (memory_efficiency > 1.0) {
      detail::fail_field(where, "memory_efficiency", "must be at most 1, not ", memory_efficiency);
    }
    non_negative(overlap_slowdown, "overlap_slowdown");
    if (overlap_slowdown > 1.0) {
      detail::fail_field(where, "overlap_slowdown", "must be at most 1, not ",
                         detail::shortest(overlap_slowdown));
    }
    if (gpus_per_node == 0) {
      detail::fail_field(where, "gpus_per_node", "must be at least 1");
    }
    positive(intra_node_bandwidth, "intra_node_bandwidth");
    non_negative(intra_node_latency, "intra_node_latency");
    positive(inter_node_bandwidth, "inter_node_bandwidth");
    non_negative(inter_node_latency, "inter_node_latency");
  }
};

/// The built-in GPUs (`pipesched plan --gpu NAME`), each value's source in docs/model.md §10.2:
/// the vendor's dense bf16 and fp8 peaks, HBM size (80 GiB) and bandwidth; the GEMM curve's
/// ceiling the best matmul rate measured (Maximum Achievable Matmul FLOPS), its fall-off with
/// size Calculon's system files'; the memory-bound share measured on elementwise kernels; NVLink
/// and the network (one 400 Gb/s (H100) or 200 Gb/s (A100) port per GPU) at the bus bandwidth
/// NCCL's ring collectives measure on them.
///
/// `h800-sxm-80gb`: the H800 is an H100 SXM with NVLink cut from 900 to 400 GB/s in all; every
/// value is the H100's but intra_node_bandwidth, which like the others is per direction as a
/// ring sees it: 160 GB/s, what DeepSeek-V3 (arXiv 2412.19437 §3.2.2) gives for the H800's
/// NVLink, and the H100's 370 scaled by 400/900 (164).
inline std::span<const cluster_spec> cluster_presets() {
  static const std::array<cluster_spec, 3> presets = [] {
    std::array<cluster_spec, 3> p{};
    // What the SXM parts share, set once: 80 GiB, the memory-bound share, the NVLink and
    // network latencies. `achieved`: what Megatron-Core's runs on H100 and Megatron-LM's on
    // A100 reach of the microbenchmark rates (docs/model.md §10.2).
    auto sxm_80gb = [](std::string name, double bf16, double fp8, double achieved, double hbm,
                       efficiency_curve gemm, efficiency_curve attention, double intra,
                       double inter) {
      cluster_spec c;
      c.name = std::move(name);
      c.memory_bytes = 80.0 * 1024 * 1024 * 1024;
      c.peak_flops_bf16 = bf16;
      c.peak_flops_fp8 = fp8;
      c.achieved_fraction = achieved;
      c.hbm_bandwidth = hbm;
      c.gemm_efficiency = std::move(gemm);
      c.attention_efficiency = std::move(attention);
      c.memory_efficiency = 0.8;
      c.overlap_slowdown = 0.189;
      c.intra_node_bandwidth = intra;
      c.intra_node_latency = 3e-6;
      c.inter_node_bandwidth = inter;
      c.inter_node_latency = 10e-6;
      return c;
    };
    const cluster_spec h100 = sxm_80gb("h100-sxm-80gb", 989.4e12, 1978.9e12, 0.668, 3.35e12,
                                       {{{1e9, 0.506}, {16e9, 0.759}, {128e9, 0.801}}},
                                       {{{1e9, 0.35}, {1e11, 0.55}}}, 370e9, 45e9);
    p[0] = h100;
    p[1] = sxm_80gb("a100-sxm-80gb", 312e12, 0.0, 0.854, 2.039e12,
                    {{{1e9, 0.543}, {16e9, 0.814}, {128e9, 0.859}}}, {{{1e9, 0.35}, {1e11, 0.6}}},
                    200e9, 22.5e9);
    cluster_spec h800 = h100;
    h800.name = "h800-sxm-80gb";
    h800.intra_node_bandwidth = 160e9;
    p[2] = h800;
    return p;
  }();
  return presets;
}

/// A GPU preset by name; throws invalid_argument listing the known names.
inline const cluster_spec& cluster_preset(std::string_view name) {
  return detail::preset_named(cluster_presets(), name, "GPU", "cluster");
}

/// The GPU presets' names, "h100-sxm-80gb, a100-sxm-80gb, ..." (for help texts).
inline std::string cluster_preset_names() {
  return detail::preset_names(cluster_presets());
}

/// The training state's bytes per parameter (mixed precision with Adam, as ZeRO counts them,
/// arXiv 1910.02054): bf16 weights, fp32 main gradients, fp32 main weights + Adam m and v.
inline constexpr double weight_bytes_per_parameter = 2.0;
inline constexpr double gradient_bytes_per_parameter = 4.0;
inline constexpr double optimizer_bytes_per_parameter = 12.0;

/// How the data-parallel ranks share the training state (the bytes per parameter above).
enum class optimizer_sharding : std::uint8_t {
  none,       ///< 18 bytes per parameter on every rank
  optimizer,  ///< the 12 optimizer bytes / DP (Megatron's distributed optimizer, ZeRO-1)
  gradients,  ///< also the gradients / DP (ZeRO-2)
  weights,    ///< also the weights / DP, gathered before use (ZeRO-3, FSDP: job_costs.hpp)
};

constexpr std::string_view to_string(optimizer_sharding s) noexcept {
  switch (s) {
    case optimizer_sharding::none:
      return "none";
    case optimizer_sharding::optimizer:
      return "optimizer";
    case optimizer_sharding::gradients:
      return "gradients";
    case optimizer_sharding::weights:
      break;
  }
  return "weights";
}

/// "none", "optimizer", "gradients" or "weights"; nullopt for any other text.
constexpr std::optional<optimizer_sharding> parse_optimizer_sharding(std::string_view s) noexcept {
  for (optimizer_sharding k : {optimizer_sharding::none, optimizer_sharding::optimizer,
                               optimizer_sharding::gradients, optimizer_sharding::weights}) {
    if (to_string(k) == s) {
      return k;
    }
  }
  return std::nullopt;
}

/// The planner's bounds on what one job makes it generate (docs/errors.md, "Limits"), far above
/// any real job (Llama 3 405B on 16384 GPUs with 16M-token batches: 16 sequences per pipeline,
/// about 10^5 ops in its largest candidate schedule), so that a typo (tokens typed as sequences)
/// is an error naming the option instead of a search that fills the memory or runs for hours.
inline constexpr std::uint64_t max_plan_gpus = std::uint64_t{1} << 24;
/// Sequences per pipeline and step (global batch / DP): at most this many micro-batches.
inline constexpr std::uint64_t max_plan_pipeline_sequences = std::uint64_t{1} << 16;
/// Ops of one candidate schedule: p·v·m·3 (F, B and W of every chunk and micro-batch).
inline constexpr std::uint64_t max_plan_schedule_ops = std::uint64_t{1} << 22;
/// Tokens per step (global batch · sequence): over 250 times Llama 3's 16M.
inline constexpr std::uint64_t max_plan_step_tokens = std::uint64_t{1} << 32;

/// Which of tensor parallelism's collectives overlap compute.
enum class tp_overlap : std::uint8_t {
  none,  ///< every collective between the kernels around it
  /// The backward's: each input gradient's all-reduce (or reduce-scatter) runs beside the
  /// weight gradient's GEMMs, and sequence parallelism's all-gather of an input for its weight
  /// gradient beside the input gradient's GEMMs (Megatron-LM's asynchronous tensor-parallel
  /// all-reduce, on by default since 2021)
  backward,
  /// Every collective beside the GEMM it feeds or drains, forward and backward (Megatron-LM's
  /// --tp-comm-overlap, Transformer Engine's userbuffers)
  all,
};

constexpr std::string_view to_string(tp_overlap o) noexcept {
  return o == tp_overlap::none ? "none" : o == tp_overlap::backward ? "backward" : "all";
}

/// "none", "backward" or "all"; nullopt for any other text.
constexpr std::optional<tp_overlap> parse_tp_overlap(std::string_view s) noexcept {
  for (tp_overlap o : {tp_overlap::none, tp_overlap::backward, tp_overlap::all}) {
    if (to_string(o) == s) {
      return o;
    }
  }
  return std::nullopt;
}

/// Which activation model the planner uses for a layer (docs/model.md §10.3).
enum class activation_model : std::uint8_t {
  tensors,   ///< the tensors the layer keeps, one by one (model/layer_tensors.hpp): the default
  megatron,  ///< Megatron-LM's estimator (Korthikanti et al.'s formula, activation_bytes_of_layer)
};

constexpr std::string_view to_string(activation_model m) noexcept {
  return m == activation_model::tensors ? "tensors" : "megatron";
}

/// "tensors" or "megatron"; nullopt for any other text.
constexpr std::optional<activation_model> parse_activation_model(std::string_view s) noexcept {
  for (activation_model m : {activation_model::tensors, activation_model::megatron}) {
    if (to_string(m) == s) {
      return m;
    }
  }
  return std::nullopt;
}

/// A training job: a model on `gpus` GPUs of one kind, sequences of `sequence` tokens.
struct training_job {
  transformer_spec model;
  cluster_spec cluster;
  std::uint64_t gpus = 0;
  std::uint64_t sequence = 0;  ///< s, tokens per sequence
  /// Sequences per optimizer step over all data-parallel ranks (0: not given; then
  /// plan_options::microbatches fixes it).
  std::uint64_t global_batch = 0;
  optimizer_sharding sharding = optimizer_sharding::optimizer;
  /// Megatron's vocabulary padding multiple (padded to multiple·TP); 1: pad only to TP.
  std::uint32_t vocab_multiple = 128;
  activation_model activations = activation_model::tensors;
  /// Gradients reduce bucket by bucket while the backward runs (Megatron-LM's
  /// --overlap-grad-reduce, PyTorch DDP and FSDP); false: a stage's reduction starts after its
  /// last backward op (Megatron-LM before 2023).
  bool overlap_grad_reduce = true;
  /// Pipeline sends and receives block the stage while they run (Megatron-LM's default: a
  /// batched isend / irecv waited on before the next op); false: they run beside the compute
  /// (PyTorch's pipelining, Megatron's --overlap-p2p-comm), only delaying the op that waits.
  bool blocking_p2p = false;
  /// Which of tensor parallelism's collectives run beside GEMMs (docs/model.md §10.2).
  tp_overlap tp_comm_overlap = tp_overlap::none;
  /// Bytes per gradient the data-parallel reduction moves: 4 (fp32 main gradients, Megatron's
  /// --accumulate-allreduce-grads-in-fp32) or 2 (bf16 / fp16, Megatron-LM's default).
  std::uint32_t gradient_reduce_bytes = 4;
  /// Each micro-batch's weight gradients are added into the step's gradients inside the
  /// weight-gradient GEMM (Megatron-LM's --gradient-accumulation-fusion, its default since
  /// 2022); false: by a separate elementwise add after it (PyTorch's autograd, Megatron-LM
  /// before 2022), which reads and writes every gradient once per micro-batch.
  bool gradient_accumulation_fusion = true;
  /// Mixture of experts: the busiest expert-parallel rank's routed tokens over the mean (>= 1;
  /// 1: balanced routing). Its expert GEMMs, and what they keep, scale by it (docs/model.md
  /// §10.6).
  double moe_imbalance = 1.0;

  void check(std::string_view who = "plan") const {
    model.check(who);
    cluster.check(who);
    if (gpus == 0) {
      detail::fail(who, ": gpus must be at least 1");
    }
    if (gpus > max_plan_gpus) {
      detail::fail(who, ": gpus (", gpus, ") must be at most ", max_plan_gpus, " (max_plan_gpus)");
    }
    if (sequence == 0) {
      detail::fail(who, ": sequence (tokens per sequence) must be at least 1");
    }
    if (global_batch > max_plan_step_tokens / sequence) {
      detail::fail(who, ": the global batch (", global_batch, " sequences of ", sequence,
                   " tokens) must be at most ", max_plan_step_tokens,
                   " tokens per step (max_plan_step_tokens)");
    }
    if (vocab_multiple == 0) {
      detail::fail(who, ": vocab_multiple must be at least 1");
    }
    if (gradient_reduce_bytes != 2 && gradient_reduce_bytes != 4) {
      detail::fail(who, ": gradient_reduce_bytes must be 2 (bf16) or 4 (fp32), not ",
                   gradient_reduce_bytes);
    }
    if (!(moe_imbalance >= 1.0) || !std::isfinite(moe_imbalance)) {
      detail::fail(who, ": moe_imbalance (", detail::shortest(moe_imbalance),
                   ") must be finite and at least 1: the busiest expert-parallel rank's routed "
                   "tokens over the mean");
    }
    if (moe_imbalance != 1.0 && !model.is_moe()) {
      detail::fail(who, ": moe_imbalance (", detail::shortest(moe_imbalance),
                   ") needs a model with "
                   "experts; \"",
                   model.name, "\" is dense");
    }
    if (model.memory_efficient_norm && activations == activation_model::megatron) {
      detail::fail(who,
                   ": memory_efficient_norm needs the tensor activation model (Megatron's "
                   "estimator counts every norm's input)");
    }
    if (model.activation_bytes == 1 && cluster.peak_flops_fp8 <= 0.0) {
      detail::fail(who, ": the model computes in fp8 (activation_bytes 1) but the GPU \"",
                   cluster.name, "\" has no fp8 peak (peak_flops_fp8)");
    }
    check_rate(who);
  }

  /// Every GEMM's time is its FLOPs over peak × achieved_fraction × its curve's efficiency: a
  /// rate at which a step's layer work
  /// on one GPU is not a finite number of seconds, or one layer's weight gradient of one
  /// sequence over a node's TP is 0 s, would hang the search or print inf or 0.
  void check_rate(std::string_view who) const {
    const char* peak = model.activation_bytes == 1 ? "peak_flops_fp8" : "peak_flops_bf16";
    // The slowest rate a GEMM runs at: the curve's least efficiency.
    const double least_efficiency = cluster.gemm_efficiency.points.empty()
                                        ? 1.0
                                        : cluster.gemm_efficiency.points.front().second;
    const double rate =
        cluster.peak_flops(model.activation_bytes) * cluster.achieved_fraction * least_efficiency;
    const layer_flops one = flops_of_layer(model, sequence, 1);
    const double step = 3.0 * one.forward() * static_cast<double>(model.layers) *
                        static_cast<double>(std::max<std::uint64_t>(1, global_batch)) / rate;
    const double least = one.backward_weight() / static_cast<double>(cluster.gpus_per_node) / rate;
    if (!std::isfinite(step) || !(least >= std::numeric_limits<double>::min())) {
      detail::fail(
          who, ": ", peak, " (", detail::shortest(cluster.peak_flops(model.activation_bytes)),
          " FLOP/s) × achieved_fraction (", detail::shortest(cluster.achieved_fraction), ") makes ",
          std::isfinite(step) ? "one layer's weight gradient of one sequence take 0 s"
                              : "the layers' work of one step take more seconds than "
                                "a double holds",
          ": the op times must be finite and > 0");
    }
  }
};

/// One way to cut a job over its GPUs (docs/model.md §10): TP × CP × PP × DP = GPUs; each of the
/// DP pipelines runs `microbatches` micro-batches of `micro_batch` sequences per step. Expert
/// parallelism is carved out of the DP·CP ranks of a stage (Megatron-LM's and torchtitan's
/// way): EP divides DP·CP, and each expert's gradients reduce over DP·CP/EP ranks.
struct plan_layout {
  std::uint32_t tp = 1;            ///< tensor parallelism, inside a node
  std::uint32_t pp = 1;            ///< pipeline stages p
  std::uint64_t dp = 1;            ///< data-parallel pipelines
  std::uint32_t chunks = 1;        ///< v, model chunks per stage
  std::uint32_t micro_batch = 1;   ///< b, sequences per micro-batch
  std::uint32_t microbatches = 1;  ///< m per pipeline
  bool sequence_parallel = false;  ///< activations split over TP along the sequence too
  /// Context parallelism: each sequence split over `cp` ranks (each two chunks of it, for the
  /// causal mask's balance), K and V passed around their ring.
  std::uint32_t cp = 1;
  /// Expert parallelism: an MoE layer's routed experts split over `ep` of the stage's DP·CP
  /// ranks (TP apart), tokens sent to them and back by all-to-alls.
  std::uint32_t ep = 1;

  /// The expert-data-parallel degree: the ranks holding the same experts, DP·CP/EP.
  std::uint64_t expert_dp() const noexcept { return dp * cp / (ep == 0 ? 1 : ep); }

  friend bool operator==(const plan_layout&, const plan_layout&) = default;
};

}  // namespace pipesched
