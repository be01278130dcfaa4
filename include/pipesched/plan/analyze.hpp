#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/analysis/telemetry.hpp"
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/gen/replan.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"

// Telemetry in, straggler out, plan back (docs/robustness.md §5) as one call: what
// `pipesched analyze` and Python's analyze() do with a measured run, and what the
// io/analyze_io.hpp writers print.

namespace pipesched {

struct analyze_options {
  straggler_thresholds thresholds{};
  double comm = 0.0;  ///< transfer latency of the re-plan, in the run's time unit
  /// Generators to re-plan with and their memory limit (replan_options).
  replan_options replan{};
  /// Told the phase it starts ("estimating the costs of 96 ops", "re-planning with zb-auto").
  std::function<void(const std::string&)> phase{};
};

/// What analyze_run() found.
struct analyze_result {
  std::string name;  ///< the run's schedule name (empty when the source gives none)
  std::uint32_t stages = 0, microbatches = 0, chunks = 1;
  std::size_t ops = 0;                    ///< ops measured
  std::vector<stage_estimate> estimates;  ///< estimate_costs
  std::vector<straggler> stragglers;      ///< find_stragglers
  straggler_thresholds thresholds;        ///< the thresholds they were found with
  replan_result plan;                     ///< replan under measured_cost_model
};

/// estimate_costs, find_stragglers, measured_cost_model and replan on `run`. A threshold
/// (fields "absolute", "relative") or comm out of range throws field_error; an unknown
/// generator, and what the steps throw, invalid_argument.
inline analyze_result analyze_run(const measured_run& run,
                                  const analyze_options& o = {},
                                  const generator_registry& registry = default_registry()) {
  auto tell = [&](const std::string& what) {
    if (o.phase) {
      o.phase(what);
    }
  };
  if (!std::isfinite(o.comm) || o.comm < 0.0) {
    detail::fail_field("analyze", "comm", "must be finite and >= 0, got ", o.comm);
  }
  analyze_result r;
  r.name = run.name;
  r.stages = run.layout.stages();
  r.microbatches = run.microbatches;
  r.chunks = run.layout.chunks();
  r.ops = run.ops.size();
  r.thresholds = o.thresholds;
  tell(detail::concat("estimating the costs of ", run.ops.size(), " ops"));
  r.estimates = estimate_costs(run);
  r.stragglers = find_stragglers(r.estimates, o.thresholds);
  const cost_model measured = measured_cost_model(r.estimates, run.layout.chunks(), o.comm);
  std::string names;
  for (const std::string& g : o.replan.generators) {
    names += (names.empty() ? "" : ", ") + g;
  }
  tell("re-planning with " + names);
  r.plan = replan(order_of(run), measured, o.replan, registry);
  return r;
}

}  // namespace pipesched
