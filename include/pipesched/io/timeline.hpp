#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/analysis/schedule_report.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/stage_table.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

// The io/ renderers (terminal, SVG, Chrome trace, simulation JSON) draw a `timeline`: every
// op of a schedule with a start and an end. It is deliberately small so that any source of
// times can feed it: the unit-step timing below, the timing simulator (to_timeline), or a
// measured executor run (timeline_from_measured).

namespace pipesched {

/// Whether op i of a stage's timeline row and the op after it are an overlapped pair run as one
/// slot (op i marked overlaps_next, both with the same start and end, as the timing engine
/// times a pair: docs/model.md §3). The views draw such a pair as one slot holding both ops and
/// count its time once; a measured run whose pair did not share its slot draws two ops.
inline bool shares_slot_with_next(std::span<const timed_op> row, std::size_t i) noexcept {
  return i + 1 < row.size() && overlaps_next(row[i].o) && row[i + 1].start == row[i].start &&
         row[i + 1].end == row[i].end;
}

/// Every op of a schedule with its interval, by stage and in list order.
struct timeline {
  stage_table<timed_op> stages;  ///< stages[s][i] is op i of stage s
  /// The bubble rate as the source computed it (e.g. the simulator's, from the cost model);
  /// when unset, bubble_rate() derives one from the intervals.
  std::optional<double> reported_bubble_rate;

  /// Time of the last end (time 0 is the start of the iteration).
  double makespan() const noexcept {
    double m = 0.0;
    for (const auto& st : stages) {
      for (const auto& t : st) {
        m = std::max(m, t.end);
      }
    }
    return m;
  }
  /// Stage s's summary from the intervals (stage_timing, analysis/simulate.hpp):
  /// first_start, last_end, span (last end − first start; 0 for an empty stage), busy (the op
  /// durations, an overlapped pair's slot once; a timeline does not tell transfers apart, so
  /// `comm` is 0 and busy includes them), idle = span − busy, idle_fraction and ops_run;
  /// makespan_idle against this timeline's makespan.
  stage_timing summary(stage_index s) const noexcept {
    stage_timing r;
    const auto& st = stages[s];
    if (st.empty()) {
      r.makespan_idle = makespan();
      return r;
    }
    double first = st.front().start;
    double last = st.front().end;
    for (std::size_t i = 0; i < st.size(); ++i) {
      const timed_op& t = st[i];
      first = std::min(first, t.start);
      last = std::max(last, t.end);
      // An overlapped pair's slot counts once (its second op has the same interval).
      r.busy += i > 0 && shares_slot_with_next(st, i - 1) ? 0.0 : t.duration();
    }
    r.first_start = first;
    r.last_end = last;
    r.span = last - first;
    r.idle = r.span - r.busy;
    r.idle_fraction = r.span > 0.0 ? r.idle / r.span : 0.0;
    r.makespan_idle = makespan() - r.busy;
    r.ops_run = st.size();
    return r;
  }
  /// reported_bubble_rate when set, else bubble_rate_of(longest stage span, largest stage
  /// busy time) from the intervals (analysis/metrics.hpp: the one definition); 0 when empty.
  double bubble_rate() const noexcept {
    if (reported_bubble_rate) {
      return *reported_bubble_rate;
    }
    double span = 0.0;
    double busy = 0.0;
    for (stage_index s = 0; s < stages.size(); ++s) {
      const stage_timing r = summary(s);
      span = std::max(span, r.span);
      busy = std::max(busy, r.busy);
    }
    return bubble_rate_of(span, busy);
  }
  /// utilization_of(Σ stage busy time, stages, makespan) from the intervals (analysis/metrics.hpp).
  double utilization() const noexcept {
    double busy = 0.0;
    for (stage_index s = 0; s < stages.size(); ++s) {
      busy += summary(s).busy;
    }
    return utilization_of(busy, static_cast<std::uint32_t>(stages.size()), makespan());
  }
  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& st : stages) {
      n += st.size();
    }
    return n;
  }
};

/// Live memory of one stage after a change at `time`.
struct memory_sample {
  double time = 0.0;
  double live = 0.0;
  friend bool operator==(const memory_sample&, const memory_sample&) = default;
};

namespace detail {

/// Unit steps through the timing engine (docs/model.md §3 with every op one step long and no
/// transfer latency: a rendezvous is one step on both sides). Throws, naming `who`, when the
/// schedule cannot run to the end.
inline timeline unit_step_timeline(const schedule& sched, const char* who) {
  require_traversable(sched, who);
  const traversal_plan plan(sched.layout(), sched.has_comm());
  const std::vector<op_cost> steps(plan.size(), op_cost{1.0, {}});
  timeline out;
  std::vector<std::size_t> sizes(sched.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    sizes[s] = sched.ops(s).size();
  }
  out.stages.reset(sizes);  // every op is written at (stage, index) unless the run stops
  const traversal_result res = timed_traverse(
      sched, plan, steps.data(), [](stage_index, stage_index) { return 1.0; },
      [&](const timed_step& t) { out.stages[t.stage][t.index] = t.record(); });
  if (!res.complete) {
    fail(who, ": the schedule cannot run to the end (", res.witness.describe(), ")");
  }
  return out;
}

}  // namespace detail

/// Unit steps: every op (compute or comm) lasts one step, no transfer latency. The step grid
/// of the PyTorch CSV export and of the plain terminal view.
inline timeline unit_step_timeline(const schedule& sched) {
  return detail::unit_step_timeline(sched, "unit_step_timeline");
}

/// The simulator's per-op times as a timeline, keeping its bubble rate. `r` must come from
/// simulate(sched, ...) with record_ops on; after a deadlock each stage holds the ops that ran
/// (a prefix of its list).
inline timeline to_timeline(const schedule& sched, const simulation_result& r) {
  if (r.ops.size() != sched.stages()) {
    detail::fail("to_timeline: the simulation result has per-op times for ", r.ops.size(),
                 " stages, the schedule has ", sched.stages(),
                 " (simulate the same schedule with record_ops = true)");
  }
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto ops = sched.ops(s);
    if (r.ops[s].size() > ops.size() || (r.completed() && r.ops[s].size() != ops.size())) {
      detail::fail("to_timeline: stage ", s, " has ", r.ops[s].size(),
                   " timed ops, the schedule's list ", ops.size());
    }
  }
  timeline out;
  out.stages = r.ops;
  out.reported_bubble_rate = r.bubble_rate;
  return out;
}

/// Times a schedule with a cost model: simulate(sched, costs) as a timeline. Throws when the
/// schedule cannot run to the end (use simulate() and to_timeline() to draw a partial run).
inline timeline cost_timeline(const schedule& sched, const cost_model& costs = cost_model{}) {
  const simulation_result r = simulate(sched, costs);
  if (r.deadlock) {
    detail::fail("cost_timeline: the schedule cannot run to the end (", r.deadlock->describe(),
                 ")");
  }
  return to_timeline(sched, r);
}

/// Builds a timeline from measured intervals (e.g. a real executor run): one entry per op of
/// `sched`, each naming its stage and list index. Throws when an entry is out of range,
/// disagrees with the schedule's op at that position, has end < start, or an op is missing.
inline timeline timeline_from_measured(const schedule& sched, std::span<const timed_op> measured) {
  timeline out;
  std::vector<std::size_t> sizes(sched.stages());
  std::vector<std::vector<char>> seen(sched.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    sizes[s] = sched.ops(s).size();
    seen[s].assign(sched.ops(s).size(), 0);
  }
  out.stages.reset(sizes);
  for (std::size_t k = 0; k < measured.size(); ++k) {
    const timed_op& t = measured[k];
    if (t.stage >= sched.stages() || t.index >= sched.ops(t.stage).size()) {
      detail::fail("timeline_from_measured: entry ", k, " (stage ", t.stage, ", op ", t.index,
                   ") is outside the schedule");
    }
    if (!(sched.ops(t.stage)[t.index] == t.o)) {
      detail::fail("timeline_from_measured: entry ", k, " (stage ", t.stage, ", op ", t.index,
                   ") is ", to_string(t.o), " but the schedule has ",
                   to_string(sched.ops(t.stage)[t.index]), " there");
    }
    if (!(t.end >= t.start)) {
      detail::fail("timeline_from_measured: entry ", k, " (stage ", t.stage, ", op ", t.index,
                   "): end (", t.end, ") must be >= start (", t.start, ")");
    }
    if (seen[t.stage][t.index] != 0) {
      detail::fail("timeline_from_measured: entry ", k, " (stage ", t.stage, ", op ", t.index,
                   ") is a duplicate");
    }
    seen[t.stage][t.index] = 1;
    out.stages[t.stage][t.index] = t;
  }
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (std::size_t i = 0; i < seen[s].size(); ++i) {
      if (seen[s][i] == 0) {
        detail::fail("timeline_from_measured: no entry for stage ", s, ", op ", i, " (",
                     to_string(sched.ops(s)[i]), ")");
      }
    }
  }
  return out;
}

/// The memory checker's curves as samples over time: static memory at time 0, then the value
/// after each op at that op's end time (same-time values merged, the last one kept). `m` must
/// come from check_memory(sched, model, options, simulation) with record_curve on.
inline std::vector<std::vector<memory_sample>> memory_curves(const memory_report& m) {
  std::vector<std::vector<memory_sample>> out(m.stages.size());
  for (std::size_t s = 0; s < m.stages.size(); ++s) {
    const stage_memory& st = m.stages[s];
    if (st.curve_time.empty() && !st.curve.empty()) {
      detail::fail("memory_curves: stage ", s,
                   " has no times (call check_memory with the simulation result)");
    }
    out[s].push_back({0.0, st.static_memory});
    for (std::size_t i = 0; i < st.curve_time.size() && i < st.curve.size(); ++i) {
      if (out[s].back().time == st.curve_time[i]) {
        out[s].back().live = st.curve[i];
      } else {
        out[s].push_back({st.curve_time[i], st.curve[i]});
      }
    }
  }
  return out;
}

/// Live memory per stage over any timeline (e.g. a measured run): the memory checker's values
/// (docs/model.md §5, receive buffers of lowered schedules included) stamped with the end time
/// of each op in `tl`, one sample per change (first sample at time 0: static memory).
/// `tl` holds the schedule's ops stage by stage in list order (a prefix after a deadlock).
inline std::vector<std::vector<memory_sample>> memory_curves(const schedule& sched,
                                                             const timeline& tl,
                                                             const memory_model& model) {
  if (tl.stages.size() != sched.stages()) {
    detail::fail("memory_curves: the timeline has ", tl.stages.size(), " stages, the schedule has ",
                 sched.stages());
  }
  memory_options o;
  o.record_curve = true;
  const std::vector<std::span<const timed_op>> times = detail::stage_spans(tl.stages);
  return memory_curves(detail::check_memory_impl(sched, model, o, &times));
}

/// What a picture of a report_schedule() result draws: the simulated timeline and the memory
/// checker's curves, both from the report (no second simulation or memory check).
struct report_picture {
  timeline tl;
  std::vector<std::vector<memory_sample>> memory;
};

/// The timeline and memory curves of `rep` (report_schedule(sched, ...)). Throws
/// invalid_argument when the schedule did not run to the end (`who`: the caller, for the
/// message): a picture of the ops that ran would look like the whole schedule.
inline report_picture picture_of(const schedule& sched,
                                 const schedule_report& rep,
                                 std::string_view who = "picture_of") {
  if (rep.not_simulated) {
    detail::fail(who, ": the schedule was not simulated (", *rep.not_simulated, ")");
  }
  if (rep.simulation.deadlock) {
    detail::fail(who, ": the schedule cannot run to the end (", rep.simulation.deadlock->describe(),
                 ")");
  }
  return {to_timeline(sched, rep.simulation), memory_curves(rep.memory)};
}

/// Highest value of a memory curve (0 for an empty one).
inline double peak_of(std::span<const memory_sample> curve) noexcept {
  double peak = 0.0;
  for (const memory_sample& x : curve) {
    peak = std::max(peak, x.live);
  }
  return peak;
}

}  // namespace pipesched
