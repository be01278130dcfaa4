#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/layer_kernels.hpp"
#include "pipesched/model/layer_tensors.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/transformer_spec.hpp"
#include "pipesched/plan/job.hpp"

// From a job and a layout to what the schedulers read: per-chunk op times in seconds, per-chunk
// activation bytes, static bytes per stage, and the data-parallel gradient traffic
// (docs/model.md §10). Every rule of the plan's memory and time is here, once.

namespace pipesched {

/// Parameters on one rank of a stage, by where they come from.
struct stage_parameters {
  double layers = 0.0;  ///< its transformer layers (the 1/TP slice, norms whole)
  /// Of `layers`: the routed experts (their 1/(TP·EP) slice), which shard and reduce over the
  /// expert-data-parallel ranks instead of DP·CP.
  double experts = 0.0;
  double embedding = 0.0;  ///< the input embedding's 1/TP slice (stage of global chunk 0)
  /// The LM head's 1/TP slice (untied, or a tied copy on another stage than the embedding's, as
  /// Megatron-LM keeps one) and the final norm (stage of the last global chunk).
  double head = 0.0;
  /// The largest of its layers, its embedding and its head (with the final norm): the unit
  /// ZeRO-3 gathers at a time without pipeline parallelism.
  double largest_unit = 0.0;
  double total() const noexcept { return layers + embedding + head; }
};

/// Seconds by where they go (the breakdown `plan --json` reports per stage).
struct kind_seconds {
  std::array<double, time_kind_count> seconds{};

  double& operator[](time_kind k) noexcept { return seconds[static_cast<std::size_t>(k)]; }
  double operator[](time_kind k) const noexcept { return seconds[static_cast<std::size_t>(k)]; }
  double total() const noexcept {
    double t = 0.0;
    for (double x : seconds) {
      t += x;
    }
    return t;
  }
  kind_seconds& operator+=(const kind_seconds& o) noexcept {
    for (std::size_t i = 0; i < time_kind_count; ++i) {
      seconds[i] += o.seconds[i];
    }
    return *this;
  }
  friend kind_seconds operator*(double k, kind_seconds a) noexcept {
    for (double& x : a.seconds) {
      x *= k;
    }
    return a;
  }
};

/// The seconds of each op of a piece of the model (a layer, an end) for one micro-batch.
struct op_kind_seconds {
  kind_seconds forward, backward_input, backward_weight, recompute;
  /// F + B + W + R by kind.
  kind_seconds all() const noexcept {
    kind_seconds out = forward;
    out += backward_input;
    out += backward_weight;
    out += recompute;
    return out;
  }
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
  cost_model costs;     ///< per chunk, seconds; T_comm the pipeline transfer
  memory_model memory;  ///< per chunk, bytes; static bytes per stage
  /// `memory` for an order whose backwards are all BW ops (B and W fused, as 1F1B, interleaved
  /// 1F1B and GPipe run them; memory_for picks it): with full recompute each layer's backward
  /// rebuilds and frees its own weight-gradient operands, where a W run later needs every
  /// layer's kept until then. Otherwise the same sizes as `memory`.
  memory_model fused_memory;
  std::vector<chunk_content> chunks;         ///< per global chunk
  std::vector<stage_parameters> parameters;  ///< per stage
  std::vector<static_bytes> static_memory;   ///< per stage
  /// Per global chunk: what DP reduces (training_job::gradient_reduce_bytes per parameter).
  std::vector<double> gradient_bytes;
  /// Per global chunk: the routed experts' part of gradient_bytes, which reduces over the
  /// expert-data-parallel ranks instead (0 without expert parallelism: every byte over DP·CP).
  std::vector<double> expert_gradient_bytes;
  /// Data-parallel reduction of one bucket of `bytes`: reduce-scatter with a sharded optimizer,
  /// else all-reduce, over the DP ranks (ring formula, model/data_parallel.hpp), seconds.
  double dp_bandwidth = 0.0;
  double dp_latency = 0.0;
  std::uint64_t dp = 1;
  bool dp_reduce_scatter = false;
  /// The experts' reduction ring: DP·CP/EP ranks, TP·EP apart.
  double expert_dp_bandwidth = 0.0;
  double expert_dp_latency = 0.0;
  std::uint64_t expert_dp = 1;
  /// Whether a bucket reduces as soon as its gradients are final (Megatron-LM's
  /// --overlap-grad-reduce), or all of a stage's after its last backward op.
  bool dp_overlapped = true;
  /// cluster_spec::overlap_slowdown: how much the reductions beside the backward slow it.
  double overlap_slowdown = 0.0;
  bool blocking_p2p = false;  ///< training_job::blocking_p2p: the sends are in the ops' times
  /// The slowest pipeline link's transfer, seconds (0 with one stage): the cost model's scalar
  /// T_comm. Each link's own time is costs.comm(from, to) (pipeline_link_times).
  double pipeline_transfer_s = 0.0;
  double usable_memory = 0.0;  ///< bytes per GPU
  /// Per global chunk: one micro-batch's F + B + W (+ R) by kind (what the costs add up).
  std::vector<kind_seconds> chunk_seconds;
  /// Per stage: the optimizer step's seconds (memory-bound: Adam over the parameters the rank
  /// updates, the gradient norm, the gradients zeroed).
  std::vector<double> optimizer_s;
  /// ZeRO-3 under pipeline parallelism: the all-gather of the first chunk's weights, before the
  /// step's first forward can start (the others are prefetched behind compute), seconds.
  double first_gather_s = 0.0;

  double dp_reduce_time(double bytes) const noexcept {
    const auto d = static_cast<std::uint32_t>(std::min<std::uint64_t>(dp, 0xffffffffu));
    return dp_reduce_scatter ? ring_reduce_scatter_time(d, bytes, dp_bandwidth, dp_latency)
                             : ring_allreduce_time(d, bytes, dp_bandwidth, dp_latency);
  }
  /// One of the `buckets` buckets of global chunk g (dp_bucket_count): its share of the
  /// non-expert gradients over DP·CP, then of the experts' over the expert-data-parallel ranks
  /// (one communication stream), seconds.
  double bucket_reduce_time(std::size_t g, std::uint32_t buckets) const noexcept {
    const double k = buckets == 0 ? 1.0 : buckets;
    const double experts = g < expert_gradient_bytes.size() ? expert_gradient_bytes[g] : 0.0;
    double t = dp_reduce_time((gradient_bytes[g] - experts) / k);
    if (experts > 0.0) {
      const auto d = static_cast<std::uint32_t>(std::min<std::uint64_t>(expert_dp, 0xffffffffu));
      t += dp_reduce_scatter
               ? ring_reduce_scatter_time(d, experts / k, expert_dp_bandwidth, expert_dp_latency)
               : ring_allreduce_time(d, experts / k, expert_dp_bandwidth, expert_dp_latency);
    }
    return t;
  }
  /// All-gather of `bytes` over the DP ranks (ZeRO-3's weight gather), seconds.
  double dp_gather_time(double bytes) const noexcept {
    const auto d = static_cast<std::uint32_t>(std::min<std::uint64_t>(dp, 0xffffffffu));
    return ring_reduce_scatter_time(d, bytes, dp_bandwidth, dp_latency);
  }
};

/// The Megatron-style rank order, tensor parallelism fastest, then context, data, pipeline:
/// rank = t + TP·(c + CP·(d + DP·s)). A group of `stride`-spaced ranks of size `size` fits in one
/// node when stride·size <= GPUs per node and the node boundaries align (GPUs per node a multiple
/// of stride·size): the data-parallel ring (a pipeline link: stages_in_one_node).
inline bool in_one_node(std::uint64_t stride, std::uint64_t size, std::uint32_t gpus_per_node) {
  const std::uint64_t span = stride * size;
  return span <= gpus_per_node && gpus_per_node % span == 0;
}

/// Whether the ranks of pipeline stages `a` and `b` pair up inside nodes: every (t, c, d) rank of
/// one with the same rank of the other. Stage s's ranks are the block [R·s, R·(s + 1)), R =
/// TP·CP·DP; the pairs share nodes exactly when no node boundary falls between the first
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

/// Seconds of one pipeline transfer per link (from·p + to; 0 on the diagonal): one activation
/// of `bytes` (a rank's tokens × h) per TP group, a 1/TP share per rank (sequence parallelism, or
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
  const std::uint64_t per_stage = std::uint64_t{lay.tp} * lay.cp * lay.dp;
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

/// Seconds of a compute kernel on one GPU of `c` (docs/model.md §10.2), every rate scaled by
/// achieved_fraction: a GEMM at its FLOPs over the peak (the fp8 one for an fp8 GEMM,
/// kernel::fp8, else the bf16 one) times the GEMM curve's efficiency at those FLOPs, flash
/// attention likewise on the attention curve (the GEMM curve when it has none), never faster
/// than its bytes over the HBM bandwidth; a memory-bound kernel at its bytes over the HBM
/// bandwidth times the memory efficiency (0 when the cluster gives no bandwidth: op times from
/// FLOPs alone, as before the kernel model).
inline double compute_seconds(const cluster_spec& c, const kernel& k) {
  const double scale = c.achieved_fraction;
  const double memory_rate = c.hbm_bandwidth * c.memory_efficiency * scale;
  const double memory = memory_rate > 0.0 ? k.bytes / memory_rate : 0.0;
  switch (k.kind) {
    case kernel_kind::gemm:
    case kernel_kind::attention: {
      const efficiency_curve& curve =
          k.kind == kernel_kind::attention && !c.attention_efficiency.points.empty()
              ? c.attention_efficiency
              : c.gemm_efficiency;
      const double rate = c.peak_flops(k.fp8 ? 1 : 2) * curve.at(k.flops) * scale;
      return std::max(k.flops / rate, memory);
    }
    case kernel_kind::memory_bound:
      return memory;
    case kernel_kind::communication:
      break;
  }
  return 0.0;
}

/// Where a group of ranks communicates: the bandwidth and latency of its ring.
struct ring_link {
  double bandwidth = 0.0;
  double latency = 0.0;
};

/// Ranks are ordered tensor parallelism fastest, then context, then data, then pipeline (rank =
/// t + TP·(c + CP·(d + DP·stage)), Megatron-LM's order): the TP group is `tp` consecutive ranks
/// and the CP ring `cp` ranks `tp` apart; a group runs at intra-node bandwidth when it fits in
/// one node (in_one_node). Across nodes NCCL runs one ring per network port, so a node's k
/// members of the group cross the network side by side, each on its own port: k times the
/// per-GPU network bandwidth, never more than NVLink's (docs/model.md §10.2).
inline ring_link group_link(const cluster_spec& c, std::uint64_t stride, std::uint64_t size) {
  if (in_one_node(stride, size, c.gpus_per_node)) {
    return {c.intra_node_bandwidth, c.intra_node_latency};
  }
  const std::uint64_t per_node = stride < c.gpus_per_node && c.gpus_per_node % stride == 0
                                     ? std::min<std::uint64_t>(size, c.gpus_per_node / stride)
                                     : 1;
  return {std::min(c.intra_node_bandwidth, static_cast<double>(per_node) * c.inter_node_bandwidth),
          c.inter_node_latency};
}

/// Seconds of one all-to-all of an MoE layer sending `bytes` from each rank (already without
/// its own share, expert_all_to_all_bytes) to the other EP − 1 ranks of its group, all at once:
/// over NVLink when the group (EP ranks, TP apart) fits in a node; otherwise the share bound
/// for the group's ranks in the same node over NVLink while the rest crosses the network, the
/// slower of the two, plus a latency.
inline double expert_all_to_all_seconds(const training_job& job,
                                        const plan_layout& lay,
                                        double bytes) {
  const cluster_spec& c = job.cluster;
  if (lay.ep <= 1) {
    return 0.0;
  }
  if (in_one_node(lay.tp, lay.ep, c.gpus_per_node)) {
    return bytes / c.intra_node_bandwidth + c.intra_node_latency;
  }
  const double peers = static_cast<double>(lay.ep) - 1.0;
  const double in_node =
      std::max(0.0, static_cast<double>(c.gpus_per_node / std::max(1u, lay.tp)) - 1.0);
  const double local = bytes * std::min(in_node, peers) / peers;
  return std::max(local / c.intra_node_bandwidth, (bytes - local) / c.inter_node_bandwidth) +
         c.inter_node_latency;
}

/// Seconds of a communication kernel over its group of `lay` (ring formulas,
/// model/data_parallel.hpp; the experts' all-to-all by expert_all_to_all_seconds).
inline double collective_seconds(const training_job& job, const plan_layout& lay, const kernel& k) {
  if (k.group == comm_group::expert) {
    return expert_all_to_all_seconds(job, lay, k.bytes);
  }
  const bool tensor = k.group == comm_group::tensor;
  const std::uint32_t n = tensor ? lay.tp : lay.cp;
  const ring_link l =
      tensor ? group_link(job.cluster, 1, lay.tp) : group_link(job.cluster, lay.tp, lay.cp);
  return k.collective == collective_kind::all_reduce
             ? ring_allreduce_time(n, k.bytes, l.bandwidth, l.latency)
             : ring_reduce_scatter_time(n, k.bytes, l.bandwidth, l.latency);
}

/// The seconds of an op's kernels, one after another, by kind. A kernel with CP ring bytes
/// lasts the longer of its compute and the exchange (cp − 1 steps of the ring, each overlapped
/// with the compute of the block already received, as Megatron-LM's and torchtitan's ring
/// attention run it); what the compute does not hide counts as communication. With
/// training_job::tp_comm_overlap `all` a tensor-parallel collective runs beside the GEMM it feeds
/// (an all-gather, the next GEMM) or drains (a reduce, the previous one), as Transformer
/// Engine's userbuffers overlap splits them: the pair lasts the longer of the two.
inline kind_seconds seconds_of(const training_job& job,
                               const plan_layout& lay,
                               const std::vector<kernel>& kernels) {
  kind_seconds out;
  const ring_link cp_link = group_link(job.cluster, lay.tp, lay.cp);
  std::vector<double> t(kernels.size(), 0.0);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const kernel& k = kernels[i];
    t[i] = k.kind == kernel_kind::communication ? collective_seconds(job, lay, k)
                                                : compute_seconds(job.cluster, k);
  }
  // The GEMM each overlapped collective hides behind, and how much of the GEMM is left to hide
  // another behind.
  std::vector<double> room(kernels.size(), 0.0);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    room[i] = kernels[i].kind == kernel_kind::gemm && !kernels[i].attention_core ? t[i] : 0.0;
  }
  const double slowdown = job.cluster.overlap_slowdown;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const kernel& k = kernels[i];
    if (k.kind == kernel_kind::communication) {
      double exposed = t[i];
      if (job.tp_comm_overlap == tp_overlap::all && k.group == comm_group::tensor) {
        const bool gather = k.collective == collective_kind::all_gather;
        const std::size_t j = gather ? i + 1 : i - 1;
        if ((gather || i > 0) && j < kernels.size() && room[j] > 0.0) {
          const overlapped_seconds o = overlap_split(room[j], exposed, slowdown);
          out[time_kind::gemm] += o.compute - room[j];
          room[j] = std::max(0.0, room[j] - exposed);
          exposed = o.exposed;
        }
      }
      out[time_kind::communication] += exposed;
      continue;
    }
    const time_kind kind = k.attention_core                      ? time_kind::attention
                           : k.kind == kernel_kind::memory_bound ? time_kind::memory_bound
                                                                 : time_kind::gemm;
    if (k.ring_bytes > 0.0 && lay.cp > 1) {
      const double steps = static_cast<double>(lay.cp) - 1.0;
      const double ring = steps * cp_link.latency + k.ring_bytes / cp_link.bandwidth;
      const overlapped_seconds o = overlap_split(t[i], ring, slowdown);
      out[kind] += o.compute;
      out[time_kind::communication] += o.exposed;
    } else {
      out[kind] += t[i];
    }
  }
  return out;
}

/// The seconds of a piece's ops by kind (seconds_of on each op's kernels). With
/// training_job::tp_comm_overlap `backward`, the backward's tensor-parallel collectives run
/// beside the other half of the backward's GEMMs: B's input-gradient reduces beside W's GEMMs,
/// W's all-gathers (sequence parallelism's inputs again) beside B's, as Megatron-LM's fused
/// backward runs them; taken so whether or not a schedule runs W right after B.
inline op_kind_seconds seconds_of(const training_job& job,
                                  const plan_layout& lay,
                                  const op_kernels& k) {
  op_kind_seconds out{seconds_of(job, lay, k.forward), seconds_of(job, lay, k.backward_input),
                      seconds_of(job, lay, k.backward_weight), seconds_of(job, lay, k.recompute)};
  if (job.tp_comm_overlap == tp_overlap::backward) {
    auto tp_comm = [&](const std::vector<kernel>& v, bool gathers) {
      double t = 0.0;
      for (const kernel& x : v) {
        if (x.kind == kernel_kind::communication && x.group == comm_group::tensor &&
            (x.collective == collective_kind::all_gather) == gathers) {
          t += collective_seconds(job, lay, x);
        }
      }
      return t;
    };
    // Each side's GEMMs run slower beside the other side's collectives (overlap_split); the
    // GEMM seconds are read before either is slowed.
    const double b_gemm = out.backward_input[time_kind::gemm];
    const double w_gemm = out.backward_weight[time_kind::gemm];
    const double b_comm = tp_comm(k.backward_input, false);
    const double w_comm = tp_comm(k.backward_weight, true);
    const double slowdown = job.cluster.overlap_slowdown;
    const overlapped_seconds b = overlap_split(w_gemm, b_comm, slowdown);
    const overlapped_seconds w = overlap_split(b_gemm, w_comm, slowdown);
    out.backward_weight[time_kind::gemm] += b.compute - w_gemm;
    out.backward_input[time_kind::communication] -= b_comm - b.exposed;
    out.backward_input[time_kind::gemm] += w.compute - b_gemm;
    out.backward_weight[time_kind::communication] -= w_comm - w.exposed;
  }
  return out;
}

/// The layout's micro-batch: b sequences of the job's s tokens (token_counts::uniform).
inline token_counts layout_tokens(const training_job& job, const plan_layout& lay) {
  return token_counts::uniform(job.sequence, lay.micro_batch);
}

/// The slice of every layer one rank of `lay` computes for a micro-batch of `n` tokens (the
/// busiest expert-parallel rank's, with the job's load imbalance).
inline layer_shard shard_of(const training_job& job,
                            const plan_layout& lay,
                            const token_counts& n) {
  return layer_shard{n, lay.tp, lay.cp, lay.sequence_parallel, lay.ep, job.moe_imbalance};
}

/// Seconds of one micro-batch's ops on one rank, each the sum of its kernels
/// (model/layer_kernels.hpp) timed by compute_seconds and collective_seconds: per layer, and at
/// the model's two ends (the embedding; the final norm, LM head and loss).
struct job_op_times {
  op_costs layer;                ///< one layer's F, B, W
  double layer_recompute = 0.0;  ///< one layer's R (0 without recompute)
  op_kind_seconds layer_kinds;   ///< the same by kind
  /// A dense layer's ops by kind: of an MoE model's leading dense layers, otherwise layer_kinds.
  op_kind_seconds dense_layer_kinds;
  op_kind_seconds embedding;  ///< the first end's ops
  op_kind_seconds head;       ///< the last end's ops
  /// One MoE layer's all-to-all seconds in F (dispatch and combine) and in B (their gradients'):
  /// what an overlapped F and B pair can hide (overlapped_pair_time); 0 without EP.
  double layer_exchange_forward = 0.0;
  double layer_exchange_backward = 0.0;
  /// One micro-batch's F + B + W (+ R) of a layer: what a stage's work adds up.
  double layer_total() const noexcept {
    return layer.forward + layer.backward_input + layer.backward_weight + layer_recompute;
  }
};

/// The weights one rank of `lay` holds of a layer of `kind`: a 1/TP slice of its matrices, the
/// routed experts' a 1/(TP·EP) slice, its norms and the router whole.
inline double layer_weights_on_rank(const transformer_spec& t,
                                    const plan_layout& lay,
                                    ffn_kind kind) {
  const layer_parameters lp = parameters_of_layer(t, kind);
  const double routed = routed_expert_parameters(t, kind);
  const double tp = lay.tp;
  return (lp.sharded - routed) / tp + routed / (tp * lay.ep) + lp.replicated;
}

/// `k` as the job runs it: without training_job::gradient_accumulation_fusion, W ends with the
/// elementwise add of the micro-batch's weight gradients (2 bytes each, as the GEMM wrote them)
/// into the step's (gradient_reduce_bytes each, read and written), for the `weights` of the
/// piece on the rank (docs/model.md §10.2).
inline op_kernels with_gradient_accumulation(const training_job& job,
                                             op_kernels k,
                                             double weights) {
  if (!job.gradient_accumulation_fusion && weights > 0.0) {
    k.backward_weight.push_back(detail::memory_kernel(
        "gradient accumulation", (2.0 + 2.0 * job.gradient_reduce_bytes) * weights));
  }
  return k;
}

/// A layer's kernels of `kind` as the job runs them (kernels_of_layer, with_gradient_accumulation).
inline op_kernels job_layer_kernels(const training_job& job,
                                    const plan_layout& lay,
                                    const layer_shard& shard,
                                    recompute_kind recompute,
                                    ffn_kind kind) {
  return with_gradient_accumulation(job, kernels_of_layer(job.model, shard, recompute, kind),
                                    layer_weights_on_rank(job.model, lay, kind));
}

/// For a micro-batch of `n` tokens (docs/model.md §10.1: packed sequences of any lengths).
inline job_op_times op_times_of(const training_job& job,
                                const plan_layout& lay,
                                const token_counts& n,
                                recompute_kind recompute) {
  const transformer_spec& t = job.model;
  const layer_shard shard = shard_of(job, lay, n);
  const std::uint64_t vocab = padded_vocab(t.vocab, lay.tp, job.vocab_multiple);
  job_op_times out;
  const ffn_kind main_kind = t.is_moe() ? ffn_kind::moe : ffn_kind::dense;
  const op_kernels layer = job_layer_kernels(job, lay, shard, recompute, main_kind);
  out.layer_kinds = seconds_of(job, lay, layer);
  auto exchange = [&](const std::vector<kernel>& ks) {
    double sum = 0.0;
    for (const kernel& k : ks) {
      if (k.kind == kernel_kind::communication && k.group == comm_group::expert) {
        sum += collective_seconds(job, lay, k);
      }
    }
    return sum;
  };
  out.layer_exchange_forward = exchange(layer.forward);
  out.layer_exchange_backward = exchange(layer.backward_input);
  out.dense_layer_kinds =
      t.is_moe()
          ? seconds_of(job, lay, job_layer_kernels(job, lay, shard, recompute, ffn_kind::dense))
          : out.layer_kinds;
  // The embedding table and the LM head's weight: V × h, a 1/TP slice on each rank.
  const double table = embedding_parameters(t, vocab) / lay.tp;
  out.embedding =
      seconds_of(job, lay, with_gradient_accumulation(job, kernels_of_embedding(t, shard), table));
  out.head = seconds_of(job, lay,
                        with_gradient_accumulation(job, kernels_of_head(t, shard, vocab), table));
  out.layer.forward = out.layer_kinds.forward.total();
  out.layer.backward_input = out.layer_kinds.backward_input.total();
  out.layer.backward_weight = out.layer_kinds.backward_weight.total();
  out.layer_recompute = out.layer_kinds.recompute.total();
  return out;
}

/// op_times_of for the layout's micro-batch: b sequences of the job's s tokens.
inline job_op_times op_times_of(const training_job& job,
                                const plan_layout& lay,
                                recompute_kind recompute) {
  return op_times_of(job, lay, layout_tokens(job, lay), recompute);
}

/// One kernel of a layer's op with its time (what `plan --layer-times` lists).
struct timed_kernel {
  kernel k;
  double seconds = 0.0;  ///< compute, or collective; a CP ring's exposed part not included
};

/// A layer's kernels, op by op, each with its seconds (`plan --layer-times`).
struct layer_kernel_times {
  std::vector<timed_kernel> forward, backward_input, backward_weight, recompute;
};

inline layer_kernel_times layer_kernel_times_of(const training_job& job,
                                                const plan_layout& lay,
                                                recompute_kind recompute) {
  const op_kernels ks =
      job_layer_kernels(job, lay, shard_of(job, lay, layout_tokens(job, lay)), recompute,
                        job.model.is_moe() ? ffn_kind::moe : ffn_kind::dense);
  auto timed = [&](const std::vector<kernel>& v) {
    std::vector<timed_kernel> out;
    for (const kernel& k : v) {
      out.push_back({k, k.kind == kernel_kind::communication ? collective_seconds(job, lay, k)
                                                             : compute_seconds(job.cluster, k)});
    }
    return out;
  };
  return {timed(ks.forward), timed(ks.backward_input), timed(ks.backward_weight),
          timed(ks.recompute)};
}

/// Bytes of HBM traffic per parameter of the optimizer step a rank runs (docs/model.md §10.2):
/// Adam in fp32 reads and writes the main weight (8), reads the gradient (4), reads and writes m
/// and v (16) and writes the bf16 weight (2): 30 per parameter it updates; the gradient norm
/// for clipping reads each gradient it holds again (4).
inline constexpr double adam_step_bytes_per_parameter = 30.0;
inline constexpr double gradient_norm_bytes_per_parameter = 4.0;
/// Zeroing the fp32 main gradients before the next step writes each one (4).
inline constexpr double zero_gradient_bytes_per_parameter = 4.0;

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
  // Every route holds the whole model (DualPipe's two: each rank two copies of a stage).
  const std::uint32_t route = pl.route_length();
  for (std::uint32_t r = 0; r < pl.routes(); ++r) {
    std::uint64_t sum = 0;
    for (std::uint32_t g = r * route; g < (r + 1) * route; ++g) {
      sum += layers_per_chunk[g];
    }
    if (sum != job.model.layers) {
      detail::fail("plan: partition gives ", sum, " layers",
                   pl.routes() > 1 ? detail::concat(" on route ", r) : std::string(),
                   ", the model has ", job.model.layers);
    }
  }
  const transformer_spec& t = job.model;
  const double tp = lay.tp;
  const double cp = lay.cp;
  const std::uint64_t vocab = padded_vocab(t.vocab, lay.tp, job.vocab_multiple);
  const detail::element_bytes eb(t);
  const double tokens = n_tokens.tokens / cp;  // this rank's: s·b / CP for b sequences of s
  const double h = static_cast<double>(t.hidden);
  const double sbh = tokens * h;
  const layer_shard shard = shard_of(job, lay, n_tokens);

  const job_op_times ot = op_times_of(job, lay, n_tokens, recompute);

  // Memory per layer (the tensor list, or Megatron-LM's estimator) and at the ends.
  // Megatron-LM's estimator counts every layer as dense (of `ffn`).
  auto activations_of = [&](ffn_kind kind) {
    return job.activations == activation_model::megatron
               ? activation_bytes_of_layer(
                     t, token_counts{n_tokens.tokens / cp, n_tokens.squares / cp}, lay.tp,
                     lay.sequence_parallel)
               : activation_bytes_of_tensors(t, shard, kind);
  };
  // A layer of the model's most common kind (MoE when it has experts), and a dense one.
  const layer_activation_bytes la = activations_of(t.is_moe() ? ffn_kind::moe : ffn_kind::dense);
  const layer_activation_bytes la_dense = t.is_moe() ? activations_of(ffn_kind::dense) : la;
  const double layer_kept = recompute == recompute_kind::none ? la.full : la.without_core;
  const double dense_kept =
      recompute == recompute_kind::none ? la_dense.full : la_dense.without_core;
  // The first end: the token ids (8 bytes each), and with dropout the embedding's mask (h-wide,
  // split by sequence parallelism; Megatron's estimator counts it whatever the model). The last
  // end: the final norm's output and the fp32 logits the loss keeps (4·T·(h + V)/TP).
  const bool megatron = job.activations == activation_model::megatron;
  const double embed_bytes =
      megatron ? (8.0 * tokens + sbh) / tp
               : 8.0 * tokens + (t.dropout ? sbh / (lay.sequence_parallel ? tp : 1.0) : 0.0);
  const double head_bytes = 4.0 * tokens * (h + static_cast<double>(vocab)) / tp;
  // The LM head's weight gradient needs its input and the logits' gradient.
  const double head_w_bytes = eb.tensor * tokens * (h + static_cast<double>(vocab)) / tp;
  const double received = la.input;

  // Parameters: the routed experts split over TP and EP, the rest as TP holds it.
  const double ep = lay.ep;
  const double per_layer = layer_weights_on_rank(t, lay, ffn_kind::moe);
  const double per_dense_layer = layer_weights_on_rank(t, lay, ffn_kind::dense);
  const double experts_per_layer = routed_expert_parameters(t, ffn_kind::moe) / (tp * ep);
  const double embedding = embedding_parameters(t, vocab) / tp;

  job_costs out;
  out.chunks.resize(n);
  out.gradient_bytes.resize(n);
  out.expert_gradient_bytes.assign(n, 0.0);
  out.parameters.resize(p);
  out.chunk_seconds.resize(n);
  std::vector<op_costs> chunk_costs(n);
  std::vector<chunk_memory> chunk_mem(n);
  std::vector<chunk_memory> fused_mem(n);
  std::vector<double> chunk_moe_layers(n, 0.0);  // per global chunk
  std::uint32_t first_layer = 0;                 // of chunk g, in model order
  for (global_chunk g = 0; g < n; ++g) {
    const stage_index st = pl.stage_of(g);
    const chunk_index c = pl.local_of(g);
    // Each route's ends: its first chunk holds the embedding, its last the head.
    const stage_index embed_stage = pl.stage_of(g / route * route);
    if (pl.is_first(g)) {
      first_layer = 0;
    }
    chunk_content cc{layers_per_chunk[g], pl.is_first(g), pl.is_last(g)};
    out.chunks[g] = cc;
    const double l = cc.layers;
    // Each layer by its kind: an MoE model's leading dense layers weigh, cost and keep less.
    const auto [dense_layers, moe_layers] = t.layer_kinds(first_layer, cc.layers);
    first_layer += cc.layers;
    const double ld = dense_layers;
    const double lm = moe_layers;
    chunk_moe_layers[g] = lm;
    op_kind_seconds k;
    auto by_kind = [&](const kind_seconds& dense, const kind_seconds& moe) {
      kind_seconds total = ld * dense;
      if (lm > 0.0) {
        total += lm * moe;
      }
      return total;
    };
    k.forward = by_kind(ot.dense_layer_kinds.forward, ot.layer_kinds.forward);
    k.backward_input = by_kind(ot.dense_layer_kinds.backward_input, ot.layer_kinds.backward_input);
    k.backward_weight =
        by_kind(ot.dense_layer_kinds.backward_weight, ot.layer_kinds.backward_weight);
    k.recompute = by_kind(ot.dense_layer_kinds.recompute, ot.layer_kinds.recompute);
    for (const op_kind_seconds* end :
         {cc.embedding ? &ot.embedding : nullptr, cc.head ? &ot.head : nullptr}) {
      if (end != nullptr) {
        k.forward += end->forward;
        k.backward_input += end->backward_input;
        k.backward_weight += end->backward_weight;
      }
    }
    out.chunk_seconds[g] = k.all();
    op_costs oc;
    oc.forward = k.forward.total();
    oc.backward_input = k.backward_input.total();
    oc.backward_weight = k.backward_weight.total();
    if (recompute != recompute_kind::none) {
      oc.recompute = k.recompute.total();
    }
    chunk_memory cm;
    chunk_memory fused;  // cm for a BW order (job_costs::fused_memory)
    const double ends = (cc.embedding ? embed_bytes : 0.0) + (cc.head ? head_bytes : 0.0);
    const double w_bytes =
        ld * la_dense.weight_grad + lm * la.weight_grad + (cc.head ? head_w_bytes : 0.0);
    const double kept = ld * dense_kept + lm * layer_kept;
    cm.weight_grad_input = w_bytes;
    cm.received = received;
    switch (recompute) {
      case recompute_kind::none:
        cm.activation = kept + ends;
        break;
      case recompute_kind::selective:
        // The F keeps what the backward needs but the core; its R rebuilds the core inside the
        // backward: time, no memory.
        cm.activation = kept + ends;
        cm.input = cm.activation;
        break;
      case recompute_kind::full: {
        // The F keeps each layer's input; the backward then recomputes one layer at a time.
        // Before a separate W the R..B transient is every input, one layer's activations and
        // every layer's W operands (a W needs them all); a BW frees each layer's operands with
        // that layer's backward, so its transient is every input, one layer's activations and
        // the head's operands (its backward comes first and is not recomputed).
        cm.input = l * la.input + ends;
        const double one_layer = lm > 0.0 ? la.without_core : l > 0.0 ? la_dense.without_core : 0.0;
        cm.activation = cm.input + one_layer + w_bytes;
        fused = cm;
        fused.activation = cm.input + one_layer + (cc.head ? head_w_bytes : 0.0);
        fused.weight_grad_input = std::min(w_bytes, fused.activation);
        break;
      }
    }
    cm.activation = std::max(cm.activation, cm.weight_grad_input);
    if (recompute != recompute_kind::full) {
      fused = cm;
    }
    chunk_costs[std::size_t{st} * v + c] = oc;
    chunk_mem[std::size_t{st} * v + c] = cm;
    fused_mem[std::size_t{st} * v + c] = fused;

    stage_parameters& sp = out.parameters[st];
    double chunk_params = ld * per_dense_layer + lm * per_layer;
    sp.largest_unit =
        std::max({sp.largest_unit, ld > 0 ? per_dense_layer : 0.0, lm > 0 ? per_layer : 0.0});
    sp.layers += chunk_params;
    sp.experts += lm * experts_per_layer;
    if (lay.ep > 1) {
      out.expert_gradient_bytes[g] = job.gradient_reduce_bytes * lm * experts_per_layer;
    }
    if (cc.embedding) {
      sp.embedding += embedding;
      chunk_params += embedding;
      sp.largest_unit = std::max(sp.largest_unit, embedding);
    }
    if (cc.head) {
      double head_params = norm_parameters(t);
      if (!t.tied_embeddings || st != embed_stage) {
        head_params += embedding;
      }
      sp.head += head_params;
      chunk_params += head_params;
      sp.largest_unit = std::max(sp.largest_unit, head_params);
    }
    out.gradient_bytes[g] = job.gradient_reduce_bytes * chunk_params;
  }

  // Static bytes (the training state's bytes per parameter, plan/job.hpp, sharded as asked) and
  // the optimizer step's time. Context-parallel ranks hold the same parameters and shard the
  // optimizer like DP ranks: the sharding group is DP·CP; the routed experts' group with expert
  // parallelism is the DP·CP/EP ranks holding the same experts.
  const double d = static_cast<double>(lay.dp) * cp;
  const double ed = static_cast<double>(lay.expert_dp());
  const optimizer_sharding sh = job.sharding;
  out.static_memory.resize(p);
  out.optimizer_s.assign(p, 0.0);
  std::vector<double> static_total(p);
  const double memory_rate =
      job.cluster.hbm_bandwidth * job.cluster.memory_efficiency * job.cluster.achieved_fraction;
  for (stage_index st = 0; st < p; ++st) {
    const double params = out.parameters[st].total();
    const double experts = out.parameters[st].experts;
    // `bytes` per parameter of the stage, sharded: the experts' over their own group.
    auto sharded = [&](double bytes) {
      return lay.ep > 1 ? bytes * ((params - experts) / d + experts / ed) : bytes * params / d;
    };
    static_bytes& sb = out.static_memory[st];
    const double optimizer = optimizer_bytes_per_parameter * params;
    const double gradients = gradient_bytes_per_parameter * params;
    const double weights = weight_bytes_per_parameter * params;
    sb.optimizer =
        sh == optimizer_sharding::none ? optimizer : sharded(optimizer_bytes_per_parameter);
    sb.gradients = sh == optimizer_sharding::gradients || sh == optimizer_sharding::weights
                       ? sharded(gradient_bytes_per_parameter)
                       : gradients;
    // ZeRO-3 gathers weights before using them. Without pipeline parallelism FSDP gathers one
    // layer (or an end) at a time and frees it after use, the next one prefetched: two units'
    // bf16 weights whole (torchtitan's fully_shard per transformer block, Megatron-Core's FSDP
    // per module). With it the weights are not resharded after the forward (torchtitan's
    // default under PP, against an all-gather per micro-batch): every chunk of the stage is
    // gathered from its forward to its backward, the stage's bf16 weights whole.
    const stage_parameters& on_rank = out.parameters[st];
    const double gathered = d <= 1.0 ? 0.0
                            : p > 1  ? weight_bytes_per_parameter * on_rank.total()
                                     : 2.0 * weight_bytes_per_parameter * on_rank.largest_unit;
    sb.weights = sh == optimizer_sharding::weights ? sharded(weight_bytes_per_parameter) + gathered
                                                   : weights;
    static_total[st] = sb.total();
    if (memory_rate > 0.0) {
      const double updated = sh == optimizer_sharding::none ? params : sharded(1.0);
      const double held = sh == optimizer_sharding::gradients || sh == optimizer_sharding::weights
                              ? sharded(1.0)
                              : params;
      out.optimizer_s[st] =
          (adam_step_bytes_per_parameter * updated + gradient_norm_bytes_per_parameter * held +
           zero_gradient_bytes_per_parameter * held) /
          memory_rate;
    }
  }

  // Pipeline transfers, link by link (where each pair of stages' ranks are).
  const std::vector<double> links = pipeline_link_times(job, lay, eb.tensor * sbh);
  out.pipeline_transfer_s = links.empty() ? 0.0 : *std::max_element(links.begin(), links.end());
  const bool links_differ = std::any_of(links.begin(), links.end(), [&](double link) {
    return link != 0.0 && link != out.pipeline_transfer_s;
  });

  // Gradients reduce over the DP·CP ranks of a stage: `tp` apart from each other. With several
  // routes each model stage is held by one rank per route (DualPipe: ranks s and p − 1 − s), and
  // the copies' gradients sum in the same ring: routes · DP·CP ranks, inside a node only when
  // the whole pipeline is.
  const std::uint64_t copies = pl.routes();
  const std::uint64_t per_stage_ranks = std::uint64_t{lay.tp} * lay.cp * lay.dp;
  const bool copies_in_node =
      copies == 1 || stages_in_one_node(per_stage_ranks, 0, p - 1, job.cluster.gpus_per_node);
  const ring_link inter_link{job.cluster.inter_node_bandwidth, job.cluster.inter_node_latency};
  const std::uint64_t reduce_group = std::uint64_t{lay.dp} * lay.cp * copies;
  const ring_link dp_link =
      copies_in_node ? group_link(job.cluster, lay.tp, reduce_group) : inter_link;
  const bool dp_in_node =
      copies_in_node && in_one_node(lay.tp, reduce_group, job.cluster.gpus_per_node);
  out.dp = reduce_group;
  out.dp_bandwidth = dp_link.bandwidth;
  out.dp_latency = dp_link.latency;
  out.dp_reduce_scatter = job.sharding != optimizer_sharding::none;
  // The experts' ring: the ranks holding the same experts, TP·EP apart.
  const ring_link expert_link =
      copies_in_node ? group_link(job.cluster, std::uint64_t{lay.tp} * lay.ep, lay.expert_dp())
                     : inter_link;
  out.expert_dp = lay.expert_dp() * copies;
  out.expert_dp_bandwidth = expert_link.bandwidth;
  out.expert_dp_latency = expert_link.latency;
  out.dp_overlapped = job.overlap_grad_reduce;
  out.overlap_slowdown = job.cluster.overlap_slowdown;
  out.blocking_p2p = job.blocking_p2p;
  out.usable_memory = job.cluster.usable_memory();
  // The step waits for each stage's reductions, one bucket after another: when their sum (with
  // room for the pipeline added) overflows, no step time is a number.
  std::vector<double> reduce_sum(p, 0.0);
  for (global_chunk g = 0; g < n; ++g) {
    if (const std::uint32_t k = dp_bucket_count(out.chunks[g]); k > 0) {
      reduce_sum[pl.stage_of(g)] += k * out.bucket_reduce_time(g, k);
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

  // A chunk boundary between stages: the receiving rank of a TP group without sequence
  // parallelism all-gathers the activation (or gradient) whose 1/TP share each rank received
  // (Megatron-LM's scatter-gather of the pipeline send); with blocking sends the sending op
  // also lasts its transfer, without them the transfer runs beside the stage's next op, which
  // it slows (overlap_split): charged to the sending op, whose F or B the next op's size is.
  const bool gather_after_receive = lay.tp > 1 && !lay.sequence_parallel;
  const double receive_gather =
      gather_after_receive
          ? ring_reduce_scatter_time(lay.tp, eb.tensor * sbh, job.cluster.intra_node_bandwidth,
                                     job.cluster.intra_node_latency)
          : 0.0;
  for (global_chunk g = 0; g < n; ++g) {
    const stage_index st = pl.stage_of(g);
    op_costs& oc = chunk_costs[std::size_t{st} * v + pl.local_of(g)];
    kind_seconds& ks = out.chunk_seconds[g];
    // The seconds a send adds to its op: its transfer when blocking, else its contention.
    auto send_seconds = [&](double op, stage_index to) {
      const double transfer = links[std::size_t{st} * p + to];
      if (job.blocking_p2p) {
        ks[time_kind::communication] += transfer;
        return transfer;
      }
      const double slowed = overlap_split(op, transfer, job.cluster.overlap_slowdown).compute - op;
      ks[time_kind::gemm] += slowed;
      return slowed;
    };
    if (!pl.is_last(g) && pl.stage_of(g + 1) != st) {
      oc.forward += send_seconds(oc.forward, pl.stage_of(g + 1));
      oc.backward_input += receive_gather;  // the gradient from the next chunk's stage
      ks[time_kind::communication] += receive_gather;
    }
    if (!pl.is_first(g) && pl.stage_of(g - 1) != st) {
      oc.backward_input += send_seconds(oc.backward_input, pl.stage_of(g - 1));
      oc.forward += receive_gather;  // the activation from the previous chunk's stage
      ks[time_kind::communication] += receive_gather;
    }
  }

  if (job.sharding == optimizer_sharding::weights && reduce_group > 1) {
    // Each chunk's bf16 weights are gathered over DP before its ops run. Without pipeline
    // parallelism before every F and B (resharded after each), prefetched: the op lasts the
    // longer of its compute (slowed beside the gather, overlap_split) and the gather. With it
    // once a step (PyTorch's pipelining keeps an FSDP stage unsharded until its last backward,
    // torchtitan does not reshard after the forward: the static bytes above): only the first
    // chunk's gather is not hidden, before the step's first forward.
    auto gather_of = [&](global_chunk g) {
      return out.dp_gather_time(weight_bytes_per_parameter * out.gradient_bytes[g] /
                                job.gradient_reduce_bytes);
    };
    if (p > 1) {
      out.first_gather_s = gather_of(0);
    } else {
      const double slowdown = job.cluster.overlap_slowdown;
      for (global_chunk g = 0; g < n; ++g) {
        op_costs& oc = chunk_costs[std::size_t{pl.stage_of(g)} * v + pl.local_of(g)];
        const double gather = gather_of(g);
        oc.forward = overlap_split(oc.forward, gather, slowdown).total();
        oc.backward_input = overlap_split(oc.backward_input, gather, slowdown).total();
      }
    }
  }

  // An overlapped F and B pair of a chunk (DualPipe's, DualPipeV's) hides each op's all-to-alls
  // behind the other's compute (overlapped_pair_time); schedules without pairs never read it.
  if (ot.layer_exchange_forward + ot.layer_exchange_backward > 0.0) {
    for (global_chunk g = 0; g < n; ++g) {
      op_costs& oc = chunk_costs[std::size_t{pl.stage_of(g)} * v + pl.local_of(g)];
      const double af = chunk_moe_layers[g] * ot.layer_exchange_forward;
      const double ab = chunk_moe_layers[g] * ot.layer_exchange_backward;
      oc.overlapped = overlapped_pair_time({oc.forward - af, af}, {oc.backward_input - ab, ab},
                                           job.cluster.overlap_slowdown);
    }
  }

  out.costs = cost_model{};
  out.costs.set_chunk_costs(v, chunk_costs);
  if (job.blocking_p2p) {
    out.costs.set_comm(0.0);  // each transfer is inside its sending op
  } else {
    out.costs.set_comm(out.pipeline_transfer_s);
    if (links_differ) {
      out.costs.set_link_comm(p, links);  // T_comm above stays the slowest link's
    }
  }
  out.memory.set_chunk_memory(v, chunk_mem);
  out.memory.set_static_memory(static_total);
  out.fused_memory.set_chunk_memory(v, fused_mem);
  out.fused_memory.set_static_memory(static_total);
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
