#pragma once

#include <limits>

#include "pipesched/gen/zb_search_types.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

// What the zero-bubble search minimises and how it compares two candidates (docs/model.md §7),
// written once: every comparison of the search (seeds, the authors' heuristics, the greedy
// choices and their cuts, the local search, the recomputing order) goes through here.

namespace pipesched::detail {

/// Whether the stages of a search problem differ: some stage's op costs (T_F, T_B, T_W, T_R of
/// each local chunk) or memory (M_B, M_W, M_in of each local chunk, static memory) are not
/// stage 0's. This is the rule that picks zb_objective::automatic's objective. Link latencies
/// are not a stage's own and do not count; the limit is the same on every stage (or follows
/// from static memory and M_B). The models are read for the shape already (for_shape).
inline bool stages_differ(const placement& pl,
                          const shaped_cost_model& costs,
                          const shaped_memory_model& memory) {
  // Micro-batches that differ (docs/model.md §3.1): which one a stage runs first decides when
  // the later stages start, which the span does not see; the makespan is the step time.
  if (costs.has_microbatch_factors() || memory.has_microbatch_factors()) {
    return true;
  }
  for (stage_index s = 1; s < pl.stages(); ++s) {
    if (memory.static_memory(s) != memory.static_memory(0)) {
      return true;
    }
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      const op_costs a = costs.at(s, c);
      const op_costs b = costs.at(0, c);
      const chunk_memory x = memory.at(s, c);
      const chunk_memory y = memory.at(0, c);
      if (a.forward != b.forward || a.backward_input != b.backward_input ||
          a.backward_weight != b.backward_weight ||
          costs.duration(s, op_kind::recompute, c) != costs.duration(0, op_kind::recompute, c) ||
          x.activation != y.activation || x.weight_grad_input != y.weight_grad_input ||
          x.input != y.input) {
        return true;
      }
    }
  }
  return false;
}

/// Where a candidate's search may stop: it cannot beat the best order found so far, which has
/// this span and makespan. `tie_loses`: whether a complete tie goes to the best (a lower-index
/// choice, or none for a seed).
struct greedy_cut {
  double span = std::numeric_limits<double>::infinity();
  double makespan = std::numeric_limits<double>::infinity();
  bool tie_loses = false;
};

/// The objective in use, resolved: the longest stage span first (ties: the makespan), or the
/// makespan first (ties: the span). Times compare within `eps`.
struct search_objective {
  bool makespan_first = false;

  /// `asked`, with automatic resolved by stages_differ: the makespan when the stages differ.
  static search_objective resolve(zb_objective asked, bool differ) noexcept {
    return {asked == zb_objective::makespan || (asked == zb_objective::automatic && differ)};
  }
  zb_objective kind() const noexcept {
    return makespan_first ? zb_objective::makespan : zb_objective::span;
  }
  double primary(double span, double makespan) const noexcept {
    return makespan_first ? makespan : span;
  }
  double secondary(double span, double makespan) const noexcept {
    return makespan_first ? span : makespan;
  }
  /// Whether (span_a, makespan_a) is strictly better than (span_b, makespan_b): a shorter
  /// primary, or an equal one (within eps) and a shorter secondary.
  bool better(double span_a,
              double makespan_a,
              double span_b,
              double makespan_b,
              double eps) const noexcept {
    const double a = primary(span_a, makespan_a);
    const double b = primary(span_b, makespan_b);
    return a < b - eps ||
           (a <= b + eps && secondary(span_a, makespan_a) < secondary(span_b, makespan_b) - eps);
  }
  /// Whether a candidate whose span and makespan will be at least these bounds surely loses
  /// to `cut`.
  bool loses(const greedy_cut& cut,
             double span_bound,
             double makespan_bound,
             double eps) const noexcept {
    const double a = primary(span_bound, makespan_bound);
    const double b = primary(cut.span, cut.makespan);
    if (a > b + eps) {
      return true;  // strictly longer
    }
    if (a < b - eps) {
      return false;  // may still be strictly shorter
    }
    const double x = secondary(span_bound, makespan_bound);
    const double y = secondary(cut.span, cut.makespan);
    return x > y + eps || (cut.tie_loses && x >= y - eps);
  }
};

}  // namespace pipesched::detail
