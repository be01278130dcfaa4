#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/transformer_spec.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/job_costs.hpp"
#include "pipesched/plan/partition.hpp"

// The planner's results and options (docs/model.md §10), apart from the search that makes
// them: what the io writers and a framework reading a plan need.

namespace pipesched {

class generator_registry;

/// The recomputation named `value` (parse_recompute_kind's names); otherwise throws
/// invalid_argument "<name> must be none, selective or full, not "<value>"", `name` saying
/// what the user typed ("--recompute:", "plan: baseline: recompute").
inline recompute_kind recompute_kind_named(std::string_view value, std::string_view name) {
  const auto k = parse_recompute_kind(value);
  if (!k) {
    detail::fail(name, " must be none, selective or full, not \"", value, "\"");
  }
  return *k;
}

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
  stage_parameters parameters;   ///< the parameters a rank holds, by where they come from
  double activations = 0.0;      ///< the schedule's activation peak (check_memory)
  double total = 0.0;            ///< statics + activations: the stage's peak, bytes
  double busy_s = 0.0;           ///< compute per step
  double dp_reduce_end_s = 0.0;  ///< when its gradient reduction ends
  double optimizer_s = 0.0;      ///< its optimizer step
  /// Where the stage's time goes per step, seconds: its ops' kernels by kind (m micro-batches),
  /// the optimizer step (memory-bound), and as communication also the pipeline transfers it
  /// sends and its gradient reduction (hidden behind the backward or not).
  kind_seconds seconds_by_kind;
};

/// A plan: the choice and what it costs (docs/model.md §10).
struct plan_entry {
  plan_choice choice;
  bool fits = false;  ///< every stage's total <= usable memory
  /// makespan + exposed data-parallel time + the optimizer step
  double step_time_s = 0.0;
  double makespan_s = 0.0;  ///< the pipeline's (simulate)
  /// Data-parallel communication not hidden behind the pipeline: the gradient reduction's
  /// tail, and with ZeRO-3 under pipeline parallelism the first chunk's weight gather.
  double dp_exposed_s = 0.0;
  double optimizer_s = 0.0;  ///< the slowest stage's optimizer step, after every reduction
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
  /// plan_options::other_baselines, in their order, each evaluated as `baseline` is.
  std::vector<plan_entry> other_baselines;
  std::vector<plan_frontier_point> frontier;  ///< by step time
  plan_search_stats stats;
  /// The smallest per-GPU need found (the lowest largest-stage peak, or its lower bound for a
  /// candidate never generated) when nothing fits; 0 otherwise.
  double smallest_need_bytes = 0.0;
  std::uint64_t global_batch = 0;  ///< sequences per step
};

/// Choices a user fixes (set) or leaves to the search (unset).
/// Sequences of at least this many tokens have context parallelism searched (CP 2, 4, ... 32
/// where it divides); shorter ones run CP 1 unless it is given: at 8K tokens and below the
/// activations of a sequence fit without it, and its ring exchange would only add time.
inline constexpr std::uint64_t cp_search_min_sequence = 32768;

struct plan_fixed {
  std::optional<std::uint32_t> tp, pp, chunks, micro_batch, microbatches;
  std::optional<std::uint32_t> group_size;  ///< generator_params::group_size; not searched
  std::optional<std::uint64_t> dp;
  std::optional<std::string> schedule;
  std::optional<recompute_kind> recompute;
  std::optional<bool> sequence_parallel;
  partition_spec partition{};
  /// Context parallelism (each sequence over `cp` ranks); unset: 1, or searched for sequences
  /// of at least `cp_search_min_sequence` tokens.
  std::optional<std::uint32_t> cp;
  /// Expert parallelism (plan_layout::ep); unset: 1 for a dense model, searched for an MoE one.
  std::optional<std::uint32_t> ep;

  /// True when the layout and the schedule are given: plan() evaluates that layout (the
  /// choices left unset are searched and the best kept).
  bool evaluates_one() const noexcept { return tp && pp && schedule && micro_batch; }
};

struct plan_options {
  plan_fixed fixed{};
  /// Another layout to evaluate by the same model and compare against (its unset choices are
  /// searched: it is compared at its best).
  std::optional<plan_fixed> baseline{};
  /// More layouts evaluated and compared as `baseline` is, each at its best (the CLI's second
  /// and later --baseline, Python's baseline= list): e.g. one layout under several schedules.
  std::vector<plan_fixed> other_baselines{};
  std::size_t top = 5;  ///< plans kept
  /// zb-auto / zb-v local search budget per candidate, in candidate orders timed, at the usable
  /// memory and at each memory rung below it. Every candidate is searched with this one budget:
  /// a deeper search for the plans kept only would make the best plan depend on `top` and be
  /// slower than a layout asked for alone.
  std::size_t search_evaluations = 64;
  /// Candidates skipped by their bounds (cannot fit, cannot beat the plans kept); false:
  /// every candidate is evaluated, the same best plan slower (what the bounds are tested by).
  bool prune = true;
  /// Threads evaluating candidates; 0: the machine's hardware threads.
  unsigned threads = 0;
  /// Generators by name; nullptr: default_registry().
  const generator_registry* registry = nullptr;
};

namespace detail {

/// "TP8 PP16 v2 b1 m16 interleaved-1f1b selective SP" ("TP8 CP16 PP16 ..." with CP, "TP1 PP16
/// EP64 ..." with expert parallelism).
inline std::string plan_label(const plan_choice& c) {
  std::string out = "TP" + std::to_string(c.layout.tp);
  if (c.layout.cp > 1) {
    out += " CP" + std::to_string(c.layout.cp);
  }
  out += " PP" + std::to_string(c.layout.pp);
  if (c.layout.ep > 1) {
    out += " EP" + std::to_string(c.layout.ep);
  }
  if (c.layout.chunks > 1) {
    out += " v" + std::to_string(c.layout.chunks);
  }
  out += " b" + std::to_string(c.layout.micro_batch) + " m" +
         std::to_string(c.layout.microbatches) + " " + c.schedule;
  if (c.group_size != 0) {
    out += " N" + std::to_string(c.group_size);
  }
  out += " " + std::string(to_string(c.recompute));
  if (c.layout.sequence_parallel) {
    out += " SP";
  }
  return out;
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

}  // namespace pipesched
