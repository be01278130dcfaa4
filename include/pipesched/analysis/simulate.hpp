#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/detail/key_table.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/stage_table.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"

namespace pipesched {

/// An op by position: stage and index in that stage's list.
struct op_location {
  stage_index stage = 0;
  std::size_t op_index = 0;

  friend bool operator==(const op_location&, const op_location&) = default;
};

/// Timing statistics of one stage: the simulator's (simulation_result::stages) and a
/// timeline's (timeline::summary, io/timeline.hpp), the one per-stage summary type.
struct stage_timing {
  double first_start = 0.0;    ///< start of the stage's first op (0 when it ran none)
  double last_end = 0.0;       ///< end of its last op
  double span = 0.0;           ///< last_end − first_start
  double busy = 0.0;           ///< sum of compute durations, an overlapped pair's slot once
  double comm = 0.0;           ///< time spent inside SEND/RECV rendezvous (lowered schedules)
  double idle = 0.0;           ///< span − busy (includes `comm`)
  double idle_fraction = 0.0;  ///< idle / span; 0 when span is 0
  /// makespan − busy: idle time over the whole iteration (0 to makespan). For 1F1B / ZB-H1 /
  /// ZB-H2 with T_comm = 0 this is the closed-form bubble on every stage, while `idle` shrinks
  /// towards the last stage (stage i, 1-based, starts i−1 forwards late and ends early).
  double makespan_idle = 0.0;
  std::size_t ops_run = 0;  ///< ops simulated (the whole list unless deadlocked)
};

/// How a lowered schedule's SEND / RECV pairs take time (docs/model.md §3).
enum class transfer_timing : std::uint8_t {
  /// Blocking point-to-point (MPI_Send / MPI_Recv; pipesched's MPI driver): a rendezvous both
  /// stages wait in, T_comm long.
  blocking,
  /// Posted, non-blocking (isend / irecv; PyTorch's pipelining runtime): SEND and RECV post and
  /// return; the data lands T_comm after both are posted and only the op that consumes the RECV
  /// waits for it. A compute_comms CSV written for PyTorch times this way.
  posted,
};

struct simulate_options {
  /// Keep every op with its start and end (a timed_op, 32 bytes per op). Switch off for huge
  /// schedules: the statistics, makespan, bubble rate and critical path are still computed.
  bool record_ops = true;
  /// Compute the critical path (costs one byte per op during the run).
  bool critical_path = true;
  /// Validate first (validate(), linear time) and throw invalid_argument naming the first
  /// violation: an order that breaks a rule times to plausible but wrong numbers (a 1F1B without
  /// its W ops gave 22 instead of 27), a deadlocked one to a makespan of what ran. Pass false
  /// only when the schedule was validated already, or to time a partial order on purpose (then
  /// check completed(): a deadlocked run's makespan is the time its ops reached, not the order's).
  bool validate = true;
  /// SEND / RECV pairs of a lowered schedule: blocking rendezvous or posted (transfer_timing).
  transfer_timing transfers = transfer_timing::blocking;
};

/// The outcome of simulate().
struct [[nodiscard]] simulation_result {
  /// ops[s][i]: timing of op i of stage s; empty when record_ops is off. When the schedule
  /// deadlocks, ops[s] holds only the ops that ran (a prefix of the stage's list).
  stage_table<timed_op> ops;
  std::vector<stage_timing> stages;  ///< one per stage
  double makespan = 0.0;             ///< time 0 to the last end over all stages
  /// (S − B) / S: S the largest stage span, B the largest stage busy time (bubble_rate_of(),
  /// analysis/metrics.hpp); the paper's bubble rate when the stages carry equal work.
  double bubble_rate = 0.0;
  /// Σ busy / (p · makespan) (utilization_of(), analysis/metrics.hpp): the same meaning for any
  /// costs.
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
    return detail::largest_over_stages(stages, &stage_timing::idle);
  }
};

namespace detail {

/// True when op `o` produces the event `e` (used to find a producer when walking back).
constexpr bool produces(const op& o, event_kind e) noexcept {
  return (events_produced(o) & event_bit(e)) != 0;
}

/// Storage of the start reasons of all ops. Stages advance together, so blocks of 64 ops of
/// every stage are laid side by side: the writes of one sweep over the stages then stay within
/// a few memory pages rather than one page per stage. A very unbalanced schedule (where that
/// layout would more than double the table) keeps one run per stage instead.
class start_reasons {
 public:
  start_reasons(const schedule& sched, bool enabled) : p_(sched.stages()), offset_(p_ + 1, 0) {
    std::size_t total = 0;
    std::size_t longest = 0;
    for (stage_index s = 0; s < p_; ++s) {
      const std::size_t n = sched.ops(s).size();
      offset_[s + 1] = offset_[s] + n;
      total += n;
      longest = std::max(longest, n);
    }
    const std::size_t blocks = (longest + block - 1) / block;
    interleaved_ = blocks * block * p_ <= 2 * total + block * p_;
    if (enabled) {
      reason_.assign(interleaved_ ? blocks * block * p_ : total, start_reason::none);
    }
  }
  start_reason& operator()(stage_index s, std::size_t i) noexcept { return writer()(s, i); }

  /// A copyable view for the hot loop, where its fields then stay in registers.
  struct view {
    start_reason* data;
    const std::size_t* offset;
    std::size_t p;
    bool interleaved;
    start_reason& operator()(stage_index s, std::size_t i) const noexcept {
      return data[interleaved ? ((i / block) * p + s) * block + i % block : offset[s] + i];
    }
  };
  view writer() noexcept { return view{reason_.data(), offset_.data(), p_, interleaved_}; }

 private:
  static constexpr std::size_t block = 64;
  std::size_t p_;
  bool interleaved_ = false;
  std::vector<std::size_t> offset_;
  std::vector<start_reason> reason_;
};

/// The chain of ops that sets the makespan, walked back from the last-ending op `last` along
/// the recorded start reasons. Along the chain, the ops met on one stage appear in decreasing
/// list order (each is a causal predecessor of the previous), so a per-stage cursor that only
/// moves down finds every producer: linear overall.
inline std::vector<op_location> critical_path(const schedule& sched,
                                              start_reasons& reason,
                                              op_location last) {
  const placement& pl = sched.layout();
  const bool lowered = sched.has_comm();
  std::vector<std::size_t> cursor(sched.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
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
  op_location cur = last;
  for (;;) {
    chain.push_back(cur);
    cursor[cur.stage] = cur.op_index;
    // An op of an overlapped pair that started when the other op allowed: the chain goes on
    // from the other op's reason (the two share one slot, so the other is not a link).
    op_location src = cur;
    start_reason why = reason(cur.stage, cur.op_index);
    if (why == start_reason::overlap_next || why == start_reason::overlap_previous) {
      src.op_index = why == start_reason::overlap_next ? cur.op_index + 1 : cur.op_index - 1;
      why = reason(src.stage, src.op_index);
    }
    const op& o = sched.ops(src.stage)[src.op_index];
    std::optional<op_location> next;
    switch (why) {
      case start_reason::none:
      case start_reason::overlap_next:  // never set on both ops of a pair
      case start_reason::overlap_previous:
        break;
      case start_reason::previous:
        next = op_location{src.stage, src.op_index - 1};
        break;
      case start_reason::requirement0:
      case start_reason::requirement1: {
        const auto reqs = requirements_of(pl, src.stage, o, lowered);
        const requirement& r = reqs.items[why == start_reason::requirement0 ? 0 : 1];
        const chunk_index lc = pl.local_of(r.chunk);
        const auto j = find_back(r.stage, [&](const op& x) {
          return x.chunk == lc && x.mb == r.mb && produces(x, r.what);
        });
        if (j) {
          next = op_location{r.stage, *j};
        }
        break;
      }
      case start_reason::partner: {
        const auto partner = comm_partner(pl, cur.stage, o);
        if (partner) {
          const auto j =
              find_back(partner->stage, [&](const op& x) { return same_work(x, partner->o); });
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
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace detail

/// Simulates `sched` under `costs`: every op timed by the timing engine (docs/model.md §3,
/// detail::timed_traverse), plus per-stage statistics, bubble rate, utilization and the
/// critical path.
///
/// Costs are read for the schedule's shape (cost_model::for_shape: per-stage costs split over
/// its v chunks; tables of another shape throw invalid_argument). Per-micro-batch factors
/// (docs/model.md §3.1) time each micro-batch's ops with its own costs. Times that overflow to
/// infinity throw invalid_argument rather than return numbers that are not finite.
///
/// Never hangs: a schedule that cannot complete returns with `deadlock` set. Linear time;
/// memory 2 doubles per (global chunk, micro-batch) (4 when lowered), plus 32 bytes per op with
/// record_ops and 1 byte per op with critical_path.
PIPESCHED_INLINE simulation_result simulate(const schedule& sched,
                                            const cost_model& model = {},
                                            const simulate_options& options = {});

namespace detail {

/// simulate() with the per-op costs `cost_of` (timed_traverse's `costs`: a plan-indexed table
/// or a per-(plan index, micro-batch) callable) and `costs` already read for the shape, on a
/// traversable schedule; a sampled perturbation (analysis/perturbed_timing.hpp) comes in here.
template <class CostOf>
simulation_result simulate_with(const schedule& sched,
                                const cost_model& costs,
                                const traversal_plan& plan,
                                CostOf cost_of,
                                const simulate_options& options) {
  const std::uint32_t p = sched.stages();

  simulation_result result;
  result.stages.resize(p);
  // Records are written in place by (stage, index) into one block sized up front and not
  // filled (stage_table: one allocation, not one per stage; reset_for_overwrite: the hot loop
  // writes every record of the prefix each stage ran, a deadlock truncates the rest), through
  // a pointer instead of an out-of-line push_back (measured: 18 % of simulate's time at
  // p = 64, m = 1024).
  std::vector<timed_op*> records;
  if (options.record_ops) {
    std::vector<std::size_t> sizes(p);
    for (stage_index s = 0; s < p; ++s) {
      sizes[s] = sched.ops(s).size();
    }
    result.ops.reset_for_overwrite(sizes);
    records.resize(p);
    for (stage_index s = 0; s < p; ++s) {
      records[s] = result.ops[s].data();
    }
  }

  detail::start_reasons reason(sched, options.critical_path);
  double last_end = -1.0;
  op_location last_op{};

  traversal_result tr = detail::timed_traverse(
      sched, plan, cost_of, [&](stage_index from, stage_index to) { return costs.comm(from, to); },
      [&, stages = result.stages.data(), rec = records.data(), record = options.record_ops,
       critical = options.critical_path, why_of = reason.writer()](const detail::timed_step& t)
          PIPESCHED_HOT_LAMBDA {
            stage_timing& st = stages[t.stage];
            if (t.index == 0) {
              st.first_start = t.start;
            }
            if (!t.shares_slot) {  // an overlapped pair's slot counts once
              (is_compute(t.o.kind) ? st.busy : st.comm) += t.end - t.start;
            }
            st.ops_run = t.index + 1;
            st.last_end = t.end;
            if (record) {
              rec[t.stage][t.index] = t.record();
            }
            if (critical) {
              why_of(t.stage, t.index) = t.why;
            }
            if (t.end > last_end) {
              last_end = t.end;
              last_op = op_location{t.stage, t.index};
            }
          },
      options.transfers == transfer_timing::posted);

  double max_span = -1.0;
  double max_busy = 0.0;
  double total_busy = 0.0;
  for (stage_index s = 0; s < p; ++s) {
    stage_timing& st = result.stages[s];
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
    if (options.record_ops) {  // only the ops that ran: a prefix of each stage's list
      for (stage_index s = 0; s < p; ++s) {
        result.ops.truncate(s, result.stages[s].ops_run);
      }
    }
    result.deadlock = std::move(tr.witness);
  } else if (options.critical_path && last_end >= 0.0) {
    result.critical_path = detail::critical_path(sched, reason, last_op);
  }
  return result;
}

}  // namespace detail

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_SIMULATE)
PIPESCHED_INLINE simulation_result simulate(const schedule& sched,
                                            const cost_model& model,
                                            const simulate_options& options) {
  const placement& pl = sched.layout();
  const shaped_cost_model costs =
      model.for_shape(sched.stages(), pl.chunks(), sched.microbatches(), "simulate");
  detail::require_traversable(sched, "simulate");  // refused, not allocated
  if (options.validate) {
    detail::require_valid(sched, "simulate");
  }
  const detail::traversal_plan plan(pl, sched.has_comm());
  return detail::with_op_costs(plan, pl, costs, [&](auto cost_of) {
    return detail::simulate_with(sched, costs, plan, cost_of, options);
  });
}
#endif

}  // namespace pipesched
