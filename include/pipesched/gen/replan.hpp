#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/analysis/simulate.hpp"
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

// Plan back (docs/robustness.md §5): the measured costs (analysis/telemetry.hpp,
// measured_cost_model) fed to the cost-aware generators, and the predicted gain over the order
// that ran.

namespace pipesched {

struct replan_options {
  /// Generators to try, by registry name (cost-aware ones: zb-auto, zb-v, zb-1p, zb-2p).
  std::vector<std::string> generators = {"zb-auto", "zb-v"};
  memory_model memory{};       ///< for the generators' memory limit
  memory_limits memory_limit;  ///< per stage; none: each generator's default
  /// What the run did to its order that a generator does not (analyze_run: its recomputation,
  /// on the stages that recomputed), done to each generated order before it is timed, so that
  /// a re-plan is timed doing the run's work. Unset: the generated order as it is.
  std::function<schedule(const schedule&)> finish{};
  /// The costs the run's order, and every order of its placement, is timed with (the run's own
  /// per-chunk costs: measured_chunk_cost_model); unset, or an order of another placement:
  /// the measured costs replan() is given.
  std::optional<cost_model> timing{};
};

struct replan_candidate {
  std::string generator;
  schedule sched;
  double makespan = 0.0;  ///< predicted, under the measured costs
  double gain = 0.0;      ///< predicted makespan of the run's order − this one's (> 0: faster)
  double relative_gain = 0.0;  ///< gain / the run's predicted makespan

  /// True when this plan is predicted faster than the order that ran: only then a suggestion.
  bool improves() const noexcept { return gain > 0.0; }
};

struct replan_result {
  /// The order that ran, simulated under the measured costs (what the re-plans compare with).
  double current = 0.0;
  std::vector<replan_candidate> candidates;  ///< best (largest gain) first
};

/// Re-plans `ran` (the order a run executed: order_of(measured_run)) with `measured` costs:
/// each generator of `o` builds a schedule for the same p and m with those costs, and all are
/// simulated under them. Throws invalid_argument for an unknown generator name, a generator
/// that rejects the parameters, or an order that deadlocks.
inline replan_result replan(const schedule& ran,
                            const cost_model& measured,
                            const replan_options& o,
                            const generator_registry& registry) {
  simulate_options so;
  so.record_ops = false;
  so.critical_path = false;
  auto timing_of = [&](const schedule& s) -> const cost_model& {
    return o.timing && s.layout() == ran.layout() ? *o.timing : measured;
  };
  const simulation_result now = simulate(ran, timing_of(ran), so);
  if (!now.completed()) {
    detail::fail("replan: the order that ran (\"", ran.name(),
                 "\") deadlocks under its own layout");
  }
  replan_result r;
  r.current = now.makespan;
  for (const std::string& name : o.generators) {
    generator_params gp;
    gp.stages = ran.stages();
    gp.microbatches = ran.microbatches();
    gp.costs = measured;
    gp.memory = o.memory;
    gp.memory_limit = o.memory_limit;
    replan_candidate c;
    c.generator = name;
    c.sched = registry.generate(name, gp);
    if (o.finish) {
      c.sched = o.finish(c.sched);
    }
    c.makespan = simulate(c.sched, timing_of(c.sched), so).makespan;
    c.gain = r.current - c.makespan;
    c.relative_gain = r.current > 0.0 ? c.gain / r.current : 0.0;
    r.candidates.push_back(std::move(c));
  }
  std::stable_sort(
      r.candidates.begin(), r.candidates.end(),
      [](const replan_candidate& a, const replan_candidate& b) { return a.gain > b.gain; });
  return r;
}

/// replan with the built-in generators (default_registry()).
inline replan_result replan(const schedule& ran,
                            const cost_model& measured,
                            const replan_options& o = {}) {
  return replan(ran, measured, o, default_registry());
}

}  // namespace pipesched
