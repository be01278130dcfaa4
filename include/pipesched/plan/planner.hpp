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
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/model/inline_recompute.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/job_costs.hpp"
#include "pipesched/plan/partition.hpp"
#include "pipesched/plan/request.hpp"
#include "pipesched/transform/recompute.hpp"

// The planner (docs/model.md §10): from a model, a cluster and a batch to the fastest layout
// and schedule that fit in GPU memory, by generating, simulating and checking every candidate
// with real op times (seconds) and real sizes (bytes).

namespace pipesched {

/// One point of the space: a layout, a schedule generator, recomputation and a partition.
struct plan_choice {
  plan_layout layout;
  std::string schedule;
  recompute_kind recompute = recompute_kind::selective;
  std::vector<std::uint32_t> partition;  ///< layers per global chunk, model order
  std::uint32_t group_size = 0;          ///< interleaved-1f1b's micro-batches per round (0: p)

  friend bool operator==(const plan_choice&, const plan_choice&) = default;
};

/// One pipeline stage of a plan: what it holds and how its memory adds up, per GPU.
struct plan_stage {
  std::vector<global_chunk> chunks;  ///< its global chunks, local chunk order
  std::uint32_t layers = 0;
  bool embedding = false;
  bool head = false;
  static_bytes statics;          ///< weights, gradients, optimizer states
  double activations = 0.0;      ///< the schedule's activation peak (check_memory)
  double total = 0.0;            ///< statics + activations: the stage's peak, bytes
  double busy_s = 0.0;           ///< compute per step
  double dp_reduce_end_s = 0.0;  ///< when its gradient reduction ends
};

/// A plan: the choice and what it costs (docs/model.md §10).
struct plan_entry {
  plan_choice choice;
  bool fits = false;          ///< every stage's total <= usable memory
  double step_time_s = 0.0;   ///< makespan + exposed data-parallel time
  double makespan_s = 0.0;    ///< the pipeline's (simulate)
  double dp_exposed_s = 0.0;  ///< gradient reduction not hidden behind the pipeline
  double tokens_per_s = 0.0;
  double tflops_per_gpu = 0.0;       ///< model FLOPs / (step time · GPUs), in TFLOP/s
  double mfu = 0.0;                  ///< model FLOPs / (step time · GPUs · peak)
  double bubble_rate = 0.0;          ///< the simulator's (analysis/metrics.hpp)
  double flops_per_iteration = 0.0;  ///< model FLOPs of one global batch
  double peak_memory_bytes = 0.0;    ///< the largest stage total
  double usable_memory_bytes = 0.0;
  std::vector<plan_stage> stages;
  schedule sched;       ///< the evaluated schedule (compute ops, R for recompute)
  cost_model costs;     ///< its op times in seconds
  memory_model memory;  ///< its sizes in bytes
};

/// What the search did.
struct plan_search_stats {
  std::size_t candidates = 0;     ///< points of the space enumerated
  std::size_t evaluated = 0;      ///< generated, simulated and checked
  std::size_t pruned_memory = 0;  ///< skipped: cannot fit whatever the schedule
  std::size_t pruned_time = 0;    ///< skipped: cannot beat the plans kept
  std::size_t failed = 0;         ///< the generator refused the shape or found no fit
  double seconds = 0.0;
};

/// A point of the Pareto frontier of step time against peak memory among evaluated plans.
struct plan_frontier_point {
  double step_time_s = 0.0;
  double peak_memory_bytes = 0.0;
  bool fits = false;
  std::string label;  ///< "TP8 PP16 v2 b1 interleaved-1f1b selective"
};

struct plan_result {
  /// Best first: fitting plans by step time (the top K). When every option of a layout is
  /// fixed (plan_options::evaluates_one), the one plan, fitting or not.
  std::vector<plan_entry> plans;
  std::optional<plan_entry> baseline;  ///< plan_options::baseline, evaluated by the same model
  std::vector<plan_frontier_point> frontier;  ///< by step time
  plan_search_stats stats;
  /// The smallest per-GPU need found (the lowest largest-stage peak, or its lower bound for a
  /// candidate never generated) when nothing fits; 0 otherwise.
  double smallest_need_bytes = 0.0;
  std::uint64_t global_batch = 0;  ///< sequences per step
};

/// Choices a user fixes (set) or leaves to the search (unset).
struct plan_fixed {
  std::optional<std::uint32_t> tp, pp, chunks, micro_batch, microbatches;
  std::optional<std::uint32_t> group_size;  ///< generator_params::group_size; not searched
  std::optional<std::uint64_t> dp;
  std::optional<std::string> schedule;
  std::optional<recompute_kind> recompute;
  std::optional<bool> sequence_parallel;
  partition_spec partition{};

  /// True when the layout and the schedule are given: plan() evaluates that layout (the
  /// choices left unset are searched and the best kept).
  bool evaluates_one() const noexcept { return tp && pp && schedule && micro_batch; }
};

struct plan_options {
  plan_fixed fixed{};
  /// Another layout to evaluate by the same model and compare against (its unset choices are
  /// searched: it is compared at its best).
  std::optional<plan_fixed> baseline{};
  std::size_t top = 5;  ///< plans kept
  /// zb-auto / zb-v local search budget per candidate, in candidate orders timed.
  std::size_t search_evaluations = 64;
  /// The top plans from a searching generator search again with this budget (0: not again).
  std::size_t polish_evaluations = 2000;
  /// Threads evaluating candidates; 0: the machine's hardware threads.
  unsigned threads = 0;
  /// Generators by name; nullptr: default_registry().
  const generator_registry* registry = nullptr;
};

namespace detail {

/// "TP8 PP16 v2 b1 m16 interleaved-1f1b selective SP".
inline std::string plan_label(const plan_choice& c) {
  std::string out = "TP" + std::to_string(c.layout.tp) + " PP" + std::to_string(c.layout.pp);
  if (c.layout.chunks > 1) {
    out += " v" + std::to_string(c.layout.chunks);
  }
  out += " b" + std::to_string(c.layout.micro_batch) + " m" +
         std::to_string(c.layout.microbatches) + " " + c.schedule + " " +
         std::string(to_string(c.recompute));
  if (c.layout.sequence_parallel) {
    out += " SP";
  }
  return out;
}

/// Model FLOPs of one micro-batch over the whole model (Megatron-LM's count: F + B + W = 3·F,
/// the causal attention core halved, the logits included).
inline double model_flops_per_microbatch(const training_job& job, const plan_layout& lay) {
  const layer_flops lf = flops_of_layer(job.model, job.sequence, lay.micro_batch);
  const std::uint64_t vocab = padded_vocab(job.model.vocab, lay.tp, job.vocab_multiple);
  return 3.0 * (static_cast<double>(job.model.layers) * lf.forward() +
                head_flops(job.model, job.sequence, lay.micro_batch, vocab));
}

/// When each stage's gradient reduction ends: each chunk's gradients reduce in buckets (one
/// per layer, and one for the embedding or head) that are final when the part of the chunk's
/// last W (or BW) computing them ends (j/K of it for bucket j of K, the backward running
/// through a chunk's layers in turn, docs/robustness.md §8), one bucket after another on the
/// stage's data-parallel ring.
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
      double bytes;
    };
    std::vector<bucket> buckets;
    for (chunk_index c = 0; c < v; ++c) {
      const global_chunk g = pl.global(s, c);
      const chunk_content& cc = jc.chunks[g];
      const std::uint32_t k = dp_bucket_count(cc);
      const double bytes = jc.gradient_bytes[g] / std::max(1u, k);
      const auto [start, end] = last[c];
      for (std::uint32_t j = 1; j <= k; ++j) {
        buckets.push_back({start + (end - start) * j / k, bytes});
      }
    }
    std::sort(buckets.begin(), buckets.end(),
              [](const bucket& a, const bucket& b) { return a.ready < b.ready; });
    double t = 0.0;
    for (const bucket& b : buckets) {
      t = std::max(t, b.ready) + jc.dp_reduce_time(b.bytes);
    }
    ends[s] = t;
  }
  return ends;
}

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
  w.fixed_time[0] += ot.embedding_forward;
  w.fixed_time[n - 1] += 3.0 * ot.head;
  w.max_stage_layers = std::move(caps);
  return w;
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
  e.memory = jc.memory;
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
    st.total = mem.stages[s].peak;
    st.activations = std::max(0.0, st.total - st.statics.total());
    st.busy_s = sim.stages[s].busy;
    st.dp_reduce_end_s = ends[s];
    step = std::max(step, ends[s]);
    e.peak_memory_bytes = std::max(e.peak_memory_bytes, st.total);
  }
  e.fits = mem.within_budget();
  e.usable_memory_bytes = jc.usable_memory;
  e.step_time_s = step;
  e.dp_exposed_s = step - sim.makespan;
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

/// The memory rungs a searching generator is also run at: every multiple of 5 % of the GPU's
/// memory (usable fractions 0.05, 0.1, ..., 1), bytes.
inline constexpr std::uint32_t memory_rungs = 20;

/// Evaluates one candidate (evaluate_choice_within). With `rungs`, a searching generator that
/// keeps within the limit is run at the usable memory and again at each memory rung below it,
/// down to the first it cannot keep within, and the fastest order kept (on a tie, the one with
/// the most room): its heuristics are not monotone in the limit (nor is its objective, the
/// makespan, the step time, which adds the gradient reduction). The orders searched at a usable
/// memory on a rung are all searched under any larger one, so more usable memory never gives
/// this candidate a slower order from the usable fractions 0.05, 0.1, ..., 1 up (docs/model.md
/// §10).
inline plan_entry evaluate_choice(const training_job& job,
                                  const plan_choice& choice,
                                  const job_costs& jc,
                                  const generator_registry& registry,
                                  const generator_entry& gen,
                                  std::size_t search_evaluations,
                                  bool rungs = true) {
  bool limited = false;
  plan_entry best = evaluate_choice_within(job, choice, jc, registry, gen, search_evaluations,
                                           jc.usable_memory, &limited);
  if (!rungs || !gen.searches || !limited) {
    return best;
  }
  const double unit = job.cluster.memory_bytes / memory_rungs;
  for (std::uint32_t k = memory_rungs; k >= 1; --k) {
    const double rung = unit * k;
    if (rung >= jc.usable_memory * (1.0 - 1e-12)) {
      continue;  // the usable memory itself, or above it
    }
    try {
      plan_entry e = evaluate_choice_within(job, choice, jc, registry, gen, search_evaluations,
                                            rung, nullptr, false);
      if (e.fits && (!best.fits || e.step_time_s < best.step_time_s)) {
        best = std::move(e);
      }
    } catch (const invalid_argument&) {
      break;  // no order within this rung, nor within a lower one
    }
  }
  return best;
}

/// Divisors of n in increasing order.
inline std::vector<std::uint64_t> divisors_of(std::uint64_t n) {
  std::vector<std::uint64_t> lo, hi;
  for (std::uint64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      lo.push_back(d);
      if (d != n / d) {
        hi.push_back(n / d);
      }
    }
  }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

/// How a message names a fixed choice: as the plan's own option (`--tp 8`, who "plan") or as a
/// key of the baseline (`tp=8`, who "plan: baseline"), so that it names what the user typed.
struct choice_names {
  bool baseline = false;

  std::string who() const { return baseline ? "plan: baseline" : "plan"; }
  /// "--tp" or "tp"; `key` is set_plan_choice's (tp, pp, dp, v, micro-batch, ...).
  std::string option(std::string_view key) const {
    if (baseline) {
      return std::string(key);
    }
    return key == "v" ? "-v" : key == "sp" ? "--sequence-parallel" : "--" + std::string(key);
  }
  /// "--tp 8" or "tp=8".
  template <class T>
  std::string value(std::string_view key, const T& v) const {
    return concat(option(key), baseline ? "=" : " ", v);
  }
};

/// The data-parallel degree a layout gets, checking a fixed one; throws with the values.
inline std::uint64_t data_parallel_of(const training_job& job,
                                      std::uint32_t tp,
                                      std::uint32_t pp,
                                      const std::optional<std::uint64_t>& fixed,
                                      const choice_names& names = {}) {
  const std::uint64_t per = std::uint64_t{tp} * pp;
  if (job.gpus % per != 0) {
    fail(names.who(), ": TP·PP (", tp, "·", pp, " = ", per, ") must divide the GPUs (", job.gpus,
         ")");
  }
  const std::uint64_t dp = job.gpus / per;
  if (fixed && *fixed != dp) {
    fail(names.who(), ": ", names.value("dp", *fixed), " with ", names.value("tp", tp), " ",
         names.value("pp", pp), " needs ", per * *fixed, " GPUs, not ", job.gpus,
         " (TP·PP·DP = GPUs)");
  }
  return dp;
}

/// Checks the fixed choices against the model, the cluster and the batch (exit 2 in the CLI),
/// each rule once for the search and for a fixed layout: TP dividing the heads, the KV heads
/// and a node's GPUs; PP not above the layers; TP, PP and DP (each, and together) dividing the
/// GPUs; PP·v chunks of at least one layer; the global batch a multiple of DP·b.
inline void check_fixed(const training_job& job,
                        const plan_fixed& f,
                        const choice_names& names = {}) {
  const std::string who = names.who();
  if (f.tp) {
    const std::uint32_t t = *f.tp;
    if (!job.model.tp_splits_heads(t)) {
      fail(who, ": ", names.value("tp", t), " must divide the heads (", job.model.heads,
           ") and the KV heads (", job.model.kv(), ")");
    }
    if (job.cluster.gpus_per_node % t != 0) {
      fail(who, ": ", names.value("tp", t), " must divide the GPUs per node (",
           job.cluster.gpus_per_node, "): tensor parallelism stays inside a node");
    }
  }
  if (f.pp && (*f.pp == 0 || *f.pp > job.model.layers)) {
    fail(who, ": ", names.value("pp", *f.pp), " must be between 1 and the layers (",
         job.model.layers, ")");
  }
  if (f.dp && *f.dp == 0) {
    fail(who, ": ", names.option("dp"), " must be at least 1");
  }
  if (f.chunks && *f.chunks == 0) {
    fail(who, ": ", names.option("v"), " must be at least 1");
  }
  if (f.micro_batch && *f.micro_batch == 0) {
    fail(who, ": ", names.option("micro-batch"), " must be at least 1");
  }
  if (f.microbatches && *f.microbatches == 0) {
    fail(who, ": ", names.option("microbatches"), " must be at least 1");
  }
  // Each fixed degree, and each fixed product, must divide the GPUs: the search would find no
  // layout (TP·PP·DP = GPUs).
  std::string fixed_names;
  std::uint64_t product = 1;
  int count = 0;
  auto divides = [&](std::string_view key, const auto& degree) {
    if (!degree) {
      return;
    }
    fixed_names += (count++ == 0 ? "" : " · ") + names.value(key, *degree);
    product *= *degree;
    if (job.gpus % product != 0) {
      fail(who, ": ", fixed_names, count == 1 ? "" : concat(" = ", product),
           " does not divide the ", job.gpus, " GPUs (TP·PP·DP = GPUs)");
    }
  };
  if (f.tp && f.pp) {
    data_parallel_of(job, *f.tp, *f.pp, f.dp, names);
  } else {
    divides("dp", f.dp);
    divides("tp", f.tp);
    divides("pp", f.pp);
  }
  if (f.chunks) {
    const std::uint64_t p = f.pp.value_or(1);
    const std::uint64_t n = p * *f.chunks;
    if (n > job.model.layers) {
      if (f.pp) {
        fail(who, ": ", names.value("pp", p), " and ", names.value("v", *f.chunks),
             " make PP·v = ", n, " chunks for ", job.model.layers,
             " layers: each chunk needs at least one layer");
      }
      fail(who, ": ", names.value("v", *f.chunks), " makes PP·v = ", n, " chunks for ",
           job.model.layers, " layers even at PP 1: each chunk needs at least one layer");
    }
  }
  if (f.sequence_parallel && *f.sequence_parallel && f.tp && *f.tp == 1) {
    fail(who, ": ", names.baseline ? "sp=on" : "--sequence-parallel", " needs ", names.option("tp"),
         " > 1");
  }
  if (job.global_batch) {
    // DP·m·b = the global batch: what is fixed of the three must divide it.
    std::uint64_t batch_part = 1;
    std::string parts;
    int n_parts = 0;
    auto part = [&](std::string_view key, const auto& degree) {
      if (!degree) {
        return;
      }
      parts += (n_parts++ == 0 ? "" : " · ") + names.value(key, *degree);
      const bool within = *degree <= job.global_batch / batch_part;  // no overflow
      if (within) {
        batch_part *= *degree;
      }
      if (!within || job.global_batch % batch_part != 0) {
        fail(who, ": ", parts, n_parts > 1 && within ? concat(" = ", batch_part) : "",
             " does not divide the global batch (", job.global_batch,
             " sequences): DP · microbatches · micro-batch = the global batch");
      }
    };
    part("dp", f.dp);
    part("micro-batch", f.micro_batch);
    part("microbatches", f.microbatches);
  }
  if (!job.global_batch && !f.microbatches) {
    fail(who, ": give the batch: --global-batch, --global-batch-tokens or --microbatches");
  }
  if (!job.global_batch && f.microbatches && !(f.tp && f.pp && f.micro_batch)) {
    fail(who, ": ", names.option("microbatches"), " alone fixes the batch only for a given ",
         names.option("tp"), ", ", names.option("pp"), " and ", names.option("micro-batch"),
         "; to search layouts give --global-batch or --global-batch-tokens");
  }
}

/// A group of candidates sharing their job costs: one layout, recomputation and placement.
struct plan_group {
  plan_layout layout;
  recompute_kind recompute = recompute_kind::none;
  placement pl;
  std::vector<std::uint32_t> partition;
  std::shared_ptr<const job_costs> costs;
  double time_bound = 0.0;    ///< no schedule of the group takes less (seconds)
  double memory_bound = 0.0;  ///< no schedule of the group needs less on its fullest stage
};

/// The group's partition: given, even, or balanced by the op times of the layout.
inline std::optional<std::vector<std::uint32_t>> partition_for(
    const training_job& job,
    const plan_layout& lay,
    recompute_kind recompute,
    const placement& pl,
    const partition_spec& spec,
    const std::vector<std::uint32_t>& caps = {}) {
  const std::uint32_t n = lay.pp * lay.chunks;
  if (spec.kind == partition_kind::given) {
    check_given_partition(spec.layers, job.model.layers, n);
    return spec.layers;
  }
  if (job.model.layers < n) {
    return std::nullopt;
  }
  if (spec.kind == partition_kind::even) {
    return even_partition(job.model.layers, n);
  }
  return balanced_partition(job.model.layers, pl,
                            partition_weights_of(op_times_of(job, lay, recompute), n, caps));
}

/// Fills a group's costs and bounds from its partition.
inline void finish_group(const training_job& job, plan_group& g) {
  g.costs = std::make_shared<const job_costs>(
      make_job_costs(job, g.layout, g.recompute, g.partition, g.pl));
  const job_costs& jc = *g.costs;
  const std::uint32_t p = g.layout.pp;
  const std::uint32_t v = g.layout.chunks;
  shaped_cost_model c = jc.costs.for_shape(p, v, "plan");
  const shaped_memory_model m = jc.memory.for_shape(p, v, "plan");
  if (g.recompute != recompute_kind::none) {
    c = inline_recompute(jc.costs, jc.memory, p, v).first.for_shape(p, v, "plan");
  }
  // The first micro-batch's forward reaches global chunk k no earlier than the forwards of
  // the chunks before it and a transfer per stage change.
  const std::uint32_t n = p * v;
  std::vector<double> reach(n, 0.0);
  for (global_chunk k = 1; k < n; ++k) {
    const stage_index from = g.pl.stage_of(k - 1);
    reach[k] =
        reach[k - 1] + c.at(from, g.pl.local_of(k - 1)).forward + c.comm(from, g.pl.stage_of(k));
  }
  g.time_bound = 0.0;
  g.memory_bound = 0.0;
  for (stage_index s = 0; s < p; ++s) {
    double start = std::numeric_limits<double>::infinity();
    for (chunk_index k = 0; k < v; ++k) {
      start = std::min(start, reach[g.pl.global(s, k)]);
    }
    double work = 0.0;
    double largest = 0.0;
    for (chunk_index k = 0; k < v; ++k) {
      const op_costs t = c.at(s, k);
      work += t.forward + t.backward_input + t.backward_weight;
      largest = std::max(largest, m.at(s, k).activation);
    }
    // Every stage runs m micro-batches of its chunks' work, starting when the first forward
    // reaches it; every chunk's activations are live at least once (from its F, or its R, to
    // its B).
    g.time_bound = std::max(g.time_bound, start + g.layout.microbatches * work);
    g.memory_bound = std::max(g.memory_bound, m.static_memory(s) + largest);
  }
}

/// Per-stage layer caps after a balanced partition did not fit: each stage over the limit
/// gives up the layers its excess is worth at its bytes per layer.
inline std::vector<std::uint32_t> memory_caps(const plan_entry& e, double usable) {
  std::vector<std::uint32_t> caps;
  for (const plan_stage& st : e.stages) {
    std::uint32_t cap = st.layers;
    if (st.total > usable && st.layers > 0) {
      const double per_layer = st.total / st.layers;
      const auto over = static_cast<std::uint32_t>(std::ceil((st.total - usable) / per_layer));
      cap = over >= st.layers ? 0 : st.layers - over;
    }
    caps.push_back(cap);
  }
  return caps;
}

/// Orders plans: fitting first, by step time, then by peak memory; then those that do not
/// fit, by peak memory, then step time; then by the generator's place in the registry and the label
/// (so the order never depends on the evaluation order).
inline bool better_plan(const plan_entry& a,
                        const plan_entry& b,
                        const generator_registry& registry) {
  if (a.fits != b.fits) {
    return a.fits;
  }
  // Plans that fit by step time; those that do not, nearest to fitting first.
  if (a.fits && a.step_time_s != b.step_time_s) {
    return a.step_time_s < b.step_time_s;
  }
  if (a.peak_memory_bytes != b.peak_memory_bytes) {
    return a.peak_memory_bytes < b.peak_memory_bytes;
  }
  if (a.step_time_s != b.step_time_s) {
    return a.step_time_s < b.step_time_s;
  }
  const auto rank = [&](const std::string& name) {
    return registry.find(name) - registry.entries().data();
  };
  if (a.choice.schedule != b.choice.schedule) {
    return rank(a.choice.schedule) < rank(b.choice.schedule);
  }
  return plan_label(a.choice) < plan_label(b.choice);
}

/// Why a space holds no candidate: the refusal that got furthest through the checks (a
/// schedule refusing v says more than a TP·PP not dividing the GPUs), in the user's terms.
struct plan_refusal {
  int depth = -1;
  std::string why;

  /// Keeps text() when it got further than the refusal kept; builds it only then.
  template <class Text>
  void note(int at_depth, const Text& text) {
    if (at_depth > depth) {
      depth = at_depth;
      why = text();
    }
  }
};

/// The space of `f` for `job`: every group and generator, best bound first.
struct plan_space {
  std::vector<plan_group> groups;
  std::vector<std::pair<std::size_t, const generator_entry*>> candidates;  // (group, generator)
  std::size_t layouts_refused = 0;
  plan_refusal refusal;  ///< why no candidate, when there is none
};

inline plan_space enumerate_space(const training_job& job,
                                  const plan_fixed& f,
                                  const generator_registry& registry,
                                  const choice_names& names = {}) {
  plan_space space;
  const std::string who = names.who();
  std::vector<std::uint32_t> tps;
  if (f.tp) {
    tps.push_back(*f.tp);
  } else {
    for (std::uint64_t t : divisors_of(job.cluster.gpus_per_node)) {
      if (job.model.tp_splits_heads(t) && job.gpus % t == 0) {
        tps.push_back(static_cast<std::uint32_t>(t));
      }
    }
  }
  std::vector<const generator_entry*> gens;
  if (f.schedule) {
    gens.push_back(&registry.at(*f.schedule));
  } else {
    for (const generator_entry& e : registry.entries()) {
      gens.push_back(&e);
    }
  }
  struct placed {
    std::optional<placement> pl;
    std::string why;  ///< the generator's refusal
  };
  std::map<std::tuple<std::string, std::uint32_t, std::uint32_t>, placed> places;
  auto place = [&](const generator_entry& g, std::uint32_t p, std::uint32_t v) -> const placed& {
    const auto key = std::make_tuple(g.name, p, v);
    auto it = places.find(key);
    if (it == places.end()) {
      placed pd;
      pd.pl = placement_for(g, p, v, &pd.why);
      it = places.emplace(key, std::move(pd)).first;
    }
    return it->second;
  };
  const bool layout_fixed = f.tp && f.pp;
  for (std::uint32_t tp : tps) {
    std::vector<std::uint32_t> pps;
    if (f.pp) {
      pps.push_back(*f.pp);
    } else {
      // At most the layers, so never more than that many divisions of the GPUs are tried.
      for (std::uint32_t p = 1; p <= job.model.layers; ++p) {
        if ((job.gpus / tp) % p == 0) {
          pps.push_back(p);
        }
      }
    }
    for (std::uint32_t pp : pps) {
      const std::string at = concat("TP", tp, " PP", pp);
      if (job.gpus % (std::uint64_t{tp} * pp) != 0) {
        if (layout_fixed) {
          data_parallel_of(job, tp, pp, f.dp, names);  // throws, naming the values
        }
        space.refusal.note(0, [&] {
          return concat(at, ": TP·PP (", std::uint64_t{tp} * pp, ") does not divide the ", job.gpus,
                        " GPUs");
        });
        continue;
      }
      const std::uint64_t dp = job.gpus / (std::uint64_t{tp} * pp);
      const std::size_t first_group = space.groups.size();
      if (f.dp && *f.dp != dp) {
        if (layout_fixed) {
          data_parallel_of(job, tp, pp, f.dp, names);
        }
        space.refusal.note(
            1, [&] { return concat(at, " gives DP ", dp, ", not ", names.value("dp", *f.dp)); });
        continue;
      }
      // Micro-batch sizes and counts.
      std::vector<std::pair<std::uint32_t, std::uint32_t>> batches;  // (b, m)
      if (job.global_batch) {
        if (job.global_batch % dp != 0) {
          const std::string rule = concat("the global batch (", job.global_batch,
                                          " sequences) must be a multiple of DP (", dp, ")");
          if (layout_fixed) {
            fail(who, ": ", rule);
          }
          ++space.layouts_refused;
          space.refusal.note(2, [&] { return concat(at, ": ", rule); });
          continue;
        }
        const std::uint64_t per = job.global_batch / dp;
        const std::string per_text =
            concat("the global batch (", job.global_batch, " sequences) over DP (", dp, ") is ",
                   per, " sequences per pipeline");
        if (per > max_plan_pipeline_sequences) {
          const std::string rule = concat(per_text, ", more than ", max_plan_pipeline_sequences,
                                          " (max_plan_pipeline_sequences)");
          if (layout_fixed) {
            fail(who, ": ", rule);
          }
          space.refusal.note(3, [&] { return concat(at, ": ", rule); });
          continue;
        }
        for (std::uint64_t b : divisors_of(per)) {
          if ((f.micro_batch && b != *f.micro_batch) || (!f.micro_batch && b > 16)) {
            continue;
          }
          const std::uint64_t m = per / b;
          if (f.microbatches && m != *f.microbatches) {
            continue;
          }
          batches.emplace_back(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(m));
        }
        if (batches.empty()) {
          // Only fixed choices leave no micro-batch size (b = 1 always divides).
          std::string rule = per_text + ": not ";
          if (f.micro_batch && f.microbatches) {
            rule += concat(names.value("micro-batch", *f.micro_batch), " times ",
                           names.value("microbatches", *f.microbatches));
          } else if (f.micro_batch) {
            rule += concat("a multiple of ", names.value("micro-batch", *f.micro_batch));
          } else {
            rule += concat(names.value("microbatches", *f.microbatches),
                           " micro-batches of 1 to 16 sequences (the sizes searched)");
          }
          if (layout_fixed) {
            fail(who, ": ", rule);
          }
          space.refusal.note(4, [&] { return concat(at, ": ", rule); });
          continue;
        }
      } else {
        batches.emplace_back(*f.micro_batch, *f.microbatches);
      }
      std::vector<bool> sps;
      if (f.sequence_parallel) {
        sps.push_back(*f.sequence_parallel && tp > 1);
      } else {
        sps.push_back(false);
        if (tp > 1) {
          sps.push_back(true);
        }
      }
      std::vector<recompute_kind> rcs;
      if (f.recompute) {
        rcs.push_back(*f.recompute);
      } else {
        rcs = {recompute_kind::none, recompute_kind::selective, recompute_kind::full};
      }
      for (const generator_entry* gen : gens) {
        std::vector<std::uint32_t> vs;
        if (f.chunks) {
          vs.push_back(*f.chunks);
        } else if (gen->default_chunks == 1) {
          vs.push_back(1);
        } else {
          // One stage gains nothing from several chunks: only the default is tried there.
          for (std::uint32_t v : {2u, 3u, 4u, 6u, 8u}) {
            if (std::uint64_t{pp} * v <= job.model.layers && (pp > 1 || v == gen->default_chunks)) {
              vs.push_back(v);
            }
          }
        }
        for (std::uint32_t v : vs) {
          if (std::uint64_t{pp} * v > job.model.layers) {
            space.refusal.note(5, [&] {
              return concat(at, ": PP·v = ", std::uint64_t{pp} * v, " chunks for ",
                            job.model.layers, " layers: each chunk needs at least one layer");
            });
            continue;
          }
          const placed& pd = place(*gen, pp, v);
          if (!pd.pl) {
            space.refusal.note(6, [&] {
              return concat(names.value("schedule", gen->name), " does not take ",
                            names.value("v", v), " at PP ", pp, ": ", pd.why);
            });
            continue;
          }
          const placement& pl = *pd.pl;
          for (const auto& [b, m] : batches) {
            const std::uint64_t ops = std::uint64_t{3} * pp * pl.chunks() * m;
            if (ops > max_plan_schedule_ops) {
              // Structured bindings are not captured by lambdas in clang 14: copies.
              space.refusal.note(7, [&, mb_size = b, mb_count = m] {
                return concat(at, " v", pl.chunks(), " b", mb_size, ": PP·v·m·3 = ", pp, "·",
                              pl.chunks(), "·", mb_count, "·3 = ", ops,
                              " ops in one schedule, more than ", max_plan_schedule_ops,
                              " (max_plan_schedule_ops)");
              });
              continue;
            }
            for (bool sp : sps) {
              for (recompute_kind rc : rcs) {
                plan_layout lay{tp, pp, dp, v, b, m, sp};
                // Groups share costs: same layout, recompute and placement.
                std::size_t gi = space.groups.size();
                for (std::size_t i = first_group; i < space.groups.size(); ++i) {
                  const plan_group& g = space.groups[i];
                  if (g.layout == lay && g.recompute == rc && g.pl == pl) {
                    gi = i;
                    break;
                  }
                }
                if (gi == space.groups.size()) {
                  plan_group g;
                  g.layout = lay;
                  g.recompute = rc;
                  g.pl = pl;
                  const auto part = partition_for(job, lay, rc, pl, f.partition);
                  if (!part) {
                    continue;
                  }
                  g.partition = *part;
                  finish_group(job, g);
                  space.groups.push_back(std::move(g));
                }
                space.candidates.emplace_back(gi, gen);
              }
            }
          }
        }
      }
    }
  }
  // Best bound first; ties in a fixed order (group, then registry order).
  std::stable_sort(space.candidates.begin(), space.candidates.end(),
                   [&](const auto& a, const auto& b) {
                     return space.groups[a.first].time_bound < space.groups[b.first].time_bound;
                   });
  return space;
}

/// Evaluates one candidate of `space`, re-partitioning a balanced partition that did not fit
/// within the caps its memory gives (twice at most), searching generators at the memory rungs
/// too with `rungs` (evaluate_choice). nullopt when the generator refuses.
inline std::optional<plan_entry> evaluate_candidate(const training_job& job,
                                                    const plan_space& space,
                                                    std::size_t index,
                                                    const plan_fixed& f,
                                                    const generator_registry& registry,
                                                    std::size_t evaluations,
                                                    bool rungs) {
  const auto [gi, gen] = space.candidates[index];
  const plan_group& g = space.groups[gi];
  plan_choice choice{g.layout, gen->name, g.recompute, g.partition, f.group_size.value_or(0)};
  std::optional<plan_entry> best;
  try {
    best = evaluate_choice(job, choice, *g.costs, registry, *gen, evaluations, rungs);
  } catch (const invalid_argument&) {
    return std::nullopt;
  }
  for (int round = 0; round < 2 && !best->fits && f.partition.kind == partition_kind::balanced;
       ++round) {
    const auto part = partition_for(job, g.layout, g.recompute, g.pl, f.partition,
                                    memory_caps(*best, g.costs->usable_memory));
    if (!part || *part == best->choice.partition) {
      break;
    }
    choice.partition = *part;
    const job_costs jc = make_job_costs(job, g.layout, g.recompute, *part, g.pl);
    try {
      plan_entry e = evaluate_choice(job, choice, jc, registry, *gen, evaluations, rungs);
      if (e.fits || e.peak_memory_bytes < best->peak_memory_bytes) {
        best = std::move(e);
      }
    } catch (const invalid_argument&) {
      break;
    }
  }
  return best;
}

/// The plans of `f`: search (or, evaluates_one(), the one layout at its best). With
/// `keep_misfit`, nothing is skipped for memory and the plan nearest to fitting is kept when
/// none fits. Throws invalid_argument, in `names`' words, when no layout of `f` can run.
inline plan_result run_plan(const training_job& job,
                            const plan_fixed& f,
                            const plan_options& opts,
                            const generator_registry& registry,
                            const choice_names& names = {},
                            bool keep_misfit = false) {
  const auto t0 = std::chrono::steady_clock::now();
  check_fixed(job, f, names);
  plan_space space = enumerate_space(job, f, registry, names);
  if (space.candidates.empty()) {
    fail(names.who(), ": no layout can run this job: ",
         space.refusal.why.empty() ? "no candidate" : space.refusal.why);
  }
  plan_result res;
  res.stats.candidates = space.candidates.size();
  const bool one = f.evaluates_one();
  keep_misfit = keep_misfit || one;
  const std::size_t keep = one ? 1 : std::max<std::size_t>(1, opts.top);
  const double usable = job.cluster.usable_memory();
  std::vector<plan_entry> evaluated;
  double smallest_need = std::numeric_limits<double>::infinity();
  // The K-th best fitting step time so far: a candidate whose bound is above it cannot enter.
  auto threshold = [&] {
    // Distinct plans only: the same order under two names (zb-1p, zb-auto) is one plan, and
    // counting it twice would cut candidates the final list needs. Plans of one layout and
    // step time count once (never more candidates cut than that).
    std::vector<double> times;
    std::vector<std::tuple<plan_layout, recompute_kind, double>> seen;
    for (const plan_entry& e : evaluated) {
      const auto key = std::make_tuple(e.choice.layout, e.choice.recompute, e.step_time_s);
      if (e.fits && std::find(seen.begin(), seen.end(), key) == seen.end()) {
        seen.push_back(key);
        times.push_back(e.step_time_s);
      }
    }
    if (times.size() < keep) {
      return std::numeric_limits<double>::infinity();
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(keep - 1),
                     times.end());
    return times[keep - 1];
  };
  unsigned threads = opts.threads != 0 ? opts.threads : std::thread::hardware_concurrency();
  threads = std::max(1u, threads);
  // Batches of candidates, in bound order; the threshold moves between batches only, so which
  // candidates run never depends on the threads' timing.
  std::size_t next = 0;
  const std::size_t n = space.candidates.size();
  while (next < n) {
    const double limit = threshold();
    std::vector<std::size_t> batch;
    while (next < n && batch.size() < std::max<std::size_t>(threads, 2)) {
      const plan_group& g = space.groups[space.candidates[next].first];
      if (!keep_misfit && g.memory_bound > usable * (1.0 + 1e-9)) {
        ++res.stats.pruned_memory;
        smallest_need = std::min(smallest_need, g.memory_bound);
      } else if (!one && g.time_bound > limit * (1.0 + 1e-12)) {
        ++res.stats.pruned_time;
      } else {
        batch.push_back(next);
      }
      ++next;
    }
    std::vector<std::optional<plan_entry>> out(batch.size());
    std::atomic<std::size_t> cursor{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      for (std::size_t i = cursor++; i < batch.size(); i = cursor++) {
        try {
          // The memory rungs for the one layout asked for only: over a search they would cost
          // several times its time (docs/model.md §10).
          out[i] =
              evaluate_candidate(job, space, batch[i], f, registry, opts.search_evaluations, one);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(error_mutex);
          error = std::current_exception();
        }
      }
    };
    {
      std::vector<std::jthread> pool;
      for (unsigned t = 1; t < std::min<std::size_t>(threads, batch.size()); ++t) {
        pool.emplace_back(work);
      }
      work();
    }
    if (error) {
      std::rethrow_exception(error);
    }
    for (auto& e : out) {
      if (!e) {
        ++res.stats.failed;
        continue;
      }
      ++res.stats.evaluated;
      if (!e->fits) {
        smallest_need = std::min(smallest_need, e->peak_memory_bytes);
      }
      evaluated.push_back(std::move(*e));
    }
  }
  auto rank = [&] {
    std::sort(evaluated.begin(), evaluated.end(), [&](const plan_entry& a, const plan_entry& b) {
      return better_plan(a, b, registry);
    });
  };
  rank();
  // The plans kept from a searching generator search again with a deeper budget: more
  // candidate orders where they matter.
  if (opts.polish_evaluations > 0) {
    std::size_t polished = 0;
    for (plan_entry& e : evaluated) {
      if (polished == keep || !e.fits) {
        break;
      }
      ++polished;
      const generator_entry& gen = registry.at(e.choice.schedule);
      if (!gen.searches) {
        continue;
      }
      const job_costs jc = make_job_costs(job, e.choice.layout, e.choice.recompute,
                                          e.choice.partition, e.sched.layout());
      try {
        plan_entry deeper =
            evaluate_choice(job, e.choice, jc, registry, gen, opts.polish_evaluations, one);
        if (deeper.fits && deeper.step_time_s < e.step_time_s) {
          e = std::move(deeper);
        }
      } catch (const invalid_argument&) {
        // keeps the first search's order
      }
    }
    rank();
  }
  // The same order under two names (zb-1p and zb-auto when their limits agree) is one plan.
  std::vector<plan_entry> distinct;
  for (plan_entry& e : evaluated) {
    const bool seen = std::any_of(distinct.begin(), distinct.end(), [&](const plan_entry& d) {
      return d.choice.layout == e.choice.layout && d.choice.recompute == e.choice.recompute &&
             d.choice.partition == e.choice.partition && d.sched == e.sched;
    });
    if (!seen) {
      distinct.push_back(std::move(e));
    }
  }
  evaluated = std::move(distinct);
  // The frontier: no evaluated plan is both faster and smaller.
  double smallest = std::numeric_limits<double>::infinity();
  for (const plan_entry& e : evaluated) {
    if (e.peak_memory_bytes < smallest) {
      smallest = e.peak_memory_bytes;
      res.frontier.push_back({e.step_time_s, e.peak_memory_bytes, e.fits, plan_label(e.choice)});
    }
  }
  for (plan_entry& e : evaluated) {
    if (res.plans.size() == keep || (!e.fits && !keep_misfit)) {
      break;
    }
    res.plans.push_back(std::move(e));
  }
  if (res.plans.empty() || !res.plans.front().fits) {
    res.smallest_need_bytes = std::isfinite(smallest_need) ? smallest_need : 0.0;
  }
  if (res.stats.evaluated == 0 && res.stats.pruned_memory == 0) {
    fail(names.who(), ": every one of the ", res.stats.candidates,
         " candidates was refused by its generator");
  }
  const plan_group& g0 = space.groups[space.candidates.front().first];
  res.global_batch = g0.layout.dp * g0.layout.microbatches * g0.layout.micro_batch;
  res.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace detail

/// How a plan compares with a baseline at the same job size.
struct plan_comparison {
  double speedup = 1.0;         ///< baseline step time / plan step time
  double time_saved = 0.0;      ///< (T_base − T_plan) / T_base: the share of each step saved
  double gpus_recovered = 0.0;  ///< time_saved × GPUs: GPUs' worth of time freed
};

inline plan_comparison compare_plans(const plan_entry& plan,
                                     const plan_entry& baseline,
                                     std::uint64_t gpus) {
  plan_comparison c;
  c.speedup = baseline.step_time_s / plan.step_time_s;
  c.time_saved = (baseline.step_time_s - plan.step_time_s) / baseline.step_time_s;
  c.gpus_recovered = c.time_saved * static_cast<double>(gpus);
  return c;
}

/// The fastest plans for `job` that fit in its GPUs' usable memory (docs/model.md §10): every
/// layout (TP dividing a node's GPUs, the heads and the KV heads; PP dividing the rest; DP =
/// GPUs / (TP·PP) dividing the global batch), micro-batch size, chunks per stage, sequence
/// parallelism, recomputation and registered schedule that opts.fixed leaves open, each
/// generated (zb-auto and zb-v with the real byte limit), simulated with op times in seconds
/// and checked in bytes; candidates that cannot fit or cannot beat the plans kept are skipped
/// by bounds. Ranked by predicted step time (never by bubble rate). With opts.baseline, that
/// layout too, by the same model. Throws invalid_argument naming the values for fixed choices
/// that cannot be (TP not dividing the heads, PP above the layers, a batch that does not divide).
inline plan_result plan(const training_job& job, const plan_options& opts = {}) {
  job.check("plan");
  const generator_registry& registry = opts.registry ? *opts.registry : default_registry();
  plan_result res = detail::run_plan(job, opts.fixed, opts, registry);
  if (opts.baseline) {
    const detail::choice_names names{true};
    plan_result base = detail::run_plan(job, *opts.baseline, opts, registry, names);
    if (base.plans.empty()) {
      // Nothing of the baseline fits: its plan nearest to fitting, shown as not fitting.
      base = detail::run_plan(job, *opts.baseline, opts, registry, names, true);
    }
    res.baseline = std::move(base.plans.front());
  }
  return res;
}

}  // namespace pipesched
