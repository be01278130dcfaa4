#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/detail/key_table.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/ir/traversal.hpp"

namespace pipesched {

/// When one op ran: simulated start and end time (end − start is its duration).
struct op_timing {
  double start = 0.0;
  double end = 0.0;

  friend bool operator==(const op_timing&, const op_timing&) = default;
};

/// An op by position: stage and index in that stage's list.
struct op_location {
  stage_index stage = 0;
  std::size_t op_index = 0;

  friend bool operator==(const op_location&, const op_location&) = default;
};

/// Timing statistics of one stage.
struct stage_timing {
  double first_start = 0.0;    ///< start of the stage's first op (0 when it ran none)
  double last_end = 0.0;       ///< end of its last op
  double span = 0.0;           ///< last_end − first_start
  double busy = 0.0;           ///< sum of compute (F, B, W, BW) durations
  double comm = 0.0;           ///< time spent inside SEND/RECV rendezvous (lowered schedules)
  double idle = 0.0;           ///< span − busy (includes `comm`)
  double idle_fraction = 0.0;  ///< idle / span; 0 when span is 0
  /// makespan − busy: idle time over the whole iteration (0 to makespan). For 1F1B / ZB-H1 /
  /// ZB-H2 with T_comm = 0 this is the closed-form bubble on every stage, while `idle` shrinks
  /// towards the last stage (stage i, 1-based, starts i−1 forwards late and ends early).
  double makespan_idle = 0.0;
  std::size_t ops_run = 0;  ///< ops simulated (the whole list unless deadlocked)
};

struct simulate_options {
  /// Keep every op's start and end (16 bytes per op). Switch off for huge schedules: the
  /// statistics, makespan, bubble rate and critical path are still computed.
  bool record_ops = true;
  /// Compute the critical path (costs one byte per op during the run).
  bool critical_path = true;
};

/// The outcome of simulate().
struct simulation_result {
  /// ops[s][i]: timing of op i of stage s; empty when record_ops is off. When the schedule
  /// deadlocks, ops[s] holds only the ops that ran (a prefix of the stage's list).
  std::vector<std::vector<op_timing>> ops;
  std::vector<stage_timing> stages;  ///< one per stage
  double makespan = 0.0;             ///< time 0 to the last end over all stages
  /// (S − B) / S: S the largest stage span, B the largest stage busy time (bubble_rate_of(),
  /// analysis/metrics.hpp); the paper's bubble rate when the stages carry equal work.
  double bubble_rate = 0.0;
  /// Σ busy / (p · makespan) (utilization_of(), analysis/metrics.hpp): the same meaning for any costs.
  double utilization = 0.0;
  stage_index max_span_stage = 0;  ///< the stage whose span is S
  /// The chain of ops that sets the makespan, in time order: it starts at an op that waited
  /// for nothing and ends at the last-ending op; each op started exactly when its predecessor
  /// in the chain (previous op on the stage, producer + T_comm, or rendezvous partner) allowed.
  /// Empty when deadlocked, when the schedule is empty or when critical_path is off.
  std::vector<op_location> critical_path;
  /// Set when the schedule cannot run to the end (the witness traverse() gives).
  std::optional<deadlock_witness> deadlock;

  bool completed() const noexcept { return !deadlock.has_value(); }
  std::size_t stage_count() const noexcept { return stages.size(); }
  double span(stage_index s) const { return stages.at(s).span; }
  double busy(stage_index s) const { return stages.at(s).busy; }
  double idle(stage_index s) const { return stages.at(s).idle; }
  /// Largest idle time over all stages.
  double max_idle() const noexcept {
    double v = 0.0;
    for (const auto& st : stages) {
      v = std::max(v, st.idle);
    }
    return v;
  }
};

namespace detail {

/// Why an op started when it did; used to walk the critical path back.
enum class start_reason : std::uint8_t {
  none,          ///< waited for nothing (time 0, or the stage's first op with no inputs)
  previous,      ///< the previous op on the same stage
  requirement0,  ///< requirements_of(...)[0] (+ T_comm when remote)
  requirement1,  ///< requirements_of(...)[1]
  partner,       ///< the rendezvous partner was ready later
};

/// Storage slot of an event: B's two events share one slot (they happen together, and BW
/// only produces the first), so non-lowered schedules need two doubles per (chunk, mb).
constexpr std::size_t event_slot(event_kind e) noexcept {
  switch (e) {
    case event_kind::forward_done:
      return 0;
    case event_kind::input_grad_done:
    case event_kind::backward_input_done:
      return 1;
    case event_kind::received_forward:
      return 2;
    case event_kind::received_backward:
      return 3;
  }
  return 0;
}

/// True when op `o` produces the event `e` (used to find a producer when walking back).
constexpr bool produces(op_kind k, event_kind e) noexcept {
  return (events_produced(k) & event_bit(e)) != 0;
}

}  // namespace detail

/// Simulates `sched` under `costs` (docs/model.md §3): each stage runs its list in order; an op
/// starts at max(end of the previous op on its stage, end of each producer + T_comm when the
/// producer ran on another stage). In a lowered schedule (SEND/RECV ops) a SEND and its RECV
/// form a blocking rendezvous: both start at the later of the two sides' ready times and both
/// end T_comm(sender, receiver) later; compute ops then wait only for the local RECV.
/// SEND/RECV ops without a peer and ops with out-of-range indices take no time.
///
/// Costs are read for the schedule's shape (cost_model::for_shape: per-stage costs split over
/// its v chunks; tables of another shape throw invalid_argument). Times that overflow to
/// infinity throw invalid_argument rather than return numbers that are not finite.
///
/// Never hangs: a schedule that cannot complete returns with `deadlock` set. Linear time;
/// memory 2 doubles per (global chunk, micro-batch) (4 when lowered), plus 16 bytes per op with
/// record_ops and 1 byte per op with critical_path.
inline simulation_result simulate(const schedule& sched,
                                  const cost_model& model = {},
                                  const simulate_options& options = {}) {
  const placement& pl = sched.layout();
  const cost_model costs = model.for_shape(sched.stages(), pl.chunks(), "simulate");
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const bool lowered = sched.has_comm();
  const std::size_t nslots = lowered ? 4 : 2;

  simulation_result result;
  result.stages.resize(p);
  if (options.record_ops) {
    result.ops.resize(p);
    for (stage_index s = 0; s < p; ++s) {
      result.ops[s].reserve(sched.ops(s).size());
    }
  }

  // Requirements per (stage, chunk, kind), and next to them the op's duration and each
  // requirement's transfer latency, so the per-op work is table lookups.
  detail::require_traversable(sched, "simulate");  // refused, not allocated
  const detail::traversal_plan plan(pl, lowered);
  const detail::op_plan* const plan_base = plan.data();
  struct op_cost {
    double duration = 0.0;
    std::array<double, 2> latency{};  // T_comm added to requirement k (0 when local)
  };
  std::vector<op_cost> cost_table(plan.size());
  for (stage_index s = 0; s < p; ++s) {
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      for (op_kind k : all_op_kinds) {
        const op o = make_op(k, 0, c);
        const detail::op_plan& e = plan.at(s, o);
        op_cost& oc = cost_table[plan.index(s, o)];
        oc.duration = is_compute(k) ? costs.duration(s, k, c) : 0.0;
        for (std::uint8_t j = 0; j < e.count; ++j) {
          oc.latency[j] = e.deps[j].remote ? costs.comm(e.deps[j].stage, s) : 0.0;
        }
      }
    }
  }

  // Chunk major: a stage walks its own chunk's row (and its neighbours') in micro-batch order,
  // so each stage streams through a few rows instead of jumping a row per op.
  // One table per event slot, micro-batch major (see detail::event_index): each value is read
  // shortly after it is written, and a sweep over the stages stays within a few pages.
  const std::size_t row = pl.total_chunks();
  const std::size_t table_size = std::size_t{m} * row;

  std::vector<double> event_end(table_size * nslots, 0.0);
  double* const ev = event_end.data();
  auto slot_index = [&](global_chunk g, microbatch_index mb, std::size_t slot) {
    return slot * table_size + std::size_t{mb} * row + g;
  };

  // Start reasons of all ops. Stages advance together, so blocks of 64 ops of every stage are
  // laid side by side: the writes of one sweep over the stages then stay within a few memory
  // pages rather than one page per stage. A very unbalanced schedule (where that layout would
  // more than double the table) keeps one run per stage instead.
  std::vector<detail::start_reason> reason;
  std::size_t total_ops = 0;
  std::size_t longest = 0;
  std::vector<std::size_t> offset(std::size_t{p} + 1, 0);
  for (stage_index s = 0; s < p; ++s) {
    const std::size_t n = sched.ops(s).size();
    offset[s + 1] = offset[s] + n;
    total_ops += n;
    longest = std::max(longest, n);
  }
  constexpr std::size_t block = 64;
  const std::size_t blocks = (longest + block - 1) / block;
  const bool interleaved = blocks * block * p <= 2 * total_ops + block * p;
  auto reason_at = [&](stage_index s, std::size_t i) {
    return interleaved ? ((i / block) * p + s) * block + i % block : offset[s] + i;
  };
  if (options.critical_path) {
    reason.assign(interleaved ? blocks * block * p : total_ops, detail::start_reason::none);
  }

  std::vector<double> stage_end(p, 0.0);
  double last_end = -1.0;
  op_location last_op{};

  // Ready time of op `o` at stage s: the previous op's end and every input's arrival.
  auto ready_time = [&](stage_index s, std::size_t i, const op& o, const detail::op_plan& e,
                        detail::start_reason& why) {
    double t = stage_end[s];
    why = i == 0 ? detail::start_reason::none : detail::start_reason::previous;
    const op_cost& oc = cost_table[static_cast<std::size_t>(&e - plan_base)];
    for (std::uint8_t k = 0; k < e.count; ++k) {
      // A same-stage producer ran earlier on this stage and ended by stage_end[s]: it can't
      // delay the op, and skipping it keeps old rows out of the cache.
      if (!e.deps[k].remote) {
        continue;
      }
      const double arrival =
          ev[slot_index(e.deps[k].chunk, o.mb, detail::event_slot(e.deps[k].what))] + oc.latency[k];
      if (arrival > t) {
        t = arrival;
        why = k == 0 ? detail::start_reason::requirement0 : detail::start_reason::requirement1;
      }
    }
    return t;
  };

  auto finish = [&](stage_index s, std::size_t i, const op& o, const detail::op_plan* e,
                    double start, double end, detail::start_reason why) {
    stage_timing& st = result.stages[s];
    if (i == 0) {
      st.first_start = start;
    }
    if (is_compute(o.kind)) {
      st.busy += end - start;
    } else {
      st.comm += end - start;
    }
    st.ops_run = i + 1;
    stage_end[s] = end;
    if (options.record_ops) {
      auto& v = result.ops[s];
      if (v.size() == i) {
        v.push_back(op_timing{start, end});
      } else {
        if (v.size() < i) {
          v.resize(i + 1);
        }
        v[i] = op_timing{start, end};
      }
    }
    if (options.critical_path) {
      reason[reason_at(s, i)] = why;
    }
    if (end > last_end) {
      last_end = end;
      last_op = op_location{s, i};
    }
    if (e != nullptr) {
      switch (o.kind) {
        case op_kind::forward:
          ev[slot_index(e->own, o.mb, 0)] = end;
          break;
        case op_kind::backward_input:  // also backward_input_done: same slot
        case op_kind::backward_full:
          ev[slot_index(e->own, o.mb, 1)] = end;
          break;
        case op_kind::recv_forward:
          ev[slot_index(e->own, o.mb, 2)] = end;
          break;
        case op_kind::recv_backward:
          ev[slot_index(e->own, o.mb, 3)] = end;
          break;
        default:
          break;
      }
    }
  };

  // traverse() visits the two sides of a rendezvous back to back; the first one waits here.
  struct pending_side {
    bool active = false;
    stage_index stage = 0;
    std::size_t index = 0;
    op o{};
    const detail::op_plan* e = nullptr;
    double ready = 0.0;
    detail::start_reason why = detail::start_reason::none;
  } pending;

  traversal_result tr = detail::traverse_planned(
      sched, plan, [&](stage_index s, std::size_t i, const op& o, const detail::op_plan* e) {
        if (e == nullptr) {  // out of range: takes no time
          finish(s, i, o, e, stage_end[s], stage_end[s],
                 i == 0 ? detail::start_reason::none : detail::start_reason::previous);
          return;
        }
        if (is_comm(o.kind)) {
          const auto partner = comm_partner(pl, s, o);
          if (!partner) {
            finish(s, i, o, e, stage_end[s], stage_end[s],
                   i == 0 ? detail::start_reason::none : detail::start_reason::previous);
            return;
          }
          detail::start_reason why{};
          const double ready = ready_time(s, i, o, *e, why);
          if (!pending.active) {
            pending = pending_side{true, s, i, o, e, ready, why};
            if (options.record_ops && result.ops[s].size() <= i) {
              result.ops[s].resize(i + 1);  // filled when the partner arrives
            }
            return;
          }
          PIPESCHED_ASSERT(partner->stage == pending.stage && partner->o == pending.o,
                           "simulate: rendezvous sides must be visited back to back");
          pending.active = false;
          const double start = std::max(ready, pending.ready);
          const bool i_send = o.kind == op_kind::send_forward || o.kind == op_kind::send_backward;
          const double end =
              start + (i_send ? costs.comm(s, pending.stage) : costs.comm(pending.stage, s));
          // Each side's start is set by its own inputs unless the other side was ready later.
          const detail::start_reason why_pending =
              pending.ready >= ready ? pending.why : detail::start_reason::partner;
          const detail::start_reason why_this =
              ready >= pending.ready ? why : detail::start_reason::partner;
          finish(pending.stage, pending.index, pending.o, pending.e, start, end, why_pending);
          finish(s, i, o, e, start, end, why_this);
          return;
        }
        detail::start_reason why{};
        const double start = ready_time(s, i, o, *e, why);
        finish(s, i, o, e, start,
               start + cost_table[static_cast<std::size_t>(e - plan_base)].duration, why);
      });

  double max_span = -1.0;
  double max_busy = 0.0;
  double total_busy = 0.0;
  for (stage_index s = 0; s < p; ++s) {
    stage_timing& st = result.stages[s];
    st.last_end = stage_end[s];
    st.span = st.ops_run == 0 ? 0.0 : st.last_end - st.first_start;
    st.idle = st.span - st.busy;
    st.idle_fraction = st.span > 0.0 ? st.idle / st.span : 0.0;
    result.makespan = std::max(result.makespan, st.last_end);
    if (st.span > max_span) {
      max_span = st.span;
      result.max_span_stage = s;
    }
    max_busy = std::max(max_busy, st.busy);
    total_busy += st.busy;
  }
  if (!std::isfinite(result.makespan) || !std::isfinite(total_busy)) {
    detail::fail("simulate: the makespan (", result.makespan,
                 ") is not a finite number: the costs are too large to add up");
  }
  for (stage_timing& st : result.stages) {
    st.makespan_idle = result.makespan - st.busy;
  }
  result.bubble_rate = bubble_rate_of(max_span, max_busy);
  result.utilization = utilization_of(total_busy, p, result.makespan);

  if (!tr.complete) {
    result.deadlock = std::move(tr.witness);
    return result;
  }
  if (!options.critical_path || last_end < 0.0) {
    return result;
  }

  // Walk back from the last-ending op. Along the chain, the ops met on one stage appear in
  // decreasing list order (each is a causal predecessor of the previous), so a per-stage
  // cursor that only moves down finds every producer: linear overall.
  std::vector<std::size_t> cursor(p);
  for (stage_index s = 0; s < p; ++s) {
    cursor[s] = sched.ops(s).size();
  }
  auto find_back = [&](stage_index t, auto&& match) -> std::optional<std::size_t> {
    const auto ops = sched.ops(t);
    for (std::size_t j = cursor[t]; j-- > 0;) {
      if (match(ops[j])) {
        return j;
      }
    }
    return std::nullopt;
  };
  std::vector<op_location> chain;
  op_location cur = last_op;
  for (;;) {
    chain.push_back(cur);
    cursor[cur.stage] = cur.op_index;
    const op& o = sched.ops(cur.stage)[cur.op_index];
    const detail::start_reason why = reason[reason_at(cur.stage, cur.op_index)];
    std::optional<op_location> next;
    switch (why) {
      case detail::start_reason::none:
        break;
      case detail::start_reason::previous:
        next = op_location{cur.stage, cur.op_index - 1};
        break;
      case detail::start_reason::requirement0:
      case detail::start_reason::requirement1: {
        const auto reqs = requirements_of(pl, cur.stage, o, lowered);
        const requirement& r = reqs.items[why == detail::start_reason::requirement0 ? 0 : 1];
        const chunk_index lc = pl.local_of(r.chunk);
        const auto j = find_back(r.stage, [&](const op& x) {
          return x.chunk == lc && x.mb == r.mb && detail::produces(x.kind, r.what);
        });
        if (j) {
          next = op_location{r.stage, *j};
        }
        break;
      }
      case detail::start_reason::partner: {
        const auto partner = comm_partner(pl, cur.stage, o);
        if (partner) {
          const auto j = find_back(partner->stage, [&](const op& x) { return x == partner->o; });
          if (j) {
            next = op_location{partner->stage, *j};
          }
        }
        break;
      }
    }
    if (!next) {
      break;
    }
    cur = *next;
  }
  result.critical_path.assign(chain.rbegin(), chain.rend());
  return result;
}

}  // namespace pipesched
