#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/transformer_spec.hpp"
#include "pipesched/plan/job.hpp"

// From a job and a layout to what the schedulers read: per-chunk op times in seconds, per-chunk
// activation bytes, static bytes per stage, and the data-parallel gradient traffic
// (docs/model.md §10). Every rule of the plan's memory and time is here, once.

namespace pipesched {

/// Parameters on one rank of a stage, by where they come from.
struct stage_parameters {
  double layers = 0.0;     ///< its transformer layers (the 1/TP slice, norms whole)
  double embedding = 0.0;  ///< the input embedding's 1/TP slice (stage of global chunk 0)
  /// The LM head's 1/TP slice (untied, or a tied copy on another stage than the embedding's, as
  /// Megatron-LM keeps one) and the final norm (stage of the last global chunk).
  double head = 0.0;
  double largest_chunk = 0.0;  ///< the largest chunk's parameters (ZeRO-3's gather buffer)
  double total() const noexcept { return layers + embedding + head; }
};

/// Bytes a rank of a stage holds whatever the schedule does (docs/model.md §10).
struct static_bytes {
  double weights = 0.0;    ///< bf16 weights (+ ZeRO-3's gather buffer)
  double gradients = 0.0;  ///< fp32 main gradients
  double optimizer = 0.0;  ///< fp32 main weights, Adam m and v
  double total() const noexcept { return weights + gradients + optimizer; }
};

/// What one chunk of the model is: its layers and whether it holds the embedding or the head.
struct chunk_content {
  std::uint32_t layers = 0;
  bool embedding = false;  ///< global chunk 0
  bool head = false;       ///< the last global chunk: final norm, LM head, loss
};

/// The buckets a chunk's gradients reduce in (docs/robustness.md §8): one per layer, and one
/// for the embedding or the head (none for a chunk without either).
inline std::uint32_t dp_bucket_count(const chunk_content& cc) noexcept {
  return cc.layers + ((cc.embedding || cc.head) ? 1u : 0u);
}

/// The schedulers' inputs for one job, layout, recompute choice, partition and placement.
struct job_costs {
  cost_model costs;                          ///< per chunk, seconds; T_comm the pipeline transfer
  memory_model memory;                       ///< per chunk, bytes; static bytes per stage
  std::vector<chunk_content> chunks;         ///< per global chunk
  std::vector<stage_parameters> parameters;  ///< per stage
  std::vector<static_bytes> static_memory;   ///< per stage
  std::vector<double> gradient_bytes;        ///< per global chunk: what DP reduces
  /// Data-parallel reduction of one bucket of `bytes`: reduce-scatter with a sharded optimizer,
  /// else all-reduce, over the DP ranks (ring formula, model/data_parallel.hpp), seconds.
  double dp_bandwidth = 0.0;
  double dp_latency = 0.0;
  std::uint64_t dp = 1;
  bool dp_reduce_scatter = false;
  /// The slowest pipeline link's transfer, seconds (0 with one stage): the cost model's scalar
  /// T_comm. Each link's own time is costs.comm(from, to) (pipeline_link_times).
  double pipeline_transfer_s = 0.0;
  double usable_memory = 0.0;  ///< bytes per GPU

  double dp_reduce_time(double bytes) const noexcept {
    const auto d = static_cast<std::uint32_t>(std::min<std::uint64_t>(dp, 0xffffffffu));
    return dp_reduce_scatter ? ring_reduce_scatter_time(d, bytes, dp_bandwidth, dp_latency)
                             : ring_allreduce_time(d, bytes, dp_bandwidth, dp_latency);
  }
  /// All-gather of `bytes` over the DP ranks (ZeRO-3's weight gather), seconds.
  double dp_gather_time(double bytes) const noexcept {
    const auto d = static_cast<std::uint32_t>(std::min<std::uint64_t>(dp, 0xffffffffu));
    return ring_reduce_scatter_time(d, bytes, dp_bandwidth, dp_latency);
  }
};

/// The Megatron-style rank order, tensor parallelism fastest, then data, then pipeline: rank =
/// t + TP·(d + DP·s). A group of `stride`-spaced ranks of size `size` fits in one node when
/// stride·size <= GPUs per node and the node boundaries align (GPUs per node a multiple of
/// stride·size): the data-parallel ring (a pipeline link: stages_in_one_node).
inline bool in_one_node(std::uint64_t stride, std::uint64_t size, std::uint32_t gpus_per_node) {
  const std::uint64_t span = stride * size;
  return span <= gpus_per_node && gpus_per_node % span == 0;
}

/// Whether the ranks of pipeline stages `a` and `b` pair up inside nodes: every (t, d) rank of
/// one with the same (t, d) rank of the other. Stage s's ranks are the block [TP·DP·s,
/// TP·DP·(s + 1)); the pairs share nodes exactly when no node boundary falls between the first
/// rank of the lower stage and the last rank of the higher one (the pairs' spans overlap and
/// cover that range).
inline bool stages_in_one_node(std::uint64_t ranks_per_stage,
                               std::uint32_t a,
                               std::uint32_t b,
                               std::uint32_t gpus_per_node) {
  const std::uint64_t lo = std::min(a, b);
  const std::uint64_t hi = std::max(a, b);
  return ranks_per_stage * lo / gpus_per_node == (ranks_per_stage * (hi + 1) - 1) / gpus_per_node;
}

/// Seconds of one pipeline transfer per link (from·p + to; 0 on the diagonal): one s·b·h
/// activation of `bytes` per TP group, a 1/TP share per rank (sequence parallelism, or
/// Megatron's scatter-gather of the pipeline send), at intra-node bandwidth and latency when
/// the two stages' ranks pair up inside nodes (stages_in_one_node), else inter-node. Throws
/// invalid_argument naming the cluster's fields when a step's transfers could not add up to
/// a finite time.
inline std::vector<double> pipeline_link_times(const training_job& job,
                                               const plan_layout& lay,
                                               double bytes) {
  const std::uint32_t p = lay.pp;
  const cluster_spec& cl = job.cluster;
  const double share = bytes / static_cast<double>(lay.tp);
  const double intra = share / cl.intra_node_bandwidth + cl.intra_node_latency;
  const double inter = share / cl.inter_node_bandwidth + cl.inter_node_latency;
  const std::uint64_t per_stage = std::uint64_t{lay.tp} * lay.dp;
  std::vector<double> out(std::size_t{p} * p, 0.0);
  bool uses_inter = false, uses_intra = false;
  for (std::uint32_t a = 0; a < p; ++a) {
    for (std::uint32_t b = 0; b < p; ++b) {
      if (a != b) {
        const bool in_node = stages_in_one_node(per_stage, a, b, cl.gpus_per_node);
        out[std::size_t{a} * p + b] = in_node ? intra : inter;
        (in_node ? uses_intra : uses_inter) = true;
      }
    }
  }
  // A step sends each micro-batch's activation and gradient over every chunk boundary: when
  // that many transfers of the slowest link (with room for the ops and the gradient reduction
  // added to them) overflow, no time of the step is a number.
  const double transfers = 2.0 * static_cast<double>(lay.microbatches) *
                           static_cast<double>(std::uint64_t{p} * lay.chunks);
  auto check = [&](bool used, double t, const char* bw, double bw_v, const char* lat,
                   double lat_v) {
    if (used && !std::isfinite(4.0 * transfers * t)) {
      detail::fail("plan: ", bw, " (", bw_v, " bytes/s) and ", lat, " (", lat_v,
                   " s) give a pipeline transfer of ", t, " s: the step's ", transfers,
                   " transfers would not add up to a finite time");
    }
  };
  check(uses_intra, intra, "intra_node_bandwidth", cl.intra_node_bandwidth, "intra_node_latency",
        cl.intra_node_latency);
  check(uses_inter, inter, "inter_node_bandwidth", cl.inter_node_bandwidth, "inter_node_latency",
        cl.inter_node_latency);
  return out;
}

/// Ring time of the collectives tensor parallelism adds to one layer's forward (or to its input
/// gradient) for a micro-batch of `tokens` tokens: two all-reduces of the layer's tokens·h
/// activation, or with sequence parallelism two all-gathers and two reduce-scatters, the same
/// volume (Megatron-LM).
inline double tensor_parallel_comm_per_layer(const training_job& job,
                                             const plan_layout& lay,
                                             double tokens) {
  if (lay.tp <= 1) {
    return 0.0;
  }
  const double bytes = static_cast<double>(job.model.activation_bytes) * tokens *
                       static_cast<double>(job.model.hidden);
  return 2.0 * ring_allreduce_time(lay.tp, bytes, job.cluster.intra_node_bandwidth,
                                   job.cluster.intra_node_latency);
}

/// The layout's micro-batch: b sequences of the job's s tokens (token_counts::uniform).
inline token_counts layout_tokens(const training_job& job, const plan_layout& lay) {
  return token_counts::uniform(job.sequence, lay.micro_batch);
}

/// tensor_parallel_comm_per_layer for the layout's micro-batch (s·b tokens).
inline double tensor_parallel_comm_per_layer(const training_job& job, const plan_layout& lay) {
  return tensor_parallel_comm_per_layer(job, lay, layout_tokens(job, lay).tokens);
}

/// Seconds of one micro-batch's ops: per layer (its FLOPs / TP at the achieved share of the
/// peak, plus tensor parallelism's collectives in F, B and a full recompute's R), and at the
/// ends of the model.
struct job_op_times {
  op_costs layer;                  ///< one layer's F, B, W
  double layer_recompute = 0.0;    ///< one layer's R (0 without recompute)
  double embedding_forward = 0.0;  ///< the vocabulary-parallel embedding's all-reduce
  double head = 0.0;               ///< the LM head's F, and again its B and its W
  /// One micro-batch's F + B + W (+ R) of a layer, and of the ends: what a stage's work adds up.
  double layer_total() const noexcept {
    return layer.forward + layer.backward_input + layer.backward_weight + layer_recompute;
  }
};

/// For a micro-batch of `n` tokens (docs/model.md §10.1: packed sequences of any lengths).
inline job_op_times op_times_of(const training_job& job,
                                const plan_layout& lay,
                                const token_counts& n,
                                recompute_kind recompute) {
  const transformer_spec& t = job.model;
  const double tp = lay.tp;
  const std::uint64_t vocab = padded_vocab(t.vocab, lay.tp, job.vocab_multiple);
  const double rate = job.cluster.peak_flops(t.activation_bytes) * job.cluster.achieved_fraction;
  const layer_flops lf = flops_of_layer(t, n);
  const double tp_comm = tensor_parallel_comm_per_layer(job, lay, n.tokens);
  job_op_times out;
  out.layer.forward = lf.forward() / tp / rate + tp_comm;
  out.layer.backward_input = lf.backward_input() / tp / rate + tp_comm;
  out.layer.backward_weight = lf.backward_weight() / tp / rate;
  out.layer_recompute = recompute == recompute_kind::full        ? out.layer.forward
                        : recompute == recompute_kind::selective ? lf.core / tp / rate
                                                                 : 0.0;
  out.head = head_flops(t, n.tokens, vocab) / tp / rate;
  // The vocabulary-parallel embedding sums its TP slices: one all-reduce of s·b·h.
  const double sbh = n.tokens * static_cast<double>(t.hidden);
  out.embedding_forward =
      ring_allreduce_time(lay.tp, static_cast<double>(t.activation_bytes) * sbh,
                          job.cluster.intra_node_bandwidth, job.cluster.intra_node_latency);
  return out;
}

/// op_times_of for the layout's micro-batch: b sequences of the job's s tokens.
inline job_op_times op_times_of(const training_job& job,
                                const plan_layout& lay,
                                recompute_kind recompute) {
  return op_times_of(job, lay, layout_tokens(job, lay), recompute);
}

/// job_costs for `job` cut by `lay`, one micro-batch of `n` tokens (docs/model.md §10.1), with
/// `layers_per_chunk` layers on each global chunk (in model order, p·v entries summing to L) on
/// placement `pl`, and `recompute` on every chunk. Throws invalid_argument naming the field for
/// shapes that do not match.
inline job_costs make_job_costs(const training_job& job,
                                const plan_layout& lay,
                                const token_counts& n_tokens,
                                recompute_kind recompute,
                                const std::vector<std::uint32_t>& layers_per_chunk,
                                const placement& pl) {
  const std::uint32_t p = lay.pp;
  const std::uint32_t v = lay.chunks;
  const std::size_t n = std::size_t{p} * v;
  if (pl.stages() != p || pl.chunks() != v) {
    detail::fail("plan: placement (p=", pl.stages(), ", v=", pl.chunks(),
                 ") must match the layout (p=", p, ", v=", v, ")");
  }
  if (layers_per_chunk.size() != n) {
    detail::fail("plan: partition (", layers_per_chunk.size(),
                 " values) must give the layers of each of the p·v = ", n, " chunks");
  }
  std::uint64_t sum = 0;
  for (std::uint32_t l : layers_per_chunk) {
    sum += l;
  }
  if (sum != job.model.layers) {
    detail::fail("plan: partition gives ", sum, " layers, the model has ", job.model.layers);
  }
  const transformer_spec& t = job.model;
  const double tp = lay.tp;
  const std::uint64_t vocab = padded_vocab(t.vocab, lay.tp, job.vocab_multiple);
  const double e = t.activation_bytes;
  const double tokens = n_tokens.tokens;  // s·b for b sequences of s tokens
  const double h = static_cast<double>(t.hidden);
  const double sbh = tokens * h;

  const job_op_times ot = op_times_of(job, lay, n_tokens, recompute);

  // Memory per layer and at the ends of the model (Megatron-LM's estimator's terms).
  const layer_activation_bytes la =
      activation_bytes_of_layer(t, n_tokens, lay.tp, lay.sequence_parallel);
  const double layer_kept = recompute == recompute_kind::none ? la.full : la.without_core;
  // Token ids (8 bytes each) and the embedding's dropout mask, per micro-batch in flight; the
  // last chunk: the final norm's output and the fp32 logits (4·s·b·(h + V)), all over TP.
  const double embed_bytes = (8.0 * tokens + sbh) / tp;
  const double head_bytes = 4.0 * tokens * (h + static_cast<double>(vocab)) / tp;
  // The LM head's weight gradient needs its input and the logits' gradient.
  const double head_w_bytes = e * tokens * (h + static_cast<double>(vocab)) / tp;
  const double received = la.input;

  // Parameters.
  const layer_parameters lp = parameters_of_layer(t);
  const double per_layer = lp.sharded / tp + lp.replicated;
  const double embedding = embedding_parameters(t, vocab) / tp;

  job_costs out;
  out.chunks.resize(n);
  out.gradient_bytes.resize(n);
  out.parameters.resize(p);
  std::vector<op_costs> chunk_costs(n);
  std::vector<chunk_memory> chunk_mem(n);
  const stage_index embed_stage = pl.stage_of(0);
  for (global_chunk g = 0; g < n; ++g) {
    const stage_index st = pl.stage_of(g);
    const chunk_index c = pl.local_of(g);
    chunk_content cc{layers_per_chunk[g], g == 0, g + 1 == n};
    out.chunks[g] = cc;
    const double l = cc.layers;
    op_costs oc;
    oc.forward = l * ot.layer.forward + (cc.embedding ? ot.embedding_forward : 0.0) +
                 (cc.head ? ot.head : 0.0);
    oc.backward_input = l * ot.layer.backward_input + (cc.head ? ot.head : 0.0);
    oc.backward_weight = l * ot.layer.backward_weight + (cc.head ? ot.head : 0.0);
    if (recompute != recompute_kind::none) {
      oc.recompute = l * ot.layer_recompute;
    }
    chunk_memory cm;
    const double ends = (cc.embedding ? embed_bytes : 0.0) + (cc.head ? head_bytes : 0.0);
    const double w_bytes = l * la.weight_grad + (cc.head ? head_w_bytes : 0.0);
    cm.weight_grad_input = w_bytes;
    cm.received = received;
    switch (recompute) {
      case recompute_kind::none:
        cm.activation = l * layer_kept + ends;
        break;
      case recompute_kind::selective:
        // The F keeps what the backward needs but the core; its R rebuilds the core tile by
        // tile inside the backward (flash attention): time, no memory.
        cm.activation = l * layer_kept + ends;
        cm.input = cm.activation;
        break;
      case recompute_kind::full:
        // The F keeps each layer's input; the backward then recomputes one layer at a time,
        // so the R..B transient is every input, one layer's activations and the W operands.
        cm.input = l * la.input + ends;
        cm.activation = cm.input + (l > 0.0 ? la.without_core : 0.0) + w_bytes;
        break;
    }
    cm.activation = std::max(cm.activation, cm.weight_grad_input);
    chunk_costs[std::size_t{st} * v + c] = oc;
    chunk_mem[std::size_t{st} * v + c] = cm;

    stage_parameters& sp = out.parameters[st];
    double chunk_params = l * per_layer;
    sp.layers += l * per_layer;
    if (cc.embedding) {
      sp.embedding += embedding;
      chunk_params += embedding;
    }
    if (cc.head) {
      double head_params = norm_parameters(t);
      if (!t.tied_embeddings || st != embed_stage) {
        head_params += embedding;
      }
      sp.head += head_params;
      chunk_params += head_params;
    }
    sp.largest_chunk = std::max(sp.largest_chunk, chunk_params);
    out.gradient_bytes[g] = gradient_bytes_per_parameter * chunk_params;
  }

  // Static bytes (the training state's bytes per parameter, plan/job.hpp, sharded as asked).
  const double d = static_cast<double>(lay.dp);
  out.static_memory.resize(p);
  std::vector<double> static_total(p);
  for (stage_index st = 0; st < p; ++st) {
    const double params = out.parameters[st].total();
    static_bytes& sb = out.static_memory[st];
    const optimizer_sharding sh = job.sharding;
    const double optimizer = optimizer_bytes_per_parameter * params;
    const double gradients = gradient_bytes_per_parameter * params;
    const double weights = weight_bytes_per_parameter * params;
    sb.optimizer = sh == optimizer_sharding::none ? optimizer : optimizer / d;
    sb.gradients = sh == optimizer_sharding::gradients || sh == optimizer_sharding::weights
                       ? gradients / d
                       : gradients;
    // ZeRO-3 gathers a chunk's weights before using them, the next one prefetched: two chunks'
    // bf16 weights whole.
    const double gathered =
        lay.dp > 1 ? 2.0 * weight_bytes_per_parameter * out.parameters[st].largest_chunk : 0.0;
    sb.weights = sh == optimizer_sharding::weights ? weights / d + gathered : weights;
    static_total[st] = sb.total();
  }

  // Pipeline transfers, link by link (where each pair of stages' ranks are).
  const std::vector<double> links = pipeline_link_times(job, lay, e * sbh);
  out.pipeline_transfer_s = links.empty() ? 0.0 : *std::max_element(links.begin(), links.end());
  const bool links_differ = std::any_of(links.begin(), links.end(), [&](double link) {
    return link != 0.0 && link != out.pipeline_transfer_s;
  });

  const bool dp_in_node = in_one_node(lay.tp, lay.dp, job.cluster.gpus_per_node);
  out.dp = lay.dp;
  out.dp_bandwidth =
      dp_in_node ? job.cluster.intra_node_bandwidth : job.cluster.inter_node_bandwidth;
  out.dp_latency = dp_in_node ? job.cluster.intra_node_latency : job.cluster.inter_node_latency;
  out.dp_reduce_scatter = job.sharding != optimizer_sharding::none;
  out.usable_memory = job.cluster.usable_memory();
  // The step waits for each stage's reductions, one bucket after another: when their sum (with
  // room for the pipeline added) overflows, no step time is a number.
  std::vector<double> reduce_sum(p, 0.0);
  for (global_chunk g = 0; g < n; ++g) {
    if (const std::uint32_t k = dp_bucket_count(out.chunks[g]); k > 0) {
      reduce_sum[pl.stage_of(g)] += k * out.dp_reduce_time(out.gradient_bytes[g] / k);
    }
  }
  for (double reduce : reduce_sum) {
    if (!std::isfinite(4.0 * reduce)) {
      const char* bw = dp_in_node ? "intra_node_bandwidth" : "inter_node_bandwidth";
      const char* lat = dp_in_node ? "intra_node_latency" : "inter_node_latency";
      detail::fail("plan: ", bw, " (", out.dp_bandwidth, " bytes/s) and ", lat, " (",
                   out.dp_latency, " s) make a stage's data-parallel gradient reduction take ",
                   reduce, " s: not a finite time");
    }
  }

  if (job.sharding == optimizer_sharding::weights && lay.dp > 1) {
    // Each F and B first gathers its chunk's bf16 weights over DP; prefetched, the op lasts the
    // longer of its compute and that gather.
    for (global_chunk g = 0; g < n; ++g) {
      const stage_index st = pl.stage_of(g);
      const chunk_index c = pl.local_of(g);
      op_costs& oc = chunk_costs[std::size_t{st} * v + c];
      const double gather = out.dp_gather_time(weight_bytes_per_parameter * out.gradient_bytes[g] /
                                               gradient_bytes_per_parameter);
      oc.forward = std::max(oc.forward, gather);
      oc.backward_input = std::max(oc.backward_input, gather);
    }
  }

  out.costs = cost_model{};
  out.costs.set_chunk_costs(v, chunk_costs);
  out.costs.set_comm(out.pipeline_transfer_s);
  if (links_differ) {
    out.costs.set_link_comm(p, links);  // T_comm above stays the slowest link's
  }
  out.memory.set_chunk_memory(v, chunk_mem);
  out.memory.set_static_memory(static_total);
  return out;
}

/// make_job_costs for the layout's micro-batch: b sequences of the job's s tokens.
inline job_costs make_job_costs(const training_job& job,
                                const plan_layout& lay,
                                recompute_kind recompute,
                                const std::vector<std::uint32_t>& layers_per_chunk,
                                const placement& pl) {
  return make_job_costs(job, lay, layout_tokens(job, lay), recompute, layers_per_chunk, pl);
}

}  // namespace pipesched
