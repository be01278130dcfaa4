#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/analysis/telemetry.hpp"
#include "pipesched/analysis/validator.hpp"
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
  /// Ops of one stage whose measured times overlap are an error (a stage runs one op at a time:
  /// the trace's clock or its ops are wrong); true accepts them, each a warning in the result.
  bool allow_overlaps = false;
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
  /// Overlapping ops accepted with allow_overlaps, one line each ("stage 1: F3 (10 .. 14)
  /// overlaps B2 (12 .. 15)").
  std::vector<std::string> warnings;
};

/// estimate_costs, find_stragglers, measured_cost_model and replan on `run`, after checking
/// the trace: an op measured twice, an order that is not a whole valid schedule (a missing op,
/// an op out of order, a deadlock) or, unless allow_overlaps, ops of one stage that overlap in
/// time throw invalid_argument naming the stage, the op and the times. A threshold (fields
/// "absolute", "relative") or comm out of range throws field_error; an unknown generator, and
/// what the steps throw, invalid_argument.
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
  tell(detail::concat("checking the ", run.ops.size(), " ops measured"));
  const bool chunked = run.layout.chunks() > 1;
  for (const measured_overlap& x : check_measured_ops(run, "analyze")) {
    if (!o.allow_overlaps) {
      detail::fail("analyze: ", x.describe(chunked),
                   ": a stage runs one op at a time (accept overlaps to analyze it anyway)");
    }
    r.warnings.push_back(x.describe(chunked));
  }
  const schedule ran = order_of(run);
  const validation_report check = validate(ran);
  if (!check.ok()) {
    throw invalid_argument(
        detail::invalid_schedule_message(check, ran.name(), "analyze: the order the trace ran"));
  }
  tell(detail::concat("estimating the costs of ", run.ops.size(), " ops"));
  r.estimates = estimate_costs(run);
  r.stragglers = find_stragglers(r.estimates, o.thresholds);
  const cost_model measured = measured_cost_model(r.estimates, run.layout.chunks(), o.comm);
  std::string names;
  for (const std::string& g : o.replan.generators) {
    names += (names.empty() ? "" : ", ") + g;
  }
  tell("re-planning with " + names);
  r.plan = replan(ran, measured, o.replan, registry);
  return r;
}

}  // namespace pipesched
