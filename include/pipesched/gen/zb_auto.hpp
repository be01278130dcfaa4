#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/zb_search_types.hpp"
#include "pipesched/ir/detail/linkage.hpp"

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ZB_SEARCH)
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/gen/detail/zb_objective.hpp"
#include "pipesched/gen/detail/zb_search.hpp"
#include "pipesched/ir/detail/recompute_order.hpp"
#endif

namespace pipesched {

/// Which memory limit zb_auto uses.
enum class zb_memory_preset : std::uint8_t {
  given,  ///< "zb-auto": generator_params::memory_limit, or p·M_B per stage (1F1B's peak)
  one_p,  ///< "zb-1p": p·M_B per stage (+ static memory)
  two_p,  ///< "zb-2p": 2p·M_B per stage (+ static memory)
};

/// The memory-bounded automatic zero-bubble scheduler (docs/model.md §7), one chunk per stage,
/// split B/W. Honours per-stage costs, T_comm (uniform or per link), M_B / M_W, static memory
/// and a per-stage memory limit (in the units of generator_params::memory, static included).
/// The hand-crafted ZB-H1 / ZB-H2 orders are timed when they fit the limits; unless one
/// reaches the lower bound (detail/zb_bound.hpp; then nothing can be shorter and the search
/// ends), the paper's greedy is run for every choice combination (16 here: the paper's 8 and
/// the bubble rule off), best-first with exact pruning (search_choices: runs proven identical
/// are skipped, runs that provably lose are cut). The best by opts.objective is kept (by
/// default the shortest longest-stage span, ties: shorter makespan, when every stage is the
/// same, else the shortest makespan, ties: shorter span; then the greedy, then the lower
/// choice), then W ops are moved into earlier gaps. The result carries lower bounds on any
/// schedule's span and makespan within the same limits. Never exceeds the limit; throws
/// invalid_argument when the limit is below one micro-batch's activations plus static memory on
/// some stage (the true minimum: a one-micro-batch-at-a-time order needs exactly that). With unit
/// costs it reaches ZB-H1's span at p·M_B and zero bubble at 2p·M_B. Each greedy run is O(p·m·log
/// p). With opts.recompute it also searches an order with every chunk recomputed (docs/model.md §7)
/// and returns it (zb_auto_result::recomputed) when shorter in the objective.
PIPESCHED_INLINE zb_auto_result zb_auto_search(const generator_params& given,
                                               const zb_auto_options& opts = {},
                                               zb_memory_preset preset = zb_memory_preset::given,
                                               std::string_view who = "zb-auto");

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ZB_SEARCH)
PIPESCHED_INLINE zb_auto_result zb_auto_search(const generator_params& given,
                                               const zb_auto_options& opts,
                                               zb_memory_preset preset,
                                               std::string_view who) {
  const detail::shaped_params params = detail::split_backward_shape(who, given, 1);
  if (preset != zb_memory_preset::given && params.memory_limit) {
    detail::fail(who, ": memory_limit must not be given: this preset fixes it to ",
                 preset == zb_memory_preset::one_p ? "p" : "2p", "*M_B (use zb-auto)");
  }
  const placement pl = placement::sequential(params.stages);
  const double factor = preset == zb_memory_preset::two_p ? 2.0 : 1.0;
  const std::vector<double> limits = detail::stage_limits(who, params, pl, factor);
  if (opts.recompute &&
      (params.costs.has_microbatch_factors() || params.memory.has_microbatch_factors())) {
    detail::fail(who,
                 ": recompute (search an order with every chunk recomputed) does not take "
                 "per-micro-batch factors (docs/model.md §3.1) yet");
  }
  zb_auto_result plain = detail::zb_search(who, params, pl, limits, opts);
  if (!opts.recompute) {
    return plain;
  }
  // The recomputing order is searched as a plain one whose B lasts T_R + T_B (its R runs right
  // before it) and whose F holds M_B' = max(M_in, M_W) until the B, under a limit lowered by the
  // M_B − M_B' the R..B transient adds. Its real timing is no later (R may start before the
  // gradient arrives) and its real memory no higher, so it fits the limit.
  const std::uint32_t p = params.stages;
  std::vector<op_costs> costs(p);
  std::vector<chunk_memory> sizes(p);
  std::vector<double> lowered(p);
  double busy_with_r = 0.0;
  for (stage_index s = 0; s < p; ++s) {
    const op_costs t = params.costs.at(s, 0);
    const double t_r = params.costs.duration(s, op_kind::recompute, 0);
    costs[s] = op_costs{t.forward, t_r + t.backward_input, t.backward_weight};
    busy_with_r = std::max(busy_with_r, params.microbatches * (t.forward + t_r + t.backward_input +
                                                               t.backward_weight));
    const chunk_memory c = params.memory.at(s, 0);
    const double held = std::max(c.input, c.weight_grad_input);
    sizes[s] = chunk_memory{held, c.weight_grad_input, c.received, c.input};
    lowered[s] = limits[s] - (c.activation - held);
  }
  generator_params plain_rp = params;  // the base: the same models, not read for a shape
  plain_rp.costs.set_stage_costs(std::move(costs));
  plain_rp.memory.set_stage_memory(std::move(sizes));
  const detail::shaped_params rp = detail::for_shape(who, plain_rp, 1);
  zb_auto_options ro = opts;
  ro.recompute = false;
  ro.objective = plain.objective;  // decided on the real costs, not on the B that holds T_R
  zb_auto_result rc = detail::zb_search(who, rp, pl, lowered, ro);
  rc.sched = detail::recompute_before_backward(rc.sched, std::vector<bool>(p, true));
  const simulation_result sim = simulate(rc.sched, params.costs, {false, false, false});
  double span = 0.0;
  for (const stage_timing& st : sim.stages) {
    span = std::max(span, st.span);
  }
  // Either kind of schedule within the limits: no shorter than the plain bound or than the
  // work a recomputing one does.
  const double bound = std::min(plain.lower_bound, busy_with_r);
  const double makespan_bound = std::min(plain.makespan_lower_bound, busy_with_r);
  // Kept only when strictly better in the objective.
  const detail::search_objective obj{plain.objective == zb_objective::makespan};
  const double value = obj.primary(span, sim.makespan);
  const double plain_value = obj.primary(plain.span, plain.makespan);
  if (!(value < plain_value - 1e-9 * std::max(1.0, plain_value))) {
    plain.lower_bound = bound;
    plain.makespan_lower_bound = makespan_bound;
    return plain;
  }
  rc.span = span;
  rc.makespan = sim.makespan;
  rc.lower_bound = bound;
  rc.makespan_lower_bound = makespan_bound;
  rc.ideal = plain.ideal;
  rc.recomputed = true;
  return rc;
}
#endif

/// schedule_generator for zb_auto_search: "zb-auto", "zb-1p" or "zb-2p".
struct zb_auto {
  zb_memory_preset preset = zb_memory_preset::given;

  std::string_view name() const noexcept {
    switch (preset) {
      case zb_memory_preset::one_p:
        return "zb-1p";
      case zb_memory_preset::two_p:
        return "zb-2p";
      default:
        return "zb-auto";
    }
  }
  schedule generate(const generator_params& params) const { return search(params).sched; }
  /// zb_auto_search with this preset: the schedule with its bound (what the registry keeps).
  zb_auto_result search(const generator_params& params, const zb_auto_options& opts = {}) const {
    return zb_auto_search(params, opts, preset, name());
  }
};

}  // namespace pipesched
