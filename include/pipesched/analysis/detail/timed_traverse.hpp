#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"

// The timing engine: the one place where the rule of docs/model.md §3 (when an op starts and
// ends) is written. simulate(), the unit-step timeline, the zero-bubble search's order timing
// and communication lowering's ranking all time ops through timed_traverse().

namespace pipesched::detail {

/// Why an op started when it did; the critical path walks these back.
enum class start_reason : std::uint8_t {
  none,          ///< waited for nothing (time 0, or the stage's first op with no inputs)
  previous,      ///< the previous op on the same stage
  requirement0,  ///< requirements_of(...)[0] (+ T_comm when remote)
  requirement1,  ///< requirements_of(...)[1]
  partner,       ///< the rendezvous partner was ready later
};

/// Duration of one (stage, local chunk, kind) and the latency added to each of its
/// requirements (T_comm when the producer is on another stage), by traversal_plan index.
struct op_cost {
  double duration = 0.0;
  std::array<double, 2> latency{};
};

/// The per-plan-entry costs of a bound cost model (cost_model::for_shape): compute ops take
/// their duration, SEND / RECV none here (a rendezvous lasts T_comm(sender, receiver)).
inline std::vector<op_cost> cost_table(const traversal_plan& plan,
                                       const placement& pl,
                                       const cost_model& costs) {
  std::vector<op_cost> table(plan.size());
  for (stage_index s = 0; s < pl.stages(); ++s) {
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      for (op_kind k : all_op_kinds) {
        const op o = make_op(k, 0, c);
        const op_plan& e = plan.at(s, o);
        op_cost& oc = table[plan.index(s, o)];
        oc.duration = is_compute(k) ? costs.duration(s, k, c) : 0.0;
        for (std::uint8_t j = 0; j < e.count; ++j) {
          oc.latency[j] = e.deps[j].remote ? costs.comm(e.deps[j].stage, s) : 0.0;
        }
      }
    }
  }
  return table;
}

/// Storage slot of an event: B's two events share one slot (they happen together, and BW
/// only produces the first), so compute-only schedules need two doubles per (chunk, mb).
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

/// One timed op, as timed_traverse hands it to its visitor.
struct timed_step {
  stage_index stage = 0;
  std::size_t index = 0;  ///< position in the stage's list
  op o{};
  const op_plan* plan = nullptr;  ///< nullptr for an op with an out-of-range chunk or mb
  double start = 0.0;
  double end = 0.0;
  start_reason why = start_reason::none;
};

/// Times every op of `sched` (a schedule or an op_lists) in the dependency order of
/// traverse_planned, under docs/model.md §3:
/// - a compute op starts at max(end of the previous op on its stage, end of each producer on
///   another stage + its latency) and lasts costs[plan index].duration;
/// - a SEND and its RECV form a blocking rendezvous: both start at the later of the two sides'
///   ready times and both end rendezvous(sender stage, receiver stage) later;
/// - a SEND / RECV without a peer and an op out of range take no time.
/// Calls `visit(const timed_step&)` once per op, in traversal order (the two sides of a
/// rendezvous back to back, sender's stage order as traverse gives it). Linear in the ops;
/// 2 doubles per (global chunk, micro-batch), 4 when lowered.
template <class Sched, class Rendezvous, class Visitor>
traversal_result timed_traverse(const Sched& sched,
                                const traversal_plan& plan,
                                const op_cost* costs,
                                Rendezvous&& rendezvous,
                                Visitor&& visit) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const std::size_t nslots = plan.lowered() ? 4 : 2;
  const op_plan* const plan_base = plan.data();

  // One table per event slot, micro-batch major (see event_index): each value is read
  // shortly after it is written, and a sweep over the stages stays within a few pages.
  const std::size_t row = pl.total_chunks();
  const std::size_t table_size = std::size_t{m} * row;
  std::vector<double> event_end(table_size * nslots, 0.0);
  double* const ev = event_end.data();
  auto slot_index = [&](global_chunk g, microbatch_index mb, std::size_t slot) {
    return slot * table_size + std::size_t{mb} * row + g;
  };
  std::vector<double> stage_end(p, 0.0);

  auto ready_time = [&](stage_index s, std::size_t i, const op& o, const op_plan& e,
                        start_reason& why) {
    double t = stage_end[s];
    why = i == 0 ? start_reason::none : start_reason::previous;
    const op_cost& oc = costs[static_cast<std::size_t>(&e - plan_base)];
    for (std::uint8_t k = 0; k < e.count; ++k) {
      // A same-stage producer ran earlier on this stage and ended by stage_end[s]: it can't
      // delay the op, and skipping it keeps old rows out of the cache.
      if (!e.deps[k].remote) {
        continue;
      }
      const double arrival =
          ev[slot_index(e.deps[k].chunk, o.mb, event_slot(e.deps[k].what))] + oc.latency[k];
      if (arrival > t) {
        t = arrival;
        why = k == 0 ? start_reason::requirement0 : start_reason::requirement1;
      }
    }
    return t;
  };
  auto finish = [&](const timed_step& st) {
    stage_end[st.stage] = st.end;
    if (st.plan != nullptr) {
      switch (st.o.kind) {
        case op_kind::forward:
          ev[slot_index(st.plan->own, st.o.mb, 0)] = st.end;
          break;
        case op_kind::backward_input:  // also backward_input_done: same slot
        case op_kind::backward_full:
          ev[slot_index(st.plan->own, st.o.mb, 1)] = st.end;
          break;
        case op_kind::recv_forward:
          ev[slot_index(st.plan->own, st.o.mb, 2)] = st.end;
          break;
        case op_kind::recv_backward:
          ev[slot_index(st.plan->own, st.o.mb, 3)] = st.end;
          break;
        default:
          break;
      }
    }
    visit(st);
  };
  auto no_time = [&](stage_index s, std::size_t i, const op& o, const op_plan* e) {
    const double t = stage_end[s];
    finish(timed_step{s, i, o, e, t, t, i == 0 ? start_reason::none : start_reason::previous});
  };

  // traverse visits the two sides of a rendezvous back to back; the first one waits here.
  bool pending = false;
  timed_step first{};

  return traverse_planned(
      sched, plan, [&](stage_index s, std::size_t i, const op& o, const op_plan* e) {
        if (e == nullptr) {
          no_time(s, i, o, e);
          return;
        }
        if (is_comm(o.kind)) {
          const auto partner = comm_partner(pl, s, o);
          if (!partner) {
            no_time(s, i, o, e);
            return;
          }
          start_reason why{};
          const double ready = ready_time(s, i, o, *e, why);
          if (!pending) {
            pending = true;
            first = timed_step{s, i, o, e, ready, ready, why};
            return;
          }
          PIPESCHED_ASSERT(partner->stage == first.stage && partner->o == first.o,
                           "timed_traverse: rendezvous sides must be visited back to back");
          pending = false;
          const double start = std::max(ready, first.start);
          const bool i_send = o.kind == op_kind::send_forward || o.kind == op_kind::send_backward;
          const double end =
              start + (i_send ? rendezvous(s, first.stage) : rendezvous(first.stage, s));
          // Each side's start is set by its own inputs unless the other side was ready later.
          const start_reason why_first = first.start >= ready ? first.why : start_reason::partner;
          const start_reason why_this = ready >= first.start ? why : start_reason::partner;
          first.start = start;
          first.end = end;
          first.why = why_first;
          finish(first);
          finish(timed_step{s, i, o, e, start, end, why_this});
          return;
        }
        start_reason why{};
        const double start = ready_time(s, i, o, *e, why);
        finish(timed_step{s, i, o, e, start,
                          start + costs[static_cast<std::size_t>(e - plan_base)].duration, why});
      });
}

}  // namespace pipesched::detail
