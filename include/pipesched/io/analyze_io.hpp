#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "pipesched/analysis/telemetry.hpp"
#include "pipesched/io/text.hpp"
#include "pipesched/tools/analyze.hpp"

// What `pipesched analyze` and Python's analyze() print (docs/formats.md, "analyze"): the
// per-stage estimates, the stragglers and the re-plans of an analyze_result, as JSON and text.

namespace pipesched {

/// The JSON object: schedule, stages (per stage F, B, W, BW, R as {median, mad, count}, each left
/// out when not measured, and per_microbatch), stragglers (against: "plan" or "peers"), current,
/// replans (improves: predicted faster than the run's order), and with a plan to compare with,
/// calibration {measured_s, planned_s, ratio, achieved_fraction}.
inline nlohmann::json analyze_to_json(const analyze_result& r) {
  // A kind the trace has no op of is left out (never null: every value is a number).
  auto put = [](nlohmann::json& j, const char* kind, const std::optional<duration_estimate>& d) {
    if (d) {
      j[kind] = {{"median", d->median}, {"mad", d->mad}, {"count", d->count}};
    }
  };
  nlohmann::json j{{"schedule", r.name},
                   {"stages", nlohmann::json::array()},
                   {"stragglers", nlohmann::json::array()},
                   {"current", r.plan.current},
                   {"replans", nlohmann::json::array()}};
  for (const stage_estimate& e : r.estimates) {
    nlohmann::json st{{"per_microbatch", e.per_microbatch}};
    put(st, "F", e.forward);
    put(st, "B", e.backward_input);
    put(st, "W", e.backward_weight);
    put(st, "BW", e.backward_full);
    put(st, "R", e.recompute);
    j["stages"].push_back(std::move(st));
  }
  for (const straggler& x : r.stragglers) {
    j["stragglers"].push_back({{"stage", x.stage},
                               {"per_microbatch", x.per_microbatch},
                               {"peers", x.peers},
                               {"excess", x.excess},
                               {"relative", x.relative},
                               {"against", x.against_plan ? "plan" : "peers"}});
  }
  for (const replan_candidate& c : r.plan.candidates) {
    j["replans"].push_back({{"generator", c.generator},
                            {"makespan", c.makespan},
                            {"gain", c.gain},
                            {"relative_gain", c.relative_gain},
                            {"improves", c.improves()}});
  }
  if (r.calibration) {
    const achieved_fraction_calibration& c = *r.calibration;
    j["calibration"] = {{"measured_s", c.measured_s},
                        {"planned_s", c.planned_s},
                        {"ratio", c.ratio},
                        {"achieved_fraction", c.achieved_fraction}};
  }
  return j;
}

/// The readable report: a table of the estimates, the stragglers, the re-plans.
inline std::string analyze_text(const analyze_result& r) {
  std::string t =
      fmt::format("{}  p={} m={} v={}  {} ops measured\n", r.name.empty() ? "run" : r.name,
                  r.stages, r.microbatches, r.chunks, r.ops);
  constexpr std::string_view unit = "trace units";  // the measured costs are the trace's
  // The R column only for a run that recomputed.
  const bool recomputed =
      std::any_of(r.estimates.begin(), r.estimates.end(),
                  [](const stage_estimate& e) { return e.recompute.has_value(); });
  t += std::string("stage  F median (MAD)  B median (MAD)  W median (MAD)  BW median (MAD)  ") +
       (recomputed ? " R median (MAD)  " : "") + "per mb  " + times_in(unit) + "\n";
  auto cell = [](const std::optional<duration_estimate>& d) {
    return d ? fmt::format("{:.4g} ({:.2g})", d->median, d->mad) : std::string("-");
  };
  for (stage_index s = 0; s < r.estimates.size(); ++s) {
    const stage_estimate& e = r.estimates[s];
    t += fmt::format("{:>5}  {:>14}  {:>14}  {:>14}  {:>15}  ", s, cell(e.forward),
                     cell(e.backward_input), cell(e.backward_weight), cell(e.backward_full));
    if (recomputed) {
      t += fmt::format("{:>15}  ", cell(e.recompute));
    }
    t += fmt::format("{:.4g}\n", e.per_microbatch);
  }
  if (r.stragglers.empty()) {
    t += fmt::format("stragglers: none (thresholds: {:g} absolute, {:g}% relative)\n",
                     r.thresholds.absolute, 100 * r.thresholds.relative);
  }
  for (const straggler& x : r.stragglers) {
    t += fmt::format("straggler: stage {}: {} per micro-batch, {} ({:.1f}%) above {}\n", x.stage,
                     format_time(x.per_microbatch, unit, 4), format_time(x.excess, unit, 4),
                     100 * x.relative,
                     x.against_plan ? "its plan at its peers' speed" : "its peers");
  }
  if (r.calibration) {
    const achieved_fraction_calibration& c = *r.calibration;
    // Three decimals, or three significant digits below 0.1: the value suggested must be one
    // plan takes (> 0), never a rounded "0.000".
    const std::string fraction = c.achieved_fraction >= 0.1
                                     ? fmt::format("{:.3f}", c.achieved_fraction)
                                     : fmt::format("{:.3g}", c.achieved_fraction);
    t += fmt::format(
        "speed against the plan: compute {:.4g} s per micro-batch over the stages, planned "
        "{:.4g} s ({:.3f}x); achieved fraction of peak {} (plan with --achieved-fraction {})\n",
        c.measured_s, c.planned_s, c.ratio, fraction, fraction);
  }
  t += fmt::format("re-plan with the measured costs (the run's order predicts {}):\n",
                   format_time(r.plan.current, unit));
  for (const replan_candidate& c : r.plan.candidates) {
    // Only a plan predicted faster is a suggestion; the others say by how much they lose.
    t += c.improves()
             ? fmt::format("  {:<10} {}  gain {} ({:.1f}%)\n", c.generator,
                           format_time(c.makespan, unit), format_time(c.gain, unit, 4),
                           100 * c.relative_gain)
             : fmt::format("  {:<10} {}  no gain: {} ({:.1f}%) slower than the run's order\n",
                           c.generator, format_time(c.makespan, unit),
                           format_time(0.0 - c.gain, unit, 4), 0.0 - 100 * c.relative_gain);
  }
  return t;
}

}  // namespace pipesched
