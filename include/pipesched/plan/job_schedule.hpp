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

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/gen/registry.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/model/inline_recompute.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/job_costs.hpp"
#include "pipesched/plan/job_model.hpp"
#include "pipesched/plan/partition.hpp"
#include "pipesched/plan/plan_types.hpp"
#include "pipesched/tools/request.hpp"
#include "pipesched/transform/recompute.hpp"

// The job-schedule step shared by the planner and pack: a generator's placement, the
// partition's weights, a job's schedule generated (within a byte limit, R ops inserted), and
// one choice evaluated: simulated, checked in bytes, its gradient reduction added.

namespace pipesched {

namespace detail {

/// The placement a registered generator uses for p stages and v chunks (it decides: loop,
/// V-shape, ...), from a one-micro-batch schedule; nullopt when it refuses the shape (its
/// message in `*why` when given).
inline std::optional<placement> placement_for(const generator_entry& g,
                                              std::uint32_t p,
                                              std::uint32_t v,
                                              std::string* why = nullptr) {
  generator_params gp;
  gp.stages = p;
  gp.microbatches = std::max<std::uint32_t>(1, 2 * p);
  gp.chunks = v;
  try {
    generation_options o;
    if (g.searches) {
      zb_auto_options z;
      z.search_evaluations = 0;
      z.threads = 1;
      z.published = false;
      o.search = z;
    }
    return g.generate_result(gp, o).sched.layout();
  } catch (const invalid_argument& e) {
    if (why) {
      *why = e.what();
    }
    return std::nullopt;
  }
}

/// One micro-batch's op times as balanced_partition weighs them (docs/model.md §10,
/// "Partition"): a layer's F + B + W (+ R), the embedding on global chunk 0, the head's three
/// ops on the last of `n` chunks. The planner weighs the layout's micro-batch, `pack` the
/// batch's mean one.
inline partition_weights partition_weights_of(const job_op_times& ot,
                                              std::uint32_t n,
                                              std::vector<std::uint32_t> caps = {}) {
  partition_weights w;
  w.layer_time = ot.layer_total();
  w.fixed_time.assign(n, 0.0);
  w.fixed_time[0] += ot.embedding.all().total();
  w.fixed_time[n - 1] += ot.head.all().total();
  w.max_stage_layers = std::move(caps);
  return w;
}

/// Where stage `s`'s time goes per step (plan_stage::seconds_by_kind, without the optimizer):
/// each micro-batch's ops of its chunks by kind, and as communication the pipeline transfers it
/// sends (an activation to the next chunk's stage, a gradient to the previous one's, when on
/// another stage) and its gradient reduction's buckets.
inline kind_seconds stage_seconds_by_kind(const schedule& sched,
                                          const job_costs& jc,
                                          stage_index s) {
  const placement& pl = sched.layout();
  // Each micro-batch goes down one route: a chunk runs the micro-batches of its route.
  const double m = static_cast<double>(sched.microbatches()) / pl.routes();
  kind_seconds out;
  for (chunk_index c = 0; c < pl.chunks(); ++c) {
    const global_chunk g = pl.global(s, c);
    if (g < jc.chunk_seconds.size()) {
      out += m * jc.chunk_seconds[g];
    }
    // Non-blocking sends run beside the compute (blocking ones are in the ops already).
    double sends = 0.0;
    if (!jc.blocking_p2p && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
      sends += jc.costs.comm(s, pl.stage_of(g + 1));
    }
    if (!jc.blocking_p2p && !pl.is_first(g) && pl.stage_of(g - 1) != s) {
      sends += jc.costs.comm(s, pl.stage_of(g - 1));
    }
    out[time_kind::communication] += m * sends;
    if (const std::uint32_t k = dp_bucket_count(jc.chunks[g]); k > 0) {
      out[time_kind::communication] += k * jc.bucket_reduce_time(g, k);
    }
  }
  return out;
}

/// What a job's schedule is generated from: the generator's shape, the timing model and the
/// sizes it decides with, and the byte limit a searching generator keeps within.
struct job_schedule_spec {
  std::uint32_t stages = 0;
  std::uint32_t microbatches = 0;
  std::uint32_t chunks = 1;
  std::uint32_t group_size = 0;  ///< generator_params::group_size
  recompute_kind recompute = recompute_kind::none;
  cost_model costs;     ///< inline recompute's when recomputing
  memory_model memory;  ///< likewise: the plain model the searching generators decide with
  double memory_limit = 0.0;
  /// The zero-bubble search's local-search budget (searching generators; nullopt: theirs).
  std::optional<std::size_t> search_evaluations;
  /// A searching generator that finds no order within memory_limit, or fixes its own: generated
  /// without the limit (true) or refused (false: invalid_argument).
  bool unlimited_fallback = true;
};

/// The schedule of a job (the planner's candidates, `pack`'s packings): generated, searching
/// generators within the byte limit, then the R ops right before each backward when
/// recomputing. Throws invalid_argument when the generator refuses the shape. `limited`, when
/// given, tells whether the generator kept within spec.memory_limit (false: it fixes its own or
/// takes none).
inline schedule generate_job_schedule(const job_schedule_spec& spec,
                                      const generator_registry& registry,
                                      const generator_entry& gen,
                                      bool* limited = nullptr) {
  schedule_request req;
  generated_source src{gen.name, {}};
  if (gen.searches) {
    zb_auto_options z;
    if (spec.search_evaluations) {
      z.search_evaluations = *spec.search_evaluations;
    }
    z.threads = 1;
    src.options.search = z;
  }
  req.source = src;
  req.params.stages = spec.stages;
  req.params.microbatches = spec.microbatches;
  req.params.chunks = spec.chunks;
  req.params.group_size = spec.group_size;
  req.params.costs = spec.costs;
  req.params.memory = spec.memory;
  if (gen.searches) {
    req.params.memory_limit = spec.memory_limit;  // the others are checked by the caller
  }
  generation_result g;
  if (limited) {
    *limited = req.params.memory_limit.has_value();
  }
  try {
    g = build_schedule(req, registry);
  } catch (const invalid_argument&) {
    if (!req.params.memory_limit || !spec.unlimited_fallback) {
      throw;
    }
    // A searching generator that fixes its own limit (zb-1p, zb-2p: p·M_B, 2p·M_B), or finds
    // none within this one: generated without it, then checked like the others.
    req.params.memory_limit.reset();
    if (limited) {
      *limited = false;
    }
    g = build_schedule(req, registry);
  }
  if (spec.recompute != recompute_kind::none) {
    schedule_request rr;
    rr.source = given_source{std::move(g.sched)};
    rr.recompute = recompute_request{true, {}, recompute_placement::before_backward};
    g = build_schedule(rr, registry);
  }
  return std::move(g.sched);
}

/// Whether `sched` runs a W of its own (else every backward is a BW op, B and W fused).
inline bool runs_separate_w(const schedule& sched) {
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (const op& o : sched.ops(s)) {
      if (o.kind == op_kind::backward_weight) {
        return true;
      }
    }
  }
  return false;
}

/// The sizes `sched` is checked with (docs/model.md §10.3): jc.memory when it runs a W of its
/// own, jc.fused_memory when every backward is a BW op.
inline const memory_model& memory_for(const job_costs& jc, const schedule& sched) {
  return runs_separate_w(sched) ? jc.memory : jc.fused_memory;
}

/// Evaluates one candidate whose job_costs are built, its order generated within `limit`
/// bytes (searching generators; the others ignore it): generates (recomputation inside the
/// backward), simulates, checks memory against the usable memory and reduces gradients.
/// Throws invalid_argument when the generator refuses. `limited` as generate_job_schedule's.
inline plan_entry evaluate_choice_within(const training_job& job,
                                         const plan_choice& choice,
                                         const job_costs& jc,
                                         const generator_registry& registry,
                                         const generator_entry& gen,
                                         std::size_t search_evaluations,
                                         double limit,
                                         bool* limited = nullptr,
                                         bool unlimited_fallback = true) {
  const plan_layout& lay = choice.layout;
  // Recomputation runs inside the backward, as PyTorch and Megatron-LM run it: the order is
  // timed with the recompute in the backward's cost (model/inline_recompute.hpp); the
  // searching generators keep within the limit under that model's sizes, which never fall
  // below the real ones; the memory is checked on the order with its R ops, right before each
  // backward, against the real sizes (an input kept from F, the activations rebuilt by R).
  cost_model costs = jc.costs;
  memory_model plain_memory = jc.memory;
  if (choice.recompute != recompute_kind::none) {
    std::tie(costs, plain_memory) = inline_recompute(jc.costs, jc.memory, lay.pp, lay.chunks);
  }
  job_schedule_spec spec;
  spec.stages = lay.pp;
  spec.microbatches = lay.microbatches;
  spec.chunks = lay.chunks;
  spec.group_size = choice.group_size;
  spec.recompute = choice.recompute;
  spec.costs = costs;
  spec.memory = plain_memory;
  spec.memory_limit = limit;
  spec.unlimited_fallback = unlimited_fallback;
  spec.search_evaluations = search_evaluations;
  plan_entry e;
  e.choice = choice;
  e.sched = generate_job_schedule(spec, registry, gen, limited);
  e.costs = std::move(costs);
  e.memory = memory_for(jc, e.sched);
  const simulation_result sim = simulate(e.sched, e.costs, {true, false, false});
  if (!sim.completed()) {
    fail("plan: ", gen.name, " gave an order that deadlocks");
  }
  memory_options mo = memory_options::with_limit(jc.usable_memory);
  mo.record_curve = false;
  const memory_report mem = check_memory(e.sched, e.memory, mo);
  const std::vector<double> ends = dp_reduce_ends(e.sched, sim, jc);
  const placement& pl = e.sched.layout();
  e.makespan_s = sim.makespan;
  double step = sim.makespan;
  e.stages.resize(lay.pp);
  for (stage_index s = 0; s < lay.pp; ++s) {
    plan_stage& st = e.stages[s];
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      const global_chunk gc = pl.global(s, c);
      st.chunks.push_back(gc);
      st.layers += jc.chunks[gc].layers;
      st.embedding = st.embedding || jc.chunks[gc].embedding;
      st.head = st.head || jc.chunks[gc].head;
    }
    st.statics = jc.static_memory[s];
    st.parameters = jc.parameters[s];
    st.total = mem.stages[s].peak;
    st.activations = std::max(0.0, st.total - st.statics.total());
    st.busy_s = sim.stages[s].busy;
    st.dp_reduce_end_s = ends[s];
    st.optimizer_s = jc.optimizer_s.empty() ? 0.0 : jc.optimizer_s[s];
    step = std::max(step, ends[s]);
    e.optimizer_s = std::max(e.optimizer_s, st.optimizer_s);
    e.peak_memory_bytes = std::max(e.peak_memory_bytes, st.total);
    st.seconds_by_kind = detail::stage_seconds_by_kind(e.sched, jc, s);
    st.seconds_by_kind[time_kind::memory_bound] += st.optimizer_s;
  }
  e.fits = mem.within_budget();
  e.usable_memory_bytes = jc.usable_memory;
  // The optimizer steps once every gradient is reduced (the gradient norm for clipping is
  // global), every stage at once: the slowest stage's step follows the last reduction. ZeRO-3
  // under pipeline parallelism first gathers the first chunk's weights (job_costs).
  e.dp_exposed_s = step - sim.makespan + jc.first_gather_s;
  step += jc.first_gather_s + e.optimizer_s;
  e.step_time_s = step;
  const double global_batch = static_cast<double>(lay.dp) * lay.microbatches * lay.micro_batch;
  e.flops_per_iteration =
      static_cast<double>(lay.dp) * lay.microbatches * model_flops_per_microbatch(job, lay);
  const double gpus = static_cast<double>(job.gpus);
  e.tokens_per_s = global_batch * static_cast<double>(job.sequence) / step;
  e.tflops_per_gpu = e.flops_per_iteration / (step * gpus) / 1e12;
  e.mfu =
      e.flops_per_iteration / (step * gpus * job.cluster.peak_flops(job.model.activation_bytes));
  e.bubble_rate = sim.bubble_rate;
  return e;
}

/// The memory rungs a searching generator is run at: every multiple of 5 % of the GPU's memory
/// (usable fractions 0.05, 0.1, ..., 1), bytes.
inline constexpr std::uint32_t memory_rungs = 20;

/// Evaluates one candidate (evaluate_choice_within). With `rungs`, a searching generator that
/// keeps within a limit is run at memory rungs only: the lowest rung at or above the usable
/// memory, then each rung below it down to the first it cannot keep within; of the orders that
/// fit the usable memory the fastest is kept (on a tie, the one at the higher rung; none fits:
/// the smallest). Its heuristics are not monotone in the limit (nor is its objective, the
/// makespan, the step time, which adds the gradient reduction), so it is never run at the
/// usable memory itself: the limits it is run at under a usable memory are all run under any
/// larger one, and an order that fits the smaller fits the larger, so more usable memory never
/// gives this candidate a slower order, on a rung or between two (docs/model.md §10).
inline plan_entry evaluate_choice(const training_job& job,
                                  const plan_choice& choice,
                                  const job_costs& jc,
                                  const generator_registry& registry,
                                  const generator_entry& gen,
                                  std::size_t search_evaluations,
                                  bool rungs = true) {
  if (!rungs || !gen.searches) {
    return evaluate_choice_within(job, choice, jc, registry, gen, search_evaluations,
                                  jc.usable_memory);
  }
  const double unit = job.cluster.memory_bytes / memory_rungs;
  // The rung at or above the usable memory (a usable memory within rounding of a rung is on it).
  auto top = static_cast<std::uint32_t>(std::ceil(jc.usable_memory / unit * (1.0 - 1e-12)));
  top = std::clamp<std::uint32_t>(top, 1, memory_rungs);
  bool limited = false;
  // Without an order within the top rung (or with a limit of its own: zb-1p, zb-2p), generated
  // without one: shown as not fitting, nearest to fitting.
  plan_entry best = evaluate_choice_within(job, choice, jc, registry, gen, search_evaluations,
                                           unit * top, &limited);
  if (!limited) {
    return best;
  }
  for (std::uint32_t k = top - 1; k >= 1; --k) {
    try {
      plan_entry e = evaluate_choice_within(job, choice, jc, registry, gen, search_evaluations,
                                            unit * k, nullptr, false);
      if (e.fits ? !best.fits || e.step_time_s < best.step_time_s
                 : !best.fits && e.peak_memory_bytes < best.peak_memory_bytes) {
        best = std::move(e);
      }
    } catch (const invalid_argument&) {
      break;  // no order within this rung, nor within a lower one
    }
  }
  return best;
}

}  // namespace detail

}  // namespace pipesched
