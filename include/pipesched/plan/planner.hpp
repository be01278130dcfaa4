#pragma once

#include <utility>

#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/plan_types.hpp"

// The planner (docs/model.md §10): from a model, a cluster and a batch to the fastest layout
// and schedule that fit in GPU memory, by generating, simulating and checking every candidate
// with real op times (seconds) and real sizes (bytes). This header is the public entry point,
// with the result and option types (plan_types.hpp); plan() is compiled once in the library
// (ir/detail/linkage.hpp). The parts it is made of: job_model.hpp (FLOPs, the gradient
// reduction, bounds), job_schedule.hpp (a job's schedule, shared with pack), plan_search.hpp (the
// space and the search), plan_ranking.hpp (which plan is better).

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_PLAN)
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/plan/plan_search.hpp"
#endif

namespace pipesched {

/// The fastest plans for `job` that fit in its GPUs' usable memory (docs/model.md §10): every
/// layout (TP dividing a node's GPUs, the heads and the KV heads; PP dividing the rest; DP =
/// GPUs / (TP·PP) dividing the global batch), micro-batch size, chunks per stage, sequence
/// parallelism, recomputation and registered schedule that opts.fixed leaves open, each
/// generated (zb-auto and zb-v at the memory rungs, evaluate_choice), simulated with op times in
/// seconds and checked in bytes; candidates that cannot fit or cannot beat the plans kept are
/// skipped by bounds. Ranked by predicted step time (never by bubble rate). With opts.baseline,
/// that layout too, by the same model. Throws invalid_argument naming the values for fixed choices
/// that cannot be (TP not dividing the heads, PP above the layers, a batch that does not divide).
PIPESCHED_INLINE plan_result plan(const training_job& job, const plan_options& opts = {});

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_PLAN)
PIPESCHED_INLINE plan_result plan(const training_job& job, const plan_options& opts) {
  job.check("plan");
  const generator_registry& registry = opts.registry ? *opts.registry : default_registry();
  const detail::choice_names names{true};
  // Every baseline's fixed choices checked before the search, which can take a while.
  if (opts.baseline) {
    detail::check_fixed(job, *opts.baseline, names);
  }
  for (const plan_fixed& f : opts.other_baselines) {
    detail::check_fixed(job, f, names);
  }
  plan_result res = detail::run_plan(job, opts.fixed, opts, registry);
  auto evaluate = [&](const plan_fixed& f) {
    plan_result base = detail::run_plan(job, f, opts, registry, names);
    if (base.plans.empty()) {
      // Nothing of the baseline fits: its plan nearest to fitting, shown as not fitting.
      base = detail::run_plan(job, f, opts, registry, names, true);
    }
    return std::move(base.plans.front());
  };
  if (opts.baseline) {
    res.baseline = evaluate(*opts.baseline);
  }
  for (const plan_fixed& f : opts.other_baselines) {
    res.other_baselines.push_back(evaluate(f));
  }
  return res;
}
#endif

}  // namespace pipesched
