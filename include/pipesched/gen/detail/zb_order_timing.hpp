#pragma once

// The zero-bubble search's order timing: the timing engine run on plain op lists (no schedule
// built), for the orders the greedy, the ports and the local search produce.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/gen/detail/zb_bound.hpp"
#include "pipesched/gen/detail/zb_objective.hpp"
#include "pipesched/gen/detail/zb_problem.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched::detail {
/// Span and makespan of an order timed by time_order.
struct order_times {
  bool complete = false;  ///< false when the order deadlocks (times are then partial)
  double max_span = 0.0;  ///< the longest stage span
  double makespan = 0.0;
};

/// Exact start times of an F/B/W order on pr's placement: the timing engine
/// (analysis/detail/timed_traverse.hpp, docs/model.md §3) run on the lists as they are, without
/// building a schedule. O(ops). `start` is resized to the lists' shape; after a deadlock it
/// holds the times of the ops that ran.
inline order_times time_order(const greedy_problem& pr,
                              const std::vector<std::vector<op>>& ops,
                              std::vector<std::vector<double>>& start) {
  const std::uint32_t p = pr.pl.stages();
  start.resize(p);
  for (stage_index s = 0; s < p; ++s) {
    start[s].resize(ops[s].size());
  }
  std::vector<double> first(p, 0.0);
  std::vector<double> last(p, 0.0);
  std::vector<char> ran(p, 0);
  const op_lists lists{&pr.pl, pr.m, &ops};
  auto visit = [&](const timed_step& t) {
    start[t.stage][t.index] = t.start;
    if (t.index == 0) {
      first[t.stage] = t.start;
      ran[t.stage] = 1;
    }
    last[t.stage] = t.end;
  };
  auto no_rendezvous = [](stage_index, stage_index) { return 0.0; };
  const traversal_result tr =
      pr.timing_mb ? timed_traverse(lists, pr.plan, pr.timing_mb->view(), no_rendezvous, visit)
                   : timed_traverse(lists, pr.plan, pr.timing.data(), no_rendezvous, visit);
  order_times out;
  out.complete = tr.complete;
  for (stage_index s = 0; s < p; ++s) {
    if (ran[s] != 0) {
      out.max_span = std::max(out.max_span, last[s] - first[s]);
      out.makespan = std::max(out.makespan, last[s]);
    }
  }
  return out;
}

}  // namespace pipesched::detail
