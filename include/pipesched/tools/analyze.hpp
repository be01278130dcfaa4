#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/analysis/telemetry.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/gen/replan.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/transform/recompute.hpp"

// Telemetry in, straggler out, plan back (docs/robustness.md §5) as one call: what
// `pipesched analyze` and Python's analyze() do with a measured run, and what the
// io/analyze_io.hpp writers print.

namespace pipesched {

/// What a plan assumed, to compare a measured run with (calibrate_achieved_fraction): the op
/// times of `pipesched plan --export PREFIX` (PREFIX.costs.json, in seconds) and the achieved
/// fraction of peak they were computed with.
struct planned_speed {
  cost_model costs;              ///< the plan's per-stage op times, in seconds
  double achieved_fraction = 0;  ///< the share of peak the plan assumed, in (0, 1]
  double seconds_per_unit = 0;   ///< the trace's time unit in seconds (1e-6: microseconds)
};

/// The calibration's three inputs (the plan's op times, the achieved fraction it assumed, the
/// trace's time unit) come together or not at all: one alone says nothing. Returns whether all
/// three are given; throws field_error (field "planned") for one or two. The rule is here once;
/// the front ends only name their own spellings of the three.
inline bool calibration_inputs_given(bool costs, bool achieved_fraction, bool seconds_per_unit) {
  const int given = int{costs} + int{achieved_fraction} + int{seconds_per_unit};
  if (given != 0 && given != 3) {
    detail::fail_field("analyze", "planned",
                       "only meaningful together (the plan's op times, the achieved fraction it "
                       "assumed, the trace's time unit)");
  }
  return given == 3;
}

/// How fast the measured ops ran against the plan's, and the achieved fraction that makes the
/// plan's op times match them (docs/model.md §10, "Calibration").
struct achieved_fraction_calibration {
  double measured_s = 0.0;  ///< the run's compute time per micro-batch (Σ over ops / m), seconds
  double planned_s = 0.0;   ///< the plan's time of the same ops per micro-batch, seconds
  double ratio = 0.0;       ///< measured_s / planned_s: above 1, slower than planned
  double achieved_fraction = 0.0;  ///< planned achieved fraction / ratio: plan with this
};

namespace detail {

/// Who the calibration's errors name (`pipesched analyze` maps them to --planned-costs).
inline constexpr const char* calibration_who = "calibrate_achieved_fraction";

inline void check_planned_speed(const planned_speed& plan) {
  if (!(plan.achieved_fraction > 0.0 && plan.achieved_fraction <= 1.0)) {
    fail_field(calibration_who, "achieved_fraction", "must be in (0, 1], got ",
               shortest(plan.achieved_fraction));
  }
  if (!(std::isfinite(plan.seconds_per_unit) && plan.seconds_per_unit > 0.0)) {
    fail_field(calibration_who, "seconds_per_unit", "must be finite and > 0, got ",
               plan.seconds_per_unit);
  }
}

}  // namespace detail

/// The achieved fraction of peak a measured run shows, from each stage's ops measured and
/// planned (compare_with_plan, with plan.costs): op time is FLOPs / (peak · fraction), so the
/// fraction scales with planned / measured time, summed over every compute op the run measured
/// (each micro-batch with its own planned time: a run that is exactly the plan gives ratio 1 and
/// the plan's fraction, whatever the micro-batches' lengths). The op times are taken as all
/// compute (a tensor-parallel collective inside F and B is counted as compute too, which makes
/// the estimate slightly low when collectives take a large share). Throws field_error for a
/// fraction outside (0, 1] or a unit that is not finite and > 0 (fields "achieved_fraction",
/// "seconds_per_unit"), invalid_argument when the result exceeds the peak (the unit or the
/// costs are not the run's) or there is no time to compare.
inline achieved_fraction_calibration calibrate_achieved_fraction(
    const std::vector<stage_against_plan>& per_stage,
    std::uint32_t microbatches,
    const planned_speed& plan) {
  detail::check_planned_speed(plan);
  const double m = microbatches == 0 ? 1.0 : microbatches;
  achieved_fraction_calibration c;
  for (const stage_against_plan& s : per_stage) {
    c.measured_s += s.measured;
    c.planned_s += s.planned;
  }
  c.measured_s *= plan.seconds_per_unit / m;
  c.planned_s /= m;
  if (!(c.measured_s > 0.0 && c.planned_s > 0.0)) {
    detail::fail(detail::calibration_who, ": the measured (", c.measured_s, " s) and planned (",
                 c.planned_s, " s) op times must both be > 0");
  }
  c.ratio = c.measured_s / c.planned_s;
  c.achieved_fraction = plan.achieved_fraction / c.ratio;
  if (!(c.achieved_fraction <= 1.0)) {
    detail::fail(detail::calibration_who, ": the run's ops took ", c.ratio,
                 " times the planned time, an achieved fraction of ", c.achieved_fraction,
                 " of peak (above 1): the trace's unit (seconds_per_unit ", plan.seconds_per_unit,
                 ") or the planned costs are not the run's");
  }
  return c;
}

/// The same from the run itself: compare_with_plan(run, plan.costs) first (invalid_argument
/// when the costs do not have the run's shape).
inline achieved_fraction_calibration calibrate_achieved_fraction(const measured_run& run,
                                                                 const planned_speed& plan) {
  detail::check_planned_speed(plan);
  const std::string who = std::string(detail::calibration_who) + ": the planned costs";
  return calibrate_achieved_fraction(compare_with_plan(run, plan.costs, who), run.microbatches,
                                     plan);
}

struct analyze_options {
  straggler_thresholds thresholds{};
  double comm = 0.0;  ///< transfer latency of the re-plan, in the run's time unit
  /// Generators to re-plan with and their memory limit (replan_options).
  replan_options replan{};
  /// Ops of one stage whose measured times overlap are an error (a stage runs one op at a time:
  /// the trace's clock or its ops are wrong); true accepts them, each a warning in the result.
  bool allow_overlaps = false;
  /// Set: also estimate the achieved fraction of peak against this plan (analyze_result::
  /// calibration), and find the stragglers against it (each stage against its own plan, not
  /// against its peers: a plan's unequal stages are not stragglers).
  std::optional<planned_speed> planned{};
  /// Told the phase it starts ("estimating the costs of 96 ops", "re-planning with zb-auto").
  std::function<void(const std::string&)> phase{};
};

/// What analyze_run() found.
struct analyze_result {
  std::string name;  ///< the run's schedule name (empty when the source gives none)
  std::uint32_t stages = 0, microbatches = 0, chunks = 1;
  std::size_t ops = 0;                    ///< ops measured
  std::vector<stage_estimate> estimates;  ///< estimate_costs
  /// find_stragglers: against the plan with analyze_options::planned, else against the peers.
  std::vector<straggler> stragglers;
  straggler_thresholds thresholds;  ///< the thresholds they were found with
  replan_result plan;               ///< replan under measured_cost_model
  /// Overlapping ops accepted with allow_overlaps, one line each ("stage 1: F3 (10 .. 14)
  /// overlaps B2 (12 .. 15)").
  std::vector<std::string> warnings;
  /// With analyze_options::planned: each stage's ops measured and planned (compare_with_plan)
  /// and the run's speed against the plan's.
  std::vector<stage_against_plan> against_plan;
  std::optional<achieved_fraction_calibration> calibration;
};

/// estimate_costs, find_stragglers (with a plan: compare_with_plan, the stragglers against it
/// and calibrate_achieved_fraction), measured_cost_model and replan on `run` (the re-plans
/// recomputing every chunk of the stages where the run ran R ops), after checking
/// the trace: an op measured twice, an order that is not a whole valid schedule (a missing op,
/// an op out of order, a deadlock) or, unless allow_overlaps, ops of one stage that overlap in
/// time throw invalid_argument naming the stage, the op and the times. A threshold (fields
/// "absolute", "relative") or comm out of range throws field_error; an unknown generator, and
/// what the steps throw, invalid_argument.
PIPESCHED_INLINE analyze_result
analyze_run(const measured_run& run,
            const analyze_options& o = {},
            const generator_registry& registry = default_registry());

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_ANALYZE)
PIPESCHED_INLINE analyze_result analyze_run(const measured_run& run,
                                            const analyze_options& o,
                                            const generator_registry& registry) {
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
  if (o.planned) {
    detail::check_planned_speed(*o.planned);
    r.against_plan = compare_with_plan(
        run, o.planned->costs, std::string(detail::calibration_who) + ": the planned costs");
    r.stragglers = find_stragglers(r.against_plan, run.microbatches, o.thresholds);
    r.calibration = calibrate_achieved_fraction(r.against_plan, run.microbatches, *o.planned);
  } else {
    r.stragglers = find_stragglers(r.estimates, o.thresholds);
  }
  const cost_model measured = measured_cost_model(r.estimates, run.layout.chunks(), o.comm);
  std::string names;
  for (const std::string& g : o.replan.generators) {
    names += (names.empty() ? "" : ", ") + g;
  }
  tell("re-planning with " + names);
  // A run that recomputed is compared with re-plans that recompute on the same stages (each of
  // their chunks there, R right before its backward): without it a re-plan would gain the R
  // time it skips, a gain no order can give.
  replan_options ro = o.replan;
  if (run.layout.chunks() > 1 && !ro.timing) {
    ro.timing = measured_chunk_cost_model(run, o.comm);
  }
  std::vector<bool> recomputes(ran.stages(), false);
  for (stage_index s = 0; s < ran.stages(); ++s) {
    for (const op& x : ran.ops(s)) {
      recomputes[s] = recomputes[s] || x.kind == op_kind::recompute;
    }
  }
  if (std::find(recomputes.begin(), recomputes.end(), true) != recomputes.end()) {
    ro.finish = [recomputes, inner = o.replan.finish](const schedule& generated) {
      const schedule g = inner ? inner(generated) : generated;
      const placement& pl = g.layout();
      std::vector<global_chunk> chunks;
      for (global_chunk c = 0; c < pl.total_chunks(); ++c) {
        if (recomputes[pl.stage_of(c)]) {
          chunks.push_back(c);
        }
      }
      return with_recompute(g, chunks);
    };
  }
  r.plan = replan(ran, measured, ro, registry);
  return r;
}
#endif

}  // namespace pipesched
