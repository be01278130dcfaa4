#pragma once

#include <string_view>

#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/zb_auto.hpp"
#include "pipesched/gen/zb_search_types.hpp"
#include "pipesched/ir/detail/linkage.hpp"

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ZB_SEARCH)
#include "pipesched/gen/detail/zb_search.hpp"
#endif

namespace pipesched {

/// ZB-V, cost-aware: V placement (stage s holds global chunks s and 2p−1−s, so the forward
/// goes down the stages and back up and the loss is on stage 0), two chunks per stage, split
/// B/W, placed by the automatic zero-bubble search (zb_auto.hpp) generalised to two chunks:
/// all 64 greedy choice combinations and the hand-crafted ZB-V order
/// (detail/zb_v_order.hpp) timed with the real costs, the best by zb_auto_options::objective
/// kept (the shortest longest-stage span when every stage is the same, else the shortest
/// makespan: docs/model.md §7).
///
/// Costs and memory are per stage as everywhere (cost_model, memory_model: a stage's whole
/// slice, so each chunk costs T/2 and holds M_B/2), unless given per chunk by a chunks table;
/// generator_params::memory_limit is per stage in the same units, default 1F1B's peak,
/// p·(M_B of chunk 0 + M_B of chunk 1) + static memory = p·M_B per stage. An F of chunk 0 is
/// admitted only while room for a chunk-1 activation stays free, so the greedy cannot stall; the
/// minimum limit is one micro-batch's two chunk activations plus static memory. With equal costs
/// and that default limit the result has zero bubble once m ≥ 2p (every stage busy from its first
/// op to its last; tested for p 1..8, and the hand-crafted order alone for p 1..12).
PIPESCHED_INLINE zb_auto_result zb_v_search(const generator_params& given,
                                            const zb_auto_options& opts = {});

/// schedule_generator for zb_v_search.
struct zb_v {
  std::string_view name() const noexcept { return "zb-v"; }
  schedule generate(const generator_params& params) const { return search(params).sched; }
  /// zb_v_search: the schedule with its bound (what the registry keeps).
  zb_auto_result search(const generator_params& params, const zb_auto_options& opts = {}) const {
    return zb_v_search(params, opts);
  }
};

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ZB_SEARCH)
PIPESCHED_INLINE zb_auto_result zb_v_search(const generator_params& given,
                                            const zb_auto_options& opts) {
  constexpr std::string_view who = "zb-v";
  const detail::shaped_params params = detail::split_backward_shape(who, given, 2);
  const placement pl = placement::v_shape(params.stages);
  return detail::zb_search(who, params, pl, detail::stage_limits(who, params, pl, 1.0), opts);
}
#endif

}  // namespace pipesched
