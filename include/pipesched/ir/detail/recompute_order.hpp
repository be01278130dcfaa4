#pragma once

#include <cstddef>
#include <vector>

#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched::detail {

/// `sched` with every F of a chunk in `chosen` (indexed by global chunk) marked recompute and an
/// R right before its B / BW, or before the pair when that backward is the second op of an
/// overlapped pair (docs/model.md §1). The one place of this placement rule: with_recompute
/// (transform/recompute.hpp) starts from it, and zb-auto's recomputing search builds its result
/// with it.
inline schedule recompute_before_backward(const schedule& sched, const std::vector<bool>& chosen) {
  const placement& pl = sched.layout();
  schedule out = schedule::on(sched.name(), pl, sched.microbatches());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto ops = sched.ops(s);
    std::vector<op>& list = out.stage_ops(s);
    list.reserve(ops.size() * 2);
    std::size_t pair_at = 0;  // where the current overlapped pair starts in `list`
    for (std::size_t i = 0; i < ops.size(); ++i) {
      op o = ops[i];
      const bool second_of_pair = i > 0 && overlaps_next(ops[i - 1]);
      if (!second_of_pair) {
        pair_at = list.size();
      }
      const bool on = o.chunk < pl.chunks() && chosen[pl.global(s, o.chunk)];
      if (on && o.kind == op_kind::forward) {
        o = recomputing(o);
      } else if (on && produces_input_grad(o.kind)) {
        // Not between the two ops of a pair: before the pair instead.
        const auto at = static_cast<std::ptrdiff_t>(second_of_pair ? pair_at : list.size());
        list.insert(list.begin() + at, make_op(op_kind::recompute, o.mb, o.chunk));
      }
      list.push_back(o);
    }
  }
  return out;
}

}  // namespace pipesched::detail
