#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/analysis/memory_checker.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/analysis/timing_simulator.hpp"
#include "pipesched/ir/traversal.hpp"

// The io/ renderers (terminal, SVG, Chrome trace, simulation JSON) draw a `timeline`: every
// op of a schedule with a start and an end. It is deliberately small so that any source of
// times can feed it: the unit-step timing below, the timing simulator (to_timeline), or a
// measured executor run (timeline_from_measured).

namespace pipesched {

/// Per-stage summary of a timeline.
struct stage_summary {
  double span = 0.0;  ///< end of the last op − start of the first op (0 for an empty stage)
  double busy = 0.0;  ///< sum of op durations
  double idle = 0.0;  ///< span − busy
};

/// Every op of a schedule with its interval, by stage and in list order.
struct timeline {
  std::vector<std::vector<timed_op>> stages;  ///< stages[s][i] is op i of stage s
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
  stage_summary summary(stage_index s) const noexcept {
    stage_summary r;
    const auto& st = stages[s];
    if (st.empty()) {
      return r;
    }
    double first = st.front().start;
    double last = st.front().end;
    for (const auto& t : st) {
      first = std::min(first, t.start);
      last = std::max(last, t.end);
      r.busy += t.duration();
    }
    r.span = last - first;
    r.idle = r.span - r.busy;
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
      const stage_summary r = summary(s);
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

/// Times every op of `sched` under the model of docs/model.md §3: an op starts at
/// max(end of the previous op on its stage, end of each producer + latency(from, to) when the
/// producer ran on another stage). `duration(stage, op)` and `latency(from, to)` are callables.
/// SEND/RECV pairs of a lowered schedule start together (a rendezvous); the RECV ends
/// `latency` after its SEND. Throws when the schedule cannot run to the end.
template <class Duration, class Latency>
timeline compute_timeline(const schedule& sched,
                          const char* who,
                          Duration&& duration,
                          Latency&& latency) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const bool lowered = sched.has_comm();
  constexpr std::size_t nev = 5;
  std::vector<double> event_end(std::size_t{pl.total_chunks()} * m * nev, 0.0);
  auto ev = [&](global_chunk g, microbatch_index mb, event_kind e) -> double& {
    return event_end[(std::size_t{g} * m + mb) * nev + static_cast<std::size_t>(e)];
  };
  std::vector<double> free_at(p, 0.0);
  timeline out;
  out.stages.resize(p);
  for (stage_index s = 0; s < p; ++s) {
    out.stages[s].resize(sched.ops(s).size());
  }
  auto ready_time = [&](stage_index s, const op& o) {
    double t = free_at[s];
    if (o.chunk >= pl.chunks() || o.mb >= m) {
      return t;
    }
    for (const requirement& r : requirements_of(pl, s, o, lowered)) {
      t = std::max(t, ev(r.chunk, r.mb, r.what) + (r.remote ? latency(r.stage, s) : 0.0));
    }
    return t;
  };
  auto finish = [&](stage_index s, std::size_t i, const op& o, double start, double end) {
    out.stages[s][i] = timed_op{s, i, o, start, end};
    free_at[s] = end;
    if (o.chunk < pl.chunks() && o.mb < m) {
      const global_chunk g = pl.global(s, o.chunk);
      for (std::size_t e = 0; e < nev; ++e) {
        if ((events_produced(o.kind) & (1u << e)) != 0) {
          ev(g, o.mb, static_cast<event_kind>(e)) = end;
        }
      }
    }
  };
  // traverse() visits the two halves of a rendezvous back to back; the first waits here.
  struct pending_comm {
    stage_index s;
    std::size_t i;
    op o;
    double ready;
  };
  std::optional<pending_comm> pending;
  const traversal_result res = traverse(sched, [&](stage_index s, std::size_t i, const op& o) {
    const double ready = ready_time(s, o);
    const bool paired =
        is_comm(o.kind) && o.chunk < pl.chunks() && o.mb < m && comm_partner(pl, s, o).has_value();
    if (!paired) {
      finish(s, i, o, ready, ready + duration(s, o));
      return;
    }
    if (!pending) {
      pending = pending_comm{s, i, o, ready};
      return;
    }
    const pending_comm a = *pending;
    pending.reset();
    const double start = std::max(a.ready, ready);
    auto end_of = [&](stage_index st, const op& x, stage_index peer) {
      const bool recv = x.kind == op_kind::recv_forward || x.kind == op_kind::recv_backward;
      return start + duration(st, x) + (recv ? latency(peer, st) : 0.0);
    };
    finish(a.s, a.i, a.o, start, end_of(a.s, a.o, s));
    finish(s, i, o, start, end_of(s, o, a.s));
  });
  if (!res.complete) {
    fail(who, ": the schedule cannot run to the end (", res.witness.describe(), ")");
  }
  return out;
}

}  // namespace detail

/// Unit steps: every op (compute or comm) lasts one step, no transfer latency. The step grid
/// of the PyTorch CSV export and of the plain terminal view.
inline timeline unit_step_timeline(const schedule& sched) {
  return detail::compute_timeline(
      sched, "unit_step_timeline", [](stage_index, const op&) { return 1.0; },
      [](stage_index, stage_index) { return 0.0; });
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
  timeline out;
  out.stages.resize(sched.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto ops = sched.ops(s);
    if (r.ops[s].size() > ops.size() || (r.completed() && r.ops[s].size() != ops.size())) {
      detail::fail("to_timeline: stage ", s, " has ", r.ops[s].size(),
                   " timed ops, the schedule's list ", ops.size());
    }
    out.stages[s].reserve(r.ops[s].size());
    for (std::size_t i = 0; i < r.ops[s].size(); ++i) {
      out.stages[s].push_back({s, i, ops[i], r.ops[s][i].start, r.ops[s][i].end});
    }
  }
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
  out.stages.resize(sched.stages());
  std::vector<std::vector<char>> seen(sched.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    out.stages[s].resize(sched.ops(s).size());
    seen[s].assign(sched.ops(s).size(), 0);
  }
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

/// Live activation memory per stage over any timeline (e.g. a measured run), without the
/// memory checker (docs/model.md §5): F allocates M_B when it starts; B frees M_B − M_W, W frees
/// M_W and BW frees M_B when they end; static memory is the base line. Samples are sorted by
/// time, one per change (first sample at time 0). Receive buffers of lowered schedules are not
/// counted; use check_memory() and memory_curves(const memory_report&) for those.
inline std::vector<std::vector<memory_sample>> memory_curves(const schedule& sched,
                                                             const timeline& tl,
                                                             const memory_model& model) {
  const memory_model mem = model.for_shape(sched.stages(), sched.chunks(), "memory_curves");
  std::vector<std::vector<memory_sample>> out(tl.stages.size());
  for (stage_index s = 0; s < tl.stages.size(); ++s) {
    std::vector<memory_sample> deltas;
    for (const timed_op& t : tl.stages[s]) {
      if (t.o.chunk >= sched.chunks()) {
        continue;
      }
      const chunk_memory& c = mem.at(s, t.o.chunk);
      switch (t.o.kind) {
        case op_kind::forward:
          deltas.push_back({t.start, c.activation});
          break;
        case op_kind::backward_input:
          deltas.push_back({t.end, -(c.activation - c.weight_grad_input)});
          break;
        case op_kind::backward_weight:
          deltas.push_back({t.end, -c.weight_grad_input});
          break;
        case op_kind::backward_full:
          deltas.push_back({t.end, -c.activation});
          break;
        default:
          break;
      }
    }
    // Frees before allocations at the same instant: a stage reuses memory it just released.
    std::stable_sort(
        deltas.begin(), deltas.end(), [](const memory_sample& a, const memory_sample& b) {
          return a.time < b.time || (a.time == b.time && a.live < 0.0 && b.live >= 0.0);
        });
    double live = mem.static_memory(s);
    out[s].push_back({0.0, live});
    for (const memory_sample& d : deltas) {
      live += d.live;
      if (out[s].back().time == d.time) {
        out[s].back().live = live;
      } else {
        out[s].push_back({d.time, live});
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

/// Highest value of a memory curve (0 for an empty one).
inline double peak_of(std::span<const memory_sample> curve) noexcept {
  double peak = 0.0;
  for (const memory_sample& x : curve) {
    peak = std::max(peak, x.live);
  }
  return peak;
}

}  // namespace pipesched
