#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/sim/cost_model.hpp"
#include "pipesched/validate/traversal.hpp"
#include "pipesched/validate/validator.hpp"

namespace pipesched {

/// Where lower_communication() posts each RECV_F / RECV_B on the consumer's stage.
enum class receive_placement : std::uint8_t {
  /// At its place in the timed execution: before the first op of the receiving stage that
  /// starts at or after the producer ends (earlier only where the transfer order forces it).
  /// Keeps the lowered schedule's timing close to the compute-only one; buffers live longer.
  /// (Posting every receive as early as possible, right after the stage's previous transfer,
  /// is also deadlock-free but makes stages wait for data they don't need yet: about twice
  /// the makespan of 1F1B under blocking receives.)
  eager,
  /// As late as the transfer order allows: just before the consuming op, unless a comm op of
  /// the stage ranked after it comes first (a SEND of an op that runs before the consumer, or
  /// a RECV for such an op); then just before that one. Placing every receive right before its
  /// consumer is unsound with blocking sends (1F1B, p >= 3: stage 1 sends F2 while stage 2
  /// sends B0, each blocked until the other posts its receive), so receives that a SEND must
  /// not overtake are posted before it.
  late,
};

/// Options of lower_communication().
struct lowering_options {
  receive_placement receives = receive_placement::eager;
  /// Costs of the timed execution that orders the transfers (unit costs, T_comm = 0 by
  /// default). Only the order of the lowered schedule depends on it; any costs give a
  /// deadlock-free result. Pass the real costs to get an order that follows the real timing.
  cost_model costs{};
};

namespace detail {

/// One transfer as seen from one of its two stages: key (data-ready time, sequence number of
/// the producer in a dependency-respecting execution) and the SEND or RECV op to emit.
struct comm_entry {
  double ready = 0.0;
  std::uint64_t seq = 0;
  op o{};
};

inline bool comm_before(const comm_entry& a, const comm_entry& b) noexcept {
  return a.ready < b.ready || (a.ready == b.ready && a.seq < b.seq);
}

inline bool is_send(op_kind k) noexcept {
  return k == op_kind::send_forward || k == op_kind::send_backward;
}

}  // namespace detail

/// Inserts SEND_F / RECV_F / SEND_B / RECV_B into every stage's list of a valid compute-only
/// schedule, so that it runs under blocking point-to-point semantics (a SEND completes only
/// together with its matching RECV, like MPI_Ssend; both block) without deadlock. Transfers
/// between chunks on the same stage (the turn of a V, any same-stage neighbours) get no ops.
/// Compute ops keep their order; each SEND directly follows its producer; each RECV precedes
/// its consumer (where exactly: options.receives).
///
/// Why it cannot deadlock: the transfers are ranked by one global key, the (end time,
/// execution index) of their producer in a timed, dependency-respecting execution of the
/// input (options.costs). On every stage the comm ops appear in increasing key order, SENDs
/// after their producers and RECVs before their consumers. Take the incomplete transfer T of
/// smallest key. On its sender and on its receiver every comm op before T's SEND / RECV has a
/// smaller key, so it has completed; every compute op before it only needs same-stage ops
/// earlier in the list or RECVs earlier in the list (completed). So both stages reach T's ops,
/// the SEND's producer has run, and T completes. By induction all transfers complete, then
/// all compute ops. The placement rules are compatible with the key order because a RECV's
/// producer ends no later than its consumer starts and precedes it in the execution, so its
/// key is smaller than that of any SEND produced by the consumer or a later op of its stage.
///
/// Throws invalid_argument when the input already has comm ops or is not valid (the message
/// quotes the first violation). O(n log n) in the number of ops (one traversal, one sort of
/// each stage's transfers).
inline schedule lower_communication(const schedule& compute_only,
                                    const lowering_options& options = {}) {
  const schedule& in = compute_only;
  const placement& pl = in.layout();
  const std::uint32_t p = in.stages();
  const std::uint32_t m = in.microbatches();
  const std::uint32_t v = in.chunks();

  for (stage_index s = 0; s < p; ++s) {
    const auto ops = in.ops(s);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (is_comm(ops[i].kind)) {
        detail::fail("lower_communication: input schedule \"", in.name(),
                     "\" is already lowered (stage ", s, ", op ", i, " is ",
                     to_string(ops[i], v > 1), "); pass a compute-only schedule");
      }
    }
  }
  validate_options vo;
  vo.max_violations = 1;
  vo.check_feasibility = false;  // the traversal below checks it and reports the witness
  const validation_report report = validate(in, vo);
  if (!report.ok()) {
    detail::fail("lower_communication: input schedule \"", in.name(),
                 "\" is invalid: ", report.violations.front().message);
  }

  // Timed execution of the input, in a dependency-respecting order: an op starts when its
  // stage is free and its cross-stage inputs have arrived (same-stage inputs come earlier in
  // the list of a valid schedule, so the stage clock covers them).
  const std::size_t cells = std::size_t{pl.total_chunks()} * m;
  std::vector<double> fwd_end(cells, 0.0);   // end of F, by global chunk and micro-batch
  std::vector<double> grad_end(cells, 0.0);  // end of B / BW
  std::vector<double> clock(p, 0.0);
  const bool eager = options.receives == receive_placement::eager;
  std::vector<std::vector<double>> starts(eager ? p : 0);  // start time of each compute op
  for (stage_index s = 0; s < starts.size(); ++s) {
    starts[s].resize(in.ops(s).size());
  }
  std::vector<std::vector<detail::comm_entry>> comm(p);
  std::uint64_t seq = 0;
  const cost_model& costs = options.costs;

  const traversal_result tr = traverse(in, [&](stage_index s, std::size_t i, const op& o) {
    const global_chunk g = pl.global(s, o.chunk);
    double start = clock[s];
    for (const requirement& r : requirements_of(pl, s, o, false)) {
      if (r.remote) {
        const std::size_t cell = std::size_t{r.chunk} * m + r.mb;
        const double ready = r.what == event_kind::forward_done ? fwd_end[cell] : grad_end[cell];
        start = std::max(start, ready + costs.comm(r.stage, s));
      }
    }
    const double end = start + costs.duration(s, o.kind, o.chunk);
    clock[s] = end;
    if (eager) {
      starts[s][i] = start;
    }
    const std::size_t cell = std::size_t{g} * m + o.mb;
    const std::uint64_t id = seq++;
    auto transfer = [&](global_chunk to, op_kind send, op_kind recv) {
      const stage_index t = pl.stage_of(to);
      if (t != s) {
        comm[s].push_back({end, id, make_op(send, o.mb, o.chunk)});
        comm[t].push_back({end, id, make_op(recv, o.mb, pl.local_of(to))});
      }
    };
    if (o.kind == op_kind::forward) {
      fwd_end[cell] = end;
      if (!pl.is_last(g)) {
        transfer(g + 1, op_kind::send_forward, op_kind::recv_forward);
      }
    } else if (produces_input_grad(o.kind)) {
      grad_end[cell] = end;
      if (g > 0) {
        transfer(g - 1, op_kind::send_backward, op_kind::recv_backward);
      }
    }
  });
  if (!tr.complete) {
    detail::fail("lower_communication: input schedule \"", in.name(),
                 "\" is invalid: ", tr.witness.describe());
  }
  fwd_end = {};
  grad_end = {};

  schedule out(in.name(), m, pl);
  std::vector<std::uint8_t> posted(std::size_t{v} * m, 0);  // bit 0: RECV_F, bit 1: RECV_B
  for (stage_index s = 0; s < p; ++s) {
    auto& entries = comm[s];
    std::sort(entries.begin(), entries.end(), detail::comm_before);
    const auto ops = in.ops(s);
    auto& dst = out.stage_ops(s);
    dst.reserve(ops.size() + entries.size());
    std::fill(posted.begin(), posted.end(), std::uint8_t{0});
    std::size_t k = 0;
    auto emit_next = [&] {
      const op& c = entries[k++].o;
      if (!detail::is_send(c.kind)) {
        posted[std::size_t{c.chunk} * m + c.mb] |= c.kind == op_kind::recv_forward ? 1 : 2;
      }
      dst.push_back(c);
    };
    // Posts the receives ranked before the next SEND whose data exists by time `t`.
    auto post_receives_until = [&](double t) {
      while (k < entries.size() && !detail::is_send(entries[k].o.kind) && entries[k].ready <= t) {
        emit_next();
      }
    };
    constexpr double always = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const op& o = ops[i];
      if (eager) {
        post_receives_until(starts[s][i]);
      }
      const global_chunk g = pl.global(s, o.chunk);
      std::uint8_t needs = 0;
      if (o.kind == op_kind::forward && g > 0 && pl.stage_of(g - 1) != s) {
        needs = 1;
      } else if (produces_input_grad(o.kind) && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
        needs = 2;
      }
      const std::size_t cell = std::size_t{o.chunk} * m + o.mb;
      // Late: post the receives up to this op's own. The key order guarantees no SEND of
      // this or a later op comes first (see the function comment).
      while ((posted[cell] & needs) != needs) {
        PIPESCHED_ASSERT(k < entries.size() && !detail::is_send(entries[k].o.kind),
                         "lower_communication: a receive is ranked after a later send");
        emit_next();
      }
      dst.push_back(o);
      const bool sends =
          (o.kind == op_kind::forward && !pl.is_last(g) && pl.stage_of(g + 1) != s) ||
          (produces_input_grad(o.kind) && g > 0 && pl.stage_of(g - 1) != s);
      if (sends) {
        // Receives ranked before this send must be posted before it, in both placements.
        post_receives_until(always);
        PIPESCHED_ASSERT(k < entries.size() && entries[k].o.mb == o.mb &&
                             entries[k].o.chunk == o.chunk,
                         "lower_communication: sends out of producer order");
        emit_next();
      }
    }
    PIPESCHED_ASSERT(k == entries.size(), "lower_communication: a transfer was not placed");
    entries = {};
    if (eager) {
      starts[s] = {};
    }
  }
  return out;
}

}  // namespace pipesched
