#pragma once

#include <string>

#include <fmt/core.h>

#include "pipesched/analysis/schedule_report.hpp"
#include "pipesched/io/terminal.hpp"
#include "pipesched/io/text.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

/// The readable report of `pipesched simulate`: the timeline (render_timeline with `view`),
/// the shape, makespan, bubble rate and utilization, the gap to the lower bound when the
/// report has one, a per-stage table (span, busy, idle, idle %, peak memory) and one
/// `memory_budget: ...` line per stage over the limit. For a report whose schedule ran:
/// valid, so `simulation` and `memory` are filled (report_schedule() of a valid schedule).
inline std::string report_text(const schedule& s,
                               const schedule_report& rep,
                               const terminal_options& view = {}) {
  const simulation_result& r = rep.simulation;
  std::string out = render_timeline(s, to_timeline(s, r), view) + "\n";
  out += fmt::format("{}: p={} m={} v={}, {} ops\n", s.name().empty() ? "schedule" : s.name(),
                     s.stages(), s.microbatches(), s.chunks(), s.size());
  const double span = r.stages.at(r.max_span_stage).span;
  out += fmt::format(
      "makespan {}, bubble rate {:.4f} (largest span {} on stage {}), utilization {:.4f}\n",
      format_time(r.makespan), r.bubble_rate, format_time(span), r.max_span_stage, r.utilization);
  if (rep.lower_bound) {
    out += fmt::format("lower bound on the span within this memory limit: {} (gap {:.2f}%)\n",
                       format_time(*rep.lower_bound),
                       span > 0 ? 100.0 * (span - *rep.lower_bound) / span : 0.0);
  }
  out += fmt::format("{:>6} {:>10} {:>10} {:>10} {:>7} {:>12}  {}\n", "stage", "span", "busy",
                     "idle", "idle%", "peak memory", times_in(cost_units));
  for (stage_index st = 0; st < s.stages(); ++st) {
    const auto& t = r.stages[st];
    out += fmt::format("{:>6} {:>10g} {:>10g} {:>10g} {:>6.1f}% {:>12g}\n", st, t.span, t.busy,
                       t.idle, 100.0 * t.idle_fraction, rep.memory.peak_memory(st));
  }
  for (const auto& l : violation_lines(rep.memory.violations)) {
    out += l + "\n";
  }
  return out;
}

}  // namespace pipesched
