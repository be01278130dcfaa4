#pragma once

#include "pipesched/analysis/schedule_report.hpp"
#include "pipesched/gen/registry.hpp"

// A generated schedule checked against what it was generated for, in one call: the costs,
// memory and memory limit travel with the generation_result instead of being passed twice.

namespace pipesched {

/// The report_options that check `g.sched` against what it was generated for: the costs, the
/// memory (static memory included) and the memory limit of `g.params`, and the search's lower
/// bound. Change a field to check it against something else, e.g. measured costs, or
/// `simulate = false` for validity and memory alone.
inline report_options report_options_for(const generation_result& g) {
  report_options o;
  o.costs = g.params.costs;
  o.memory = g.params.memory;
  o.memory_limit = g.params.memory_limit;
  o.lower_bound = g.lower_bound;
  return o;
}

/// Validates a generated schedule, simulates it and checks its memory under the costs, memory
/// and memory limit it was generated with: report_schedule(g.sched, report_options_for(g)).
inline schedule_report report_schedule(const generation_result& g) {
  return report_schedule(g.sched, report_options_for(g));
}

}  // namespace pipesched
