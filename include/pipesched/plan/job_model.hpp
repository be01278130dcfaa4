#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/analysis/simulate.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/inline_recompute.hpp"
#include "pipesched/model/transformer_spec.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/job_costs.hpp"

// The job model's rules that are not a cost table (docs/model.md §10): the model FLOPs a step
// counts, when the data-parallel gradient reduction ends behind the pipeline, and the bounds
// the search skips candidates by. job_costs.hpp holds the op times and sizes they read.

namespace pipesched {

namespace detail {

/// Model FLOPs of one micro-batch over the whole model (Megatron-LM's count: F + B + W = 3·F,
/// the causal attention core halved, the logits included, an MoE layer's activated experts
/// only).
inline double model_flops_per_microbatch(const training_job& job, const plan_layout& lay) {
  const std::uint64_t vocab = padded_vocab(job.model.vocab, lay.tp, job.vocab_multiple);
  return 3.0 *
         (layers_forward_flops(job.model, token_counts::uniform(job.sequence, lay.micro_batch)) +
          head_flops(job.model, job.sequence, lay.micro_batch, vocab));
}

/// When each stage's gradient reduction ends: each chunk's gradients reduce in buckets (one
/// per layer, and one for the embedding or head) that are final when the part of the chunk's
/// last W (or BW) computing them ends (j/K of it for bucket j of K, the backward running
/// through a chunk's layers in turn, docs/robustness.md §8; without job_costs::dp_overlapped,
/// when the stage's last gradient op ends), one bucket after another on the stage's
/// data-parallel ring. The reductions that run before the stage's last gradient op ends slow
/// its compute (overlap_split): the stage is done no earlier than that op's end plus the
/// slowdown of the reduction time beside it.
inline std::vector<double> dp_reduce_ends(const schedule& sched,
                                          const simulation_result& sim,
                                          const job_costs& jc) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t v = pl.chunks();
  std::vector<double> ends(p, 0.0);
  for (stage_index s = 0; s < p; ++s) {
    // The last gradient op of each local chunk.
    std::vector<std::pair<double, double>> last(v, {-1.0, -1.0});  // start, end
    const auto ops = sched.ops(s);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const op& o = ops[i];
      if ((o.kind == op_kind::backward_weight || o.kind == op_kind::backward_full) && o.chunk < v &&
          sim.ops[s][i].end > last[o.chunk].second) {
        last[o.chunk] = {sim.ops[s][i].start, sim.ops[s][i].end};
      }
    }
    struct bucket {
      double ready;
      double seconds;
    };
    // Without overlap every bucket waits for the stage's last gradient op.
    double stage_last = 0.0;
    for (const auto& [start, end] : last) {
      stage_last = std::max(stage_last, end);
    }
    std::vector<bucket> buckets;
    for (chunk_index c = 0; c < v; ++c) {
      const global_chunk g = pl.global(s, c);
      const chunk_content& cc = jc.chunks[g];
      const std::uint32_t k = dp_bucket_count(cc);
      const double seconds = jc.bucket_reduce_time(g, k);
      const auto [start, end] = last[c];
      for (std::uint32_t j = 1; j <= k; ++j) {
        buckets.push_back({jc.dp_overlapped ? start + (end - start) * j / k : stage_last, seconds});
      }
    }
    std::sort(buckets.begin(), buckets.end(),
              [](const bucket& a, const bucket& b) { return a.ready < b.ready; });
    double t = 0.0;
    double beside = 0.0;  // reduction seconds while the stage still computes
    for (const bucket& b : buckets) {
      const double start = std::max(t, b.ready);
      t = start + b.seconds;
      beside += std::clamp(stage_last - start, 0.0, b.seconds);
    }
    // The stage's time to its last gradient op (idle gaps taken as compute) with the
    // reductions beside it.
    ends[s] = std::max(t, overlap_split(stage_last, beside, jc.overlap_slowdown).compute);
  }
  return ends;
}

/// What no schedule of a layout can beat: its step time (seconds) and its fullest stage's
/// peak (bytes). The planner skips candidates by them (docs/model.md §10).
struct schedule_bounds {
  double time_s = 0.0;        ///< no schedule takes less
  double memory_bytes = 0.0;  ///< no schedule needs less on its fullest stage
};

/// The bounds of `jc`'s layout under placement `pl`: every stage runs m micro-batches of its
/// chunks' work from when the first forward reaches it, and holds its statics and at least its
/// largest chunk's activations.
inline schedule_bounds schedule_bounds_of(const job_costs& jc,
                                          const plan_layout& lay,
                                          recompute_kind recompute,
                                          const placement& pl) {
  schedule_bounds b;
  const std::uint32_t p = lay.pp;
  const std::uint32_t v = lay.chunks;
  shaped_cost_model c = jc.costs.for_shape(p, v, "plan");
  const shaped_memory_model m = jc.memory.for_shape(p, v, "plan");
  // A BW order may need less (job_costs::fused_memory): the bound takes the smaller.
  const shaped_memory_model fused = jc.fused_memory.for_shape(p, v, "plan");
  if (recompute != recompute_kind::none) {
    c = inline_recompute(jc.costs, jc.memory, p, v).first.for_shape(p, v, "plan");
  }
  // The first micro-batch's forward reaches global chunk k no earlier than the forwards of
  // the chunks before it and a transfer per stage change.
  const std::uint32_t n = p * v;
  std::vector<double> reach(n, 0.0);
  for (global_chunk k = 1; k < n; ++k) {
    if (pl.is_first(k)) {
      continue;  // another route's entry: its first forward needs nothing
    }
    const stage_index from = pl.stage_of(k - 1);
    reach[k] = reach[k - 1] + c.at(from, pl.local_of(k - 1)).forward + c.comm(from, pl.stage_of(k));
  }
  // Each micro-batch goes down one route: a chunk runs the micro-batches of its route.
  const double per_chunk = static_cast<double>(lay.microbatches) / pl.routes();
  for (stage_index s = 0; s < p; ++s) {
    double start = std::numeric_limits<double>::infinity();
    for (chunk_index k = 0; k < v; ++k) {
      start = std::min(start, reach[pl.global(s, k)]);
    }
    double work = 0.0;
    double largest = 0.0;
    for (chunk_index k = 0; k < v; ++k) {
      const op_costs t = c.at(s, k);
      work += t.forward + t.backward_input + t.backward_weight;
      largest = std::max(largest, std::min(m.at(s, k).activation, fused.at(s, k).activation));
    }
    // Every stage runs its chunks' work for their routes' micro-batches, starting when the first
    // forward reaches it; every chunk's activations are live at least once (from its F, or its
    // R, to its B).
    b.time_s = std::max(b.time_s, start + per_chunk * work);
    b.memory_bytes = std::max(b.memory_bytes, m.static_memory(s) + largest);
  }
  return b;
}

}  // namespace detail

}  // namespace pipesched
