#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/gen/generator.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/schedule.hpp"

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ZB_SEARCH)
#include "pipesched/gen/detail/zb_bound.hpp"
#include "pipesched/gen/detail/zb_exact_search.hpp"
#include "pipesched/gen/detail/zb_greedy.hpp"
#include "pipesched/gen/zb_auto.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#endif

namespace pipesched {

struct zb_exact_options {
  /// The search is exponential in p·m: larger problems throw unless these are raised.
  std::uint32_t max_stages = 4;
  std::uint32_t max_microbatches = 8;
  /// Stop after this many nodes (0: no limit); the result is then the best found, unproven.
  std::uint64_t node_budget = 0;
  /// Stop after this much wall time in milliseconds (0: no limit); not deterministic.
  double time_budget_ms = 0.0;
  /// Start from zb_auto_search's span (objective span) as the bound to beat (off: the search finds
  /// its own first order; the result is the same, only the work differs).
  bool seed_with_zb_auto = true;
  /// Prune nodes dominated by one reached before (same counts, all relevant times no later).
  bool dominance = true;
  /// Memory the dominance table may use; once full it stops growing (still exact).
  std::size_t memo_bytes = std::size_t{256} << 20;
};

/// The outcome of zb_exact_search: an order of shortest longest-stage span, and the proof.
struct zb_exact_result {
  schedule sched;
  double span = 0.0;      ///< longest stage span (the objective, as zb_auto_search's)
  double makespan = 0.0;  ///< time 0 to the last end
  /// No order (within the restriction) is shorter: `span` when proven, else the root bound.
  double lower_bound = 0.0;
  double root_bound = 0.0;  ///< detail::span_lower_bound for these limits
  /// zb_auto_search's span on the same input with the span objective (computed in every case),
  /// and its schedule's distance from the optimum when proven.
  double heuristic_span = 0.0;
  /// True when the search finished: no order in which F, B and W each run in micro-batch
  /// order on every stage has a span shorter than `span` (by more than 1e-9 of the costs).
  bool proven = false;
  std::uint64_t nodes = 0;      ///< nodes expanded
  std::uint64_t dominated = 0;  ///< children cut by the dominance table
  std::uint64_t bounded = 0;    ///< children cut by the lower bound
  std::size_t memo_states = 0;  ///< states held by the dominance table at the end
  std::vector<double> limits;   ///< per stage, including static memory
  std::vector<double> peak;     ///< per stage peak of the result, including static
  /// How much longer zb_auto_search's span is than the result's.
  double heuristic_gap() const noexcept { return heuristic_span - span; }
};

/// Exact minimum of the longest stage span for one chunk per stage (sequential placement),
/// split B/W, under the same inputs and limits as zb_auto_search (preset `given`:
/// generator_params::memory_limit, else p·M_B + static per stage). The objective is always the
/// span (zb_auto_search's zb_objective::span, which it runs as the incumbent), also when the
/// stages differ and zb_auto_search by default minimises the makespan. Meant as a certificate for
/// small problems: tests use it to measure how far the heuristics are from the optimum.
///
/// Restriction (as in the zero-bubble paper's ILP): on every stage F, B and W each run in
/// micro-batch order; the interleaving of the three is free. Depth-first branch and bound
/// (detail::exact_search): zb_auto_search's span is the incumbent, span_lower_bound the floor
/// (an incumbent at the floor ends the search at once); per node a one-machine bound per
/// stage, a deadline test, two W rules and a dominance table prune. docs/zb_exact.md has run
/// times. Throws invalid_argument when p or m exceeds the caps in `opts` (4 and 8 by
/// default), or the limit is below what any schedule needs.
PIPESCHED_INLINE zb_exact_result zb_exact_search(const generator_params& given,
                                                 const zb_exact_options& opts = {});

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ZB_SEARCH)
PIPESCHED_INLINE zb_exact_result zb_exact_search(const generator_params& given,
                                                 const zb_exact_options& opts) {
  constexpr std::string_view who = "zb-exact";
  const detail::shaped_params params = detail::split_backward_shape(who, given, 1);
  const std::uint32_t p = params.stages;
  const std::uint32_t m = params.microbatches;
  if (params.costs.has_microbatch_factors() || params.memory.has_microbatch_factors()) {
    detail::fail(who,
                 ": per-micro-batch factors (docs/model.md §3.1) are not supported by the "
                 "exact search: its states count micro-batches, not which ones (use zb-auto)");
  }
  if (p > opts.max_stages) {
    detail::fail(who, ": stages (p=", p, ") must be at most max_stages (", opts.max_stages,
                 "): the exact search is exponential in p*m (raise the cap to try)");
  }
  if (m > opts.max_microbatches) {
    detail::fail(who, ": microbatches (m=", m, ") must be at most max_microbatches (",
                 opts.max_microbatches,
                 "): the exact search is exponential in p*m (raise the cap to try)");
  }
  if (m > 255 || detail::exact_search::key_bits(p, m) > 256) {
    detail::fail(who, ": stages*microbatches (p=", p, ", m=", m,
                 ") is too large for the exact search's state encoding (p*(2*bits(m)+4) must "
                 "be at most 256)");
  }
  if (!std::isfinite(opts.time_budget_ms) || opts.time_budget_ms < 0.0) {
    detail::fail(who, ": time_budget_ms (", opts.time_budget_ms, ") must be finite and >= 0");
  }
  const placement pl = placement::sequential(p);
  std::vector<double> limits = detail::stage_limits(who, params, pl, 1.0);
  detail::require_minimum_memory(who, pl, params.memory, limits);

  const detail::exact_problem pr = detail::make_exact_problem(params, limits);
  std::vector<double> avail(p);
  for (stage_index s = 0; s < p; ++s) {
    avail[s] = limits[s] - params.memory.static_memory(s);
  }

  zb_exact_result res;
  res.root_bound = detail::span_lower_bound(pl, m, params.costs, params.memory, avail);
  zb_auto_options span_first;  // this search's objective, whatever the stages
  span_first.objective = zb_objective::span;
  zb_auto_result heur = zb_auto_search(params, span_first);
  res.heuristic_span = heur.span;
  // The heuristic's order is the incumbent only if it truly fits these limits.
  bool heur_fits = true;
  for (stage_index s = 0; s < p; ++s) {
    heur_fits = heur_fits && heur.peak[s] <= limits[s] + 1e-9 * limits[s];
  }
  const bool seeded = opts.seed_with_zb_auto && heur_fits;

  detail::exact_limits lim;
  lim.nodes = opts.node_budget;
  lim.ms = opts.time_budget_ms;
  lim.dominance = opts.dominance;
  lim.memo_bytes = opts.memo_bytes;
  detail::exact_search search(pr, lim);
  search.run(seeded ? heur.span : std::numeric_limits<double>::infinity(), res.root_bound);
  res.nodes = search.nodes();
  res.dominated = search.dominated();
  res.bounded = search.bounded();
  res.memo_states = search.memo_states();

  // The search's order unless the heuristic's is shorter (possible only unseeded, when a
  // budget cut the search); a seeded search only reports strictly shorter orders.
  std::vector<std::vector<op>> ops;
  const bool use_search =
      search.improved() && (!heur_fits || search.best_span() <= heur.span + pr.eps);
  if (use_search) {
    ops = search.best_ops();
  } else if (heur_fits) {
    for (stage_index s = 0; s < p; ++s) {
      ops.emplace_back(heur.sched.ops(s).begin(), heur.sched.ops(s).end());
    }
  } else {
    detail::fail(who, ": no order within the memory limit found within the node/time budget");
  }
  // Time the result with the library's order timing (pinned to the simulator by tests).
  const detail::greedy_problem gp(pl, m, params.costs, params.memory, avail);
  std::vector<std::vector<double>> start;
  const detail::order_times t = detail::time_order(gp, ops, start);
  PIPESCHED_ASSERT(t.complete, "zb_exact_search: the result deadlocks");
  PIPESCHED_ASSERT(!use_search || std::abs(t.max_span - search.best_span()) <= 1e3 * pr.eps,
                   "zb_exact_search: the search timed its order differently");
  res.span = t.max_span;
  res.makespan = t.makespan;
  res.proven = !search.exhausted();
  res.lower_bound = res.proven ? res.span : std::min(res.span, res.root_bound);
  res.peak = detail::order_peak(ops, params.memory, 1);
  res.limits = std::move(limits);
  res.sched = detail::to_schedule(who, m, pl, std::move(ops));
  return res;
}
#endif

}  // namespace pipesched
