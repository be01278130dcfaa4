#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"

// The timing engine: the one place where the rule of docs/model.md §3 (when an op starts and
// ends) is written. simulate(), the unit-step timeline, the zero-bubble search's order timing
// and communication lowering's ranking all time ops through timed_traverse().

// The engine's per-op lambdas run once per op in the hottest loop of the library; GCC does
// not inline them into the traversal on its own (measured: simulate 30-40 % slower).
// PIPESCHED_HOT_INLINE: the same for the engine's per-op member functions.
#if defined(__GNUC__)
#define PIPESCHED_HOT_LAMBDA __attribute__((always_inline))
#define PIPESCHED_HOT_INLINE __attribute__((always_inline))
#else
#define PIPESCHED_HOT_LAMBDA
#define PIPESCHED_HOT_INLINE
#endif

namespace pipesched::detail {

/// Why an op started when it did; the critical path walks these back.
enum class start_reason : std::uint8_t {
  none,          ///< waited for nothing (time 0, or the stage's first op with no inputs)
  previous,      ///< the previous op on the same stage
  requirement0,  ///< requirements_of(...)[0] (+ T_comm when remote)
  requirement1,  ///< requirements_of(...)[1]
  partner,       ///< the rendezvous partner was ready later
  /// First op of an overlapped pair (docs/model.md §3): the second op's inputs came later.
  overlap_next,
  /// Second op of an overlapped pair: the first op (its inputs or its stage) was ready later.
  overlap_previous,
};

/// Duration of one (stage, local chunk, kind) and the latency added to each of its
/// requirements (T_comm when the producer is on another stage), by traversal_plan index.
struct op_cost {
  double duration = 0.0;
  std::array<double, 2> latency{};
  /// F entries: T_F + T_B − T_FB of its (stage, chunk) (cost_model::overlap_gain), what an
  /// overlapped pair with this F lasts less than its two ops added; 0: no gain.
  double overlap_gain = 0.0;
};

/// The per-plan-entry costs of a bound cost model (cost_model::for_shape): compute ops take
/// their duration, SEND / RECV none here (a rendezvous lasts T_comm(sender, receiver)).
inline std::vector<op_cost> cost_table(const traversal_plan& plan,
                                       const placement& pl,
                                       const shaped_cost_model& costs) {
  std::vector<op_cost> table(plan.size());
  for (stage_index s = 0; s < pl.stages(); ++s) {
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      for (op_kind k : all_op_kinds) {
        const op o = make_op(k, 0, c);
        const op_plan& e = plan.at(s, o);
        op_cost& oc = table[plan.index(s, o)];
        oc.duration = is_compute(k) ? costs.duration(s, k, c) : 0.0;
        oc.overlap_gain = k == op_kind::forward ? costs.overlap_gain(s, c) : 0.0;
        for (std::uint8_t j = 0; j < e.count; ++j) {
          oc.latency[j] = e.deps[j].remote ? costs.comm(e.deps[j].stage, s) : 0.0;
        }
      }
    }
  }
  return table;
}

/// The per-(plan index, micro-batch) costs of a cost model with per-micro-batch factors
/// (cost_model::at(s, c, mb), docs/model.md §3.1), as timed_traverse takes them: the latencies
/// of the plain table (T_comm is not scaled), the duration and overlap gain of the micro-batch's
/// scaled costs (cost_model::scaled, the one rule). Owns its tables; view() is the cheap
/// copyable callable for the engine. Computed per op as it is asked for: no table per
/// micro-batch.
class microbatch_costs {
 public:
  /// `costs` read for the shape (for_shape).
  microbatch_costs(const traversal_plan& plan, const placement& pl, const shaped_cost_model& costs)
      : base_(cost_table(plan, pl, costs)),
        chunk_(std::size_t{pl.stages()} * pl.chunks()),
        factors_(costs.microbatch_factors()),
        chunks_(pl.chunks()) {
    for (stage_index s = 0; s < pl.stages(); ++s) {
      for (chunk_index c = 0; c < pl.chunks(); ++c) {
        chunk_[std::size_t{s} * pl.chunks() + c] = costs.at(s, c);
      }
    }
  }

  /// Costs of plan entry i (index (s·v + c)·op_kind_count + kind) for micro-batch mb.
  op_cost operator()(std::size_t i, microbatch_index mb) const noexcept {
    return at(base_.data(), chunk_.data(), &factors_, chunks_, i, mb);
  }
  /// What timed_traverse takes: a cheap copyable view of this object's tables (valid while
  /// the object lives).
  auto view() const noexcept {
    return [base = base_.data(), chunk = chunk_.data(), factors = &factors_, v = chunks_](
               std::size_t i, microbatch_index mb)
               PIPESCHED_HOT_LAMBDA { return at(base, chunk, factors, v, i, mb); };
  }

 private:
  static op_cost at(const op_cost* base,
                    const op_costs* chunk,
                    const microbatch_table<cost_factors>* factors,
                    std::uint32_t v,
                    std::size_t i,
                    microbatch_index mb) noexcept {
    op_cost oc = base[i];
    const std::size_t sc = i / op_kind_count;
    const auto k = static_cast<op_kind>(i % op_kind_count);
    if (!is_compute(k)) {
      return oc;
    }
    const auto s = static_cast<stage_index>(sc / v);
    const auto c = static_cast<chunk_index>(sc % v);
    const op_costs t = cost_model::scaled(chunk[sc], factors->at(s, c, mb));
    oc.duration = cost_model::duration_of(t, k);
    oc.overlap_gain = k == op_kind::forward ? cost_model::overlap_gain_of(t) : 0.0;
    return oc;
  }

  std::vector<op_cost> base_;
  std::vector<op_costs> chunk_;
  microbatch_table<cost_factors> factors_;
  std::uint32_t chunks_ = 1;
};

/// Calls f(costs_arg) with what timed_traverse takes as `costs` for `costs` (read for the
/// shape): the plain table's pointer, or, with per-micro-batch factors, a microbatch_costs view
/// (valid during the call). The one place that picks: simulate, communication lowering, the
/// search's order timing and recomputation's gap search go through it. Returns f's result.
template <class F>
auto with_op_costs(const traversal_plan& plan,
                   const placement& pl,
                   const shaped_cost_model& costs,
                   F&& f) {
  if (costs.has_microbatch_factors()) {
    const microbatch_costs per_mb(plan, pl, costs);
    return f(per_mb.view());
  }
  const std::vector<op_cost> table = cost_table(plan, pl, costs);
  return f(table.data());
}

/// Storage slot of an event: B's two events share one slot (they happen together, and BW
/// only produces the first), so compute-only schedules need two doubles per (chunk, mb).
constexpr std::size_t event_slot(event_kind e) noexcept {
  switch (e) {
    case event_kind::forward_done:
    // Only the op's own backward waits for it, on the same stage: never read as an arrival.
    case event_kind::activations_ready:
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
  /// The second op of an overlapped pair: it runs in the slot of the op before it (same start
  /// and end), so a sum of durations counts that slot once by skipping this op.
  bool shares_slot = false;

  /// The record of this op (timed_traverse's callers passed require_traversable, so the
  /// index fits timed_op's 32 bits).
  timed_op record() const noexcept {
    return timed_op{stage, static_cast<std::uint32_t>(index), o, start, end};
  }
};

/// True when ops[i] and ops[i+1] of a stage with v chunks and m micro-batches form a pair the
/// timing engine runs as one slot: ops[i] is marked (overlaps_next), both are compute ops in
/// range. Marks on ops that don't qualify are ignored here (the validator reports them); in a
/// chain the mark of a pair's second op is ignored.
inline bool pair_candidate(
    const op* ops, std::size_t n, std::size_t i, std::uint32_t v, std::uint32_t m) noexcept {
  auto in_range_compute = [&](const op& o) {
    return is_compute(o.kind) && o.chunk < v && o.mb < m;
  };
  return i + 1 < n && overlaps_next(ops[i]) && in_range_compute(ops[i]) &&
         in_range_compute(ops[i + 1]);
}

/// True when an overlapped pair of a and b gains its F's overlap_gain: an F with an op that
/// produces an input gradient (docs/model.md §3).
constexpr bool pair_gains(const op& a, const op& b) noexcept {
  return (a.kind == op_kind::forward) != (b.kind == op_kind::forward) &&
         (produces_input_grad(a.kind) || produces_input_grad(b.kind));
}

/// How long an overlapped pair's slot lasts: its two durations added, less `gain` (the F's
/// overlap_gain when pair_gains, else 0).
constexpr double pair_length(double first, double second, double gain) noexcept {
  return std::max(0.0, first + second - gain);
}

/// The overlapped pairs of `sched` (pair_candidate, a chain's marks taken as timed_traverse
/// takes them); 0 lets timed_traverse time the ops in one plain pass.
template <class Sched>
std::size_t count_pairs(const Sched& sched, std::uint32_t v, std::uint32_t m) {
  std::size_t pairs = 0;
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto ops = sched.ops(s);
    std::uint8_t marks = 0;  // most schedules have none: one cheap pass proves it
    for (const op& o : ops) {
      marks |= o.flags;
    }
    if ((marks & op_flag::overlap_next) == 0) {
      continue;
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (pair_candidate(ops.data(), ops.size(), i, v, m)) {
        ++pairs;
        ++i;
      }
    }
  }
  return pairs;
}

/// How timed_traverse reads `costs` (see there): a reference into a table, or the callable's
/// own result (by value when it computes one).
template <class Costs>
auto op_cost_reader(Costs costs) {
  return [costs](std::size_t i, microbatch_index mb) PIPESCHED_HOT_LAMBDA -> decltype(auto) {
    if constexpr (std::is_pointer_v<Costs>) {
      static_cast<void>(mb);
      return (costs[i]);
    } else {
      return costs(i, mb);
    }
  };
}

/// Where timed_traverse keeps each event's end: one table per event slot, micro-batch major
/// (see event_index): each value is read shortly after it is written, and a sweep over the
/// stages stays within a few pages.
struct event_end_table {
  double* ev = nullptr;
  std::size_t table_size = 0;  ///< one slot's table: global chunks × micro-batches
  std::size_t row = 0;         ///< global chunks
  std::size_t index(global_chunk g, microbatch_index mb, std::size_t slot) const noexcept {
    return slot * table_size + std::size_t{mb} * row + g;
  }
};

/// Per stage, the slot of an overlapped pair whose first op ran and whose second op is next.
struct open_pair {
  bool active = false;
  double start = 0.0;
  double end = 0.0;
  start_reason why = start_reason::none;  ///< of the second op
};

/// timed_traverse's state and its rule, one member per case (plain op, rendezvous side, pair's
/// first or second op), and its two ways through the ops: one plain pass, or rounds for pairs.
/// Holds scalars and pointers by value and only refers to timed_traverse's vectors: the
/// traversal's byte-sized flag stores may alias anything whose address escapes, and a value
/// read through it would be reloaded after each of them (measured: 10-20 % more instructions
/// per op). The per-op members are forced inline for the same reason as the hot lambdas.
template <class Sched, class CostOf, class Rendezvous, class Visitor>
struct timed_engine {
  const Sched& sched;
  const traversal_plan& plan;
  const placement& pl;
  std::uint32_t p = 0;
  std::uint32_t m = 0;
  std::uint32_t v = 0;
  CostOf cost_of;
  const op_plan* plan_base = nullptr;
  event_end_table ends;
  double* stage_end = nullptr;  ///< per stage, its last op's end
  open_pair* open = nullptr;    ///< per stage with pairs; nullptr without
  std::vector<timed_step>& unsettled;
  Rendezvous& rendezvous;
  Visitor& visit;
  bool posted_transfers = false;
  bool have_pairs = false;
  bool emit = false;     ///< call `visit` (the plain pass, or the last round)
  bool changed = false;  ///< some time differs from the previous round
  // traverse visits the two sides of a rendezvous back to back; the first one waits here.
  bool pending = false;
  timed_step first{};

  /// The latest arrival of `o`'s inputs from other stages, at least `t`.
  PIPESCHED_HOT_INLINE double inputs_ready(const op& o,
                                           const op_plan& e,
                                           double t,
                                           start_reason& why) const {
    const op_cost& oc = cost_of(static_cast<std::size_t>(&e - plan_base), o.mb);
    for (std::uint8_t k = 0; k < e.count; ++k) {
      // A same-stage producer ran earlier on this stage and ended by stage_end[s]: it can't
      // delay the op, and skipping it keeps old rows out of the cache. A posted RECV ended
      // when it was posted; its data lands later (its slot): that one is read.
      if (!e.deps[k].remote && !(posted_transfers && event_slot(e.deps[k].what) >= 2)) {
        continue;
      }
      const double arrival = input_arrival(
          ends.ev[ends.index(e.deps[k].chunk, o.mb, event_slot(e.deps[k].what))], oc.latency[k]);
      if (arrival > t) {
        t = arrival;
        why = k == 0 ? start_reason::requirement0 : start_reason::requirement1;
      }
    }
    return t;
  }
  PIPESCHED_HOT_INLINE double ready_time(
      stage_index s, std::size_t i, const op& o, const op_plan& e, start_reason& why) const {
    why = i == 0 ? start_reason::none : start_reason::previous;
    return inputs_ready(o, e, stage_end[s], why);
  }
  double duration_of(const op_plan* e, microbatch_index mb) const {
    return cost_of(static_cast<std::size_t>(e - plan_base), mb).duration;
  }

  PIPESCHED_HOT_INLINE void record(std::size_t at, double t) {
    if (have_pairs && ends.ev[at] != t) {  // only the rounds for pairs ask what changed
      changed = true;
    }
    ends.ev[at] = t;
  }
  /// Ends the op: its stage's end, the end of the event it produces, `visit`.
  PIPESCHED_HOT_INLINE void finish(const timed_step& st) {
    stage_end[st.stage] = st.end;
    if (st.plan != nullptr) {
      switch (st.o.kind) {
        case op_kind::forward:
          record(ends.index(st.plan->own, st.o.mb, 0), st.end);
          break;
        case op_kind::backward_input:  // also backward_input_done: same slot
        case op_kind::backward_full:
          record(ends.index(st.plan->own, st.o.mb, 1), st.end);
          break;
        case op_kind::recv_forward:
          record(ends.index(st.plan->own, st.o.mb, 2), st.end);
          break;
        case op_kind::recv_backward:
          record(ends.index(st.plan->own, st.o.mb, 3), st.end);
          break;
        default:
          break;
      }
    }
    if (emit) {
      visit(st);
    }
  }
  void no_time(stage_index s, std::size_t i, const op& o, const op_plan* e) {
    const double t = stage_end[s];
    finish(timed_step{s, i, o, e, t, t, i == 0 ? start_reason::none : start_reason::previous});
  }

  /// One op. Pairs = false: the plain pass, compiled without the pair logic.
  template <bool Pairs>
  PIPESCHED_HOT_INLINE void step(stage_index s, std::size_t i, const op& o, const op_plan* e) {
    if (e == nullptr) {
      no_time(s, i, o, e);
      return;
    }
    if (is_comm(o.kind)) {
      rendezvous_side(s, i, o, e);
      return;
    }
    if (Pairs && open[s].active) {
      pair_second(s, i, o, e);
      return;
    }
    start_reason why{};
    const double start = ready_time(s, i, o, *e, why);
    const auto ops = sched.ops(s);
    if (Pairs && pair_candidate(ops.data(), ops.size(), i, v, m)) {
      pair_first(s, i, o, e, start, why, ops[i + 1]);
      return;
    }
    finish(timed_step{s, i, o, e, start, start + duration_of(e, o.mb), why});
  }

  /// A SEND or RECV: the first side visited waits for its partner, the second times both.
  PIPESCHED_HOT_INLINE void rendezvous_side(stage_index s,
                                            std::size_t i,
                                            const op& o,
                                            const op_plan* e) {
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
    PIPESCHED_ASSERT(partner->stage == first.stage && same_work(partner->o, first.o),
                     "timed_traverse: rendezvous sides must be visited back to back");
    pending = false;
    const double start = std::max(ready, first.start);
    const bool i_send = o.kind == op_kind::send_forward || o.kind == op_kind::send_backward;
    const double latency = i_send ? rendezvous(s, first.stage) : rendezvous(first.stage, s);
    timed_step mine{s, i, o, e, ready, ready, why};
    if (posted_transfers) {
      posted_rendezvous(mine, i_send, start + latency);
    } else {
      blocking_rendezvous(mine, start, start + latency);
    }
  }
  /// Posted (isend / irecv): each side posts when its stage reaches it and goes on; the data
  /// lands T_comm after the later post (`lands`), and only the op consuming the RECV waits.
  void posted_rendezvous(timed_step& mine, bool i_send, double lands) {
    timed_step& recv = i_send ? first : mine;
    const timed_step& send = i_send ? mine : first;
    if (send.start > recv.start) {
      recv.why = start_reason::partner;  // what the consumer waits for is the send's post
    }
    finish(first);
    finish(mine);
    record(ends.index(recv.plan->own, recv.o.mb, recv.o.kind == op_kind::recv_forward ? 2 : 3),
           lands);
  }
  /// Blocking: both sides run from the later ready time to `end`.
  void blocking_rendezvous(timed_step& mine, double start, double end) {
    // Each side's start is set by its own inputs unless the other side was ready later.
    const start_reason why_first = first.start >= mine.start ? first.why : start_reason::partner;
    const start_reason why_this = mine.start >= first.start ? mine.why : start_reason::partner;
    first.start = start;
    first.end = end;
    first.why = why_first;
    finish(first);
    mine.start = start;
    mine.end = end;
    mine.why = why_this;
    finish(mine);
  }

  /// The first op of a pair (ready at `start` for `why`; o2 the pair's second op): opens the
  /// slot, at the later of the two ops' ready times.
  PIPESCHED_HOT_INLINE void pair_first(stage_index s,
                                       std::size_t i,
                                       const op& o,
                                       const op_plan* e,
                                       double start,
                                       start_reason why,
                                       const op& o2) {
    const op_plan& e2 = plan.at(s, o2);
    start_reason why2{};
    const double ready2 = inputs_ready(o2, e2, 0.0, why2);
    const bool second_later = ready2 > start;
    const double pair_start = second_later ? ready2 : start;
    const op_plan* f = o.kind == op_kind::forward ? e : &e2;
    const microbatch_index f_mb = o.kind == op_kind::forward ? o.mb : o2.mb;
    const double gain = pair_gains(o, o2)
                            ? cost_of(static_cast<std::size_t>(f - plan_base), f_mb).overlap_gain
                            : 0.0;
    const double length = pair_length(duration_of(e, o.mb), duration_of(&e2, o2.mb), gain);
    open[s] = open_pair{true, pair_start, pair_start + length,
                        second_later ? why2 : start_reason::overlap_previous};
    finish(timed_step{s, i, o, e, pair_start, pair_start + length,
                      second_later ? start_reason::overlap_next : why});
  }
  /// The second op of a pair: the slot is set. Its inputs later than this round assumed leave
  /// the pair unsettled (another round, or the witness).
  PIPESCHED_HOT_INLINE void pair_second(stage_index s,
                                        std::size_t i,
                                        const op& o,
                                        const op_plan* e) {
    open_pair& op2 = open[s];
    op2.active = false;
    start_reason why{};
    const double ready = inputs_ready(o, *e, 0.0, why);
    if (ready > op2.start) {
      changed = true;
      unsettled.push_back(timed_step{s, i - 1, sched.ops(s)[i - 1], nullptr, op2.start, op2.end,
                                     start_reason::overlap_next});
    }
    timed_step st{s, i, o, e, op2.start, op2.end, op2.why};
    st.shares_slot = true;
    finish(st);
  }

  /// No pairs: the ops timed once, in traversal order.
  traversal_result plain_pass() {
    return traverse_planned(sched, plan,
                            [this](stage_index s, std::size_t i, const op& o, const op_plan* e)
                                PIPESCHED_HOT_LAMBDA { step<false>(s, i, o, e); });
  }

  /// Pairs: the traversal order recorded once, then timed in rounds until nothing changes.
  traversal_result pair_rounds(std::size_t pairs) {
    std::vector<visit_at> order;
    traversal_result result = traverse_planned(
        sched, plan, [&](stage_index s, std::size_t i, const op&, const op_plan* e) {
          order.push_back(visit_at{s, i, e});
        });
    // Each round settles at least one more pair along any chain of pairs: pairs + 1 rounds
    // settle every time unless a pair waits for itself.
    for (std::size_t r = 0;; ++r) {
      round(order);
      if (!changed) {
        break;
      }
      if (r > pairs + 1) {
        result.complete = false;
        add_unsettled(result.witness);
        return result;
      }
    }
    emit = true;
    round(order);
    return result;
  }

 private:
  struct visit_at {
    stage_index stage;
    std::size_t index;
    const op_plan* plan;
  };

  void round(const std::vector<visit_at>& order) {
    std::fill(stage_end, stage_end + p, 0.0);
    std::fill(open, open + p, open_pair{});
    pending = false;
    changed = false;
    unsettled.clear();
    for (const visit_at& a : order) {
      step<true>(a.stage, a.index, sched.ops(a.stage)[a.index], a.plan);
    }
  }
  /// The pairs that never settled: each one's second op waits for the pair itself.
  void add_unsettled(deadlock_witness& witness) const {
    for (const timed_step& t : unsettled) {
      blocked_stage b;
      b.stage = t.stage;
      b.op_index = t.index;
      b.blocked = t.o;
      b.waits_on_stage = t.stage;
      b.waits_for = "the inputs of " + to_string(sched.ops(t.stage)[t.index + 1], v > 1) +
                    ", the op it overlaps, which wait for this pair itself";
      witness.stuck.push_back(std::move(b));
    }
  }
};

/// Times every op of `sched` (a schedule or an op_lists) in the dependency order of
/// traverse_planned, under docs/model.md §3:
/// - a compute op starts at max(end of the previous op on its stage, end of each producer on
///   another stage + its latency) and lasts costs[plan index].duration;
/// `costs` is a `const op_cost*` indexed by plan index, or, for costs that differ per op (a
/// sampled perturbation, analysis/perturbed_timing.hpp; per-micro-batch factors,
/// microbatch_costs), a callable `(std::size_t plan_index, microbatch_index mb) -> op_cost`
/// (or a const reference; a pure function of its arguments: the pair rounds below may ask twice);
/// - an overlapped pair (pair_candidate: an op marked overlaps_next and the next op of its
///   stage) is one slot: both start at the later of the two ops' ready times and both end
///   after the two durations added minus the F's overlap_gain (T_FB for an F and a B);
/// - a SEND and its RECV form a blocking rendezvous: both start at the later of the two sides'
///   ready times and both end rendezvous(sender stage, receiver stage) later; with
///   `posted_transfers` (non-blocking sends and receives, as PyTorch's runtime posts them) both
///   take no time on their stages and the data lands rendezvous(...) after the later post, which
///   only the op consuming the RECV waits for;
/// - a SEND / RECV without a peer and an op out of range take no time.
/// Calls `visit(const timed_step&)` once per op, in traversal order (the two sides of a
/// rendezvous back to back, sender's stage order as traverse gives it). Linear in the ops;
/// 2 doubles per (global chunk, micro-batch), 4 when lowered.
///
/// With pairs, the traversal order (one op at a time) may visit a pair's first op before the
/// producers of the second op's inputs, so the ops are timed again, in the same order, until
/// no time changes (each round fixes at least one more pair on every chain of pairs; 3 rounds
/// for most schedules), then once more for `visit`. A pair whose second op's inputs wait for the
/// pair itself (through other stages) never settles: the result is then incomplete, with a
/// witness naming the pairs, and `visit` is not called.
template <class Sched, class Costs, class Rendezvous, class Visitor>
traversal_result timed_traverse(const Sched& sched,
                                const traversal_plan& plan,
                                Costs costs,
                                Rendezvous&& rendezvous,
                                Visitor&& visit,
                                bool posted_transfers = false) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const std::uint32_t v = pl.chunks();
  const std::size_t nslots = plan.lowered() ? 4 : 2;
  const std::size_t row = pl.total_chunks();
  const std::size_t table_size = std::size_t{m} * row;
  std::vector<double> event_end(table_size * nslots, 0.0);
  std::vector<double> stage_end(p, 0.0);
  const std::size_t pairs = count_pairs(sched, v, m);
  std::vector<open_pair> open(pairs > 0 ? p : 0);
  std::vector<timed_step> unsettled;

  using cost_reader = decltype(op_cost_reader(costs));
  timed_engine<Sched, cost_reader, std::remove_reference_t<Rendezvous>,
               std::remove_reference_t<Visitor>>
      engine{.sched = sched,
             .plan = plan,
             .pl = pl,
             .p = p,
             .m = m,
             .v = v,
             .cost_of = op_cost_reader(costs),
             .plan_base = plan.data(),
             .ends = event_end_table{event_end.data(), table_size, row},
             .stage_end = stage_end.data(),
             .open = open.data(),
             .unsettled = unsettled,
             .rendezvous = rendezvous,
             .visit = visit,
             .posted_transfers = posted_transfers,
             .have_pairs = pairs > 0,
             .emit = pairs == 0};
  return pairs == 0 ? engine.plain_pass() : engine.pair_rounds(pairs);
}

}  // namespace pipesched::detail
