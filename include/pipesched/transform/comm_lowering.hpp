#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"

namespace pipesched {

/// Where lower_communication() posts each RECV_F / RECV_B on the consumer's stage.
enum class receive_placement : std::uint8_t {
  /// At its place in the timed execution: before the first op of the receiving stage that
  /// starts at or after the producer ends (earlier only where the transfer order forces it).
  /// Keeps the lowered schedule's timing close to the compute-only one; buffers live longer.
  /// (Posting every receive as early as possible, right after the stage's previous transfer,
  /// is also deadlock-free but makes stages wait for data they don't need yet: up to about
  /// twice the makespan of GPipe or 1F1B under blocking receives.)
  eager,
  /// As late as possible, to save receive-buffer memory. Just before the consumer is unsound
  /// with blocking sends (1F1B, p=2: stage 0's SEND_F1 waits for stage 1's RECV_F1, posted
  /// after stage 1's SEND_B0, which waits for stage 0's RECV_B0, posted after SEND_F1), so
  /// two deadlock-free placements are built and the one with the lower receive-buffer peak
  /// (then total buffer lifetime) is returned:
  /// - the rank order of `eager`, each receive posted only where the order forces it (before
  ///   its consumer, or before a SEND ranked after it): never earlier than eager;
  /// - a lazy rendezvous execution: each stage posts a receive only when its next op needs
  ///   it; only when every stage is blocked does the blocked SEND whose receiver is nearest to
  ///   the consumer get its receive posted early (before the receiver's own pending SEND).
  ///   This one is best for 1F1B-like orders (one live buffer per stage).
  /// About three times the work of eager.
  late,
};

constexpr std::string_view to_string(receive_placement p) noexcept {
  return p == receive_placement::eager ? "eager" : "late";
}

/// The placement named `name` (to_string's spelling), nullopt for any other name.
constexpr std::optional<receive_placement> parse_receive_placement(std::string_view name) noexcept {
  for (receive_placement p : {receive_placement::eager, receive_placement::late}) {
    if (name == to_string(p)) {
      return p;
    }
  }
  return std::nullopt;
}

/// Options of lower_communication().
struct lowering_options {
  receive_placement receives = receive_placement::eager;
  /// Costs of the timed execution that ranks the transfers (unit costs, T_comm = 0 by
  /// default). Only the order of the result depends on them; any costs give a
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

/// A cross-stage transfer: who sends and receives which op, and its identity (consumer's
/// global chunk and micro-batch, direction bit 1 forward / 2 backward).
struct transfer {
  stage_index from = 0;
  stage_index to = 0;
  op send{};
  op recv{};
  std::size_t cell = 0;
  std::uint8_t bit = 0;
};

/// The transfer compute op `o` on stage `s` sends, if any.
inline std::optional<transfer> outgoing(const placement& pl,
                                        std::uint32_t m,
                                        stage_index s,
                                        const op& o) noexcept {
  const global_chunk g = pl.global(s, o.chunk);
  if (o.kind == op_kind::forward && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
    return transfer{s,
                    pl.stage_of(g + 1),
                    make_op(op_kind::send_forward, o.mb, o.chunk),
                    make_op(op_kind::recv_forward, o.mb, pl.local_of(g + 1)),
                    std::size_t{g + 1} * m + o.mb,
                    1};
  }
  if (produces_input_grad(o.kind) && !pl.is_first(g) && pl.stage_of(g - 1) != s) {
    return transfer{s,
                    pl.stage_of(g - 1),
                    make_op(op_kind::send_backward, o.mb, o.chunk),
                    make_op(op_kind::recv_backward, o.mb, pl.local_of(g - 1)),
                    std::size_t{g - 1} * m + o.mb,
                    2};
  }
  return std::nullopt;
}

/// The transfer compute op `o` on stage `s` consumes, if any.
inline std::optional<transfer> incoming(const placement& pl,
                                        std::uint32_t m,
                                        stage_index s,
                                        const op& o) noexcept {
  const global_chunk g = pl.global(s, o.chunk);
  if (o.kind == op_kind::forward && !pl.is_first(g) && pl.stage_of(g - 1) != s) {
    return outgoing(pl, m, pl.stage_of(g - 1), make_op(op_kind::forward, o.mb, pl.local_of(g - 1)));
  }
  if (produces_input_grad(o.kind) && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
    return outgoing(pl, m, pl.stage_of(g + 1), make_op(o.kind, o.mb, pl.local_of(g + 1)));
  }
  return std::nullopt;
}

/// The lazy half of receive_placement::late: a rendezvous execution of a valid compute-only
/// schedule, recorded into `out`. Every stage runs until it is blocked;
/// when all are, the blocked SEND whose receiver is nearest to the consumer gets its receive
/// posted early. Such a SEND always exists: with no stage blocked on a SEND, the stuck state
/// would also be stuck under buffered transfers, which a valid schedule never is.
inline void lower_lazy(const schedule& in, schedule& out) {
  const placement& pl = in.layout();
  const std::uint32_t p = in.stages();
  const std::uint32_t m = in.microbatches();
  std::vector<std::size_t> pos(p, 0);
  std::vector<std::uint8_t> sending(p, 0);  // ran a producer, its SEND not yet matched
  std::vector<std::uint8_t> received(std::size_t{pl.total_chunks()} * m, 0);
  std::vector<std::vector<stage_index>> waiters(p);
  std::vector<std::uint8_t> queued(p, 1);
  std::vector<stage_index> work;
  for (stage_index s = p; s-- > 0;) {
    work.push_back(s);
  }
  // Where each transfer's consumer sits in its stage's list, by (cell, direction).
  std::vector<std::size_t> consumer_at(std::size_t{pl.total_chunks()} * m * 2, 0);
  for (stage_index s = 0; s < p; ++s) {
    out.stage_ops(s).reserve(in.ops(s).size() * 2);
    const auto ops = in.ops(s);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (const auto t = incoming(pl, m, s, ops[i])) {
        consumer_at[t->cell * 2 + t->bit - 1] = i;
      }
    }
  }
  // Blocked SENDs by how many compute ops their receiver runs before the consumer: posting
  // the nearest receive early costs the least buffer time.
  using candidate = std::pair<std::size_t, stage_index>;
  std::priority_queue<candidate, std::vector<candidate>, std::greater<>> blocked_senders;
  std::vector<std::size_t> listed_at(p, std::numeric_limits<std::size_t>::max());
  auto distance = [&](const transfer& t) {
    return consumer_at[t.cell * 2 + t.bit - 1] - pos[t.to];
  };

  std::vector<transfer> pending(p);  // the SEND a `sending` stage waits at
  auto pending_send = [&](stage_index s) -> const transfer& { return pending[s]; };
  auto enqueue = [&](stage_index t) {
    if (!queued[t]) {
      queued[t] = 1;
      work.push_back(t);
    }
  };
  auto meet = [&](const transfer& t) {
    out.stage_ops(t.from).push_back(t.send);
    out.stage_ops(t.to).push_back(t.recv);
    received[t.cell] |= t.bit;
    sending[t.from] = 0;
    enqueue(t.from);
    enqueue(t.to);
  };

  for (;;) {
    while (!work.empty()) {
      const stage_index s = work.back();
      work.pop_back();
      queued[s] = 0;
      const auto ops = in.ops(s);
      bool progressed = false;
      for (;;) {
        if (sending[s]) {
          const transfer& t = pending_send(s);
          const stage_index b = t.to;
          bool wanted = !sending[b] && pos[b] < in.ops(b).size();
          if (wanted) {
            const auto need = incoming(pl, m, b, in.ops(b)[pos[b]]);
            wanted = need && need->cell == t.cell && need->bit == t.bit;
          }
          if (!wanted) {
            waiters[b].push_back(s);
            if (listed_at[s] != pos[s]) {
              listed_at[s] = pos[s];
              if (blocked_senders.size() > 2 * std::size_t{p} + 16) {
                // Most entries are for SENDs matched since: rebuild from the blocked ones.
                std::vector<candidate> keep;
                for (stage_index x = 0; x < p; ++x) {
                  if (sending[x] && listed_at[x] == pos[x] && x != s) {
                    keep.push_back({distance(pending[x]), x});
                  }
                }
                blocked_senders = decltype(blocked_senders)(std::greater<>{}, std::move(keep));
              }
              blocked_senders.push({distance(t), s});
            }
            break;
          }
          meet(t);
          progressed = true;
          continue;
        }
        if (pos[s] == ops.size()) {
          break;
        }
        const op& o = ops[pos[s]];
        const auto need = incoming(pl, m, s, o);
        if (need && !(received[need->cell] & need->bit)) {
          const stage_index a = need->from;
          if (!sending[a] || pending_send(a).cell != need->cell ||
              pending_send(a).bit != need->bit) {
            waiters[a].push_back(s);
            break;
          }
          meet(*need);
          progressed = true;
          continue;
        }
        out.stage_ops(s).push_back(o);
        ++pos[s];
        progressed = true;
        if (const auto t = outgoing(pl, m, s, o)) {
          sending[s] = 1;
          pending[s] = *t;
        }
      }
      if (progressed) {
        for (stage_index w : waiters[s]) {
          enqueue(w);
        }
        waiters[s].clear();
      }
    }
    bool resolved = false;
    while (!resolved && !blocked_senders.empty()) {
      const auto [d, a] = blocked_senders.top();
      blocked_senders.pop();
      if (!sending[a]) {
        continue;
      }
      const transfer& t = pending_send(a);
      if (distance(t) != d) {  // its receiver moved on since: re-rank
        blocked_senders.push({distance(t), a});
        continue;
      }
      listed_at[a] = std::numeric_limits<std::size_t>::max();
      meet(t);  // posts the receive early
      resolved = true;
    }
    if (!resolved) {
      break;
    }
  }
  for (stage_index s = 0; s < p; ++s) {
    PIPESCHED_ASSERT(pos[s] == in.ops(s).size() && !sending[s],
                     "lower_communication: the lazy execution of a valid schedule got stuck");
  }
}

/// Ranks the transfers by a timed execution and merges them into the stage lists in rank
/// order (see lower_communication). `eager`: each receive goes before the first op that
/// starts once its data exists; otherwise only where the rank order forces it.
/// Returns false, leaving `out` alone, when the input cannot run to the end.
inline bool lower_ranked(const schedule& in,
                         const shaped_cost_model& costs,
                         bool eager,
                         schedule& out) {
  const placement& pl = in.layout();
  const std::uint32_t p = in.stages();
  const std::uint32_t m = in.microbatches();

  // Timed execution of the input by the timing engine (docs/model.md §3), in its
  // dependency-respecting order; that order breaks ties between equal end times.
  const std::size_t cells = std::size_t{pl.total_chunks()} * m;
  std::vector<std::vector<double>> starts(eager ? p : 0);  // start time of each compute op
  for (stage_index s = 0; s < starts.size(); ++s) {
    starts[s].resize(in.ops(s).size());
  }
  std::vector<std::vector<comm_entry>> comm(p);
  std::uint64_t seq = 0;
  const traversal_plan plan(pl, false);
  auto record = [&](const transfer& x, double end) {
    const std::uint64_t id = seq++;
    comm[x.from].push_back({end, id, x.send});
    comm[x.to].push_back({end, id, x.recv});
  };
  // An overlapped pair's first op may be visited before the producers of its partner's inputs:
  // its transfer is ranked with the partner's (same end, later id), so every receive the pair
  // needs ranks before the pair's sends, whatever the durations.
  std::vector<std::optional<transfer>> held(p);
  const traversal_result tr = with_op_costs(plan, pl, costs, [&](auto cost_of) {
    return timed_traverse(
        in, plan, cost_of, [&](stage_index from, stage_index to) { return costs.comm(from, to); },
        [&](const timed_step& t) {
          if (eager) {
            starts[t.stage][t.index] = t.start;
          }
          if (t.shares_slot && held[t.stage]) {
            record(*held[t.stage], t.end);
            held[t.stage].reset();
          }
          if (const auto x = outgoing(pl, m, t.stage, t.o)) {
            const auto ops = in.ops(t.stage);
            if (pair_candidate(ops.data(), ops.size(), t.index, pl.chunks(), m)) {
              held[t.stage] = *x;
            } else {
              record(*x, t.end);
            }
          }
        });
  });
  if (!tr.complete) {
    return false;
  }

  constexpr double always = std::numeric_limits<double>::infinity();
  std::vector<std::uint8_t> received(cells, 0);  // bit 1: RECV_F posted, 2: RECV_B posted
  for (stage_index s = 0; s < p; ++s) {
    auto& entries = comm[s];
    std::sort(entries.begin(), entries.end(), comm_before);
    const auto ops = in.ops(s);
    auto& dst = out.stage_ops(s);
    dst.reserve(ops.size() + entries.size());
    std::size_t k = 0;
    auto post_next = [&] {
      const op& c = entries[k++].o;
      if (!is_send(c.kind)) {
        const std::size_t cell = std::size_t{pl.global(s, c.chunk)} * m + c.mb;
        received[cell] |= c.kind == op_kind::recv_forward ? 1 : 2;
      }
      dst.push_back(c);
    };
    // Posts, in rank order, the receives before the next SEND whose data exists by time `t`.
    auto post_receives_until = [&](double t) {
      while (k < entries.size() && !is_send(entries[k].o.kind) && entries[k].ready <= t) {
        post_next();
      }
    };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      // An overlapped pair stays adjacent and marked: the receives of both ops before it, the
      // sends of both after it (PyTorch's lowering of OVERLAP_F_B).
      const std::size_t n = pair_candidate(ops.data(), ops.size(), i, pl.chunks(), m) ? 2 : 1;
      if (eager) {
        post_receives_until(starts[s][i]);
      }
      for (std::size_t j = i; j < i + n; ++j) {
        if (const auto need = incoming(pl, m, s, ops[j])) {
          // The rank order puts no SEND of this or a later op before the op's own receive
          // (see lower_communication), so this stops at it. Eager posted it already.
          while (!(received[need->cell] & need->bit)) {
            PIPESCHED_ASSERT(k < entries.size() && !is_send(entries[k].o.kind),
                             "lower_communication: a receive is ranked after a later send");
            post_next();
          }
        }
      }
      for (std::size_t j = i; j < i + n; ++j) {
        dst.push_back(ops[j]);
      }
      for (std::size_t j = i; j < i + n; ++j) {
        const op& o = ops[j];
        if (outgoing(pl, m, s, o)) {
          // Receives ranked before this SEND go before it (their data arrived during `o`).
          post_receives_until(always);
          PIPESCHED_ASSERT(k < entries.size() && entries[k].o.mb == o.mb &&
                               entries[k].o.chunk == o.chunk && is_send(entries[k].o.kind),
                           "lower_communication: sends out of producer order");
          post_next();
        }
      }
      i += n - 1;
    }
    PIPESCHED_ASSERT(k == entries.size(), "lower_communication: a transfer was not placed");
    entries = {};
    if (eager) {
      starts[s] = {};
    }
  }
  return true;
}

/// Receive-buffer profile of a lowered schedule, to compare two late lowerings: the largest
/// per-stage peak of live receive buffers, the sum of the per-stage peaks, and the total
/// buffer lifetime (live buffers summed over compute ops).
inline std::array<std::size_t, 3> receive_buffer_profile(const schedule& s) {
  const placement& pl = s.layout();
  const std::uint32_t m = s.microbatches();
  std::array<std::size_t, 3> out{};
  for (stage_index st = 0; st < s.stages(); ++st) {
    std::size_t live = 0;
    std::size_t peak = 0;
    for (const op& o : s.ops(st)) {
      if (o.kind == op_kind::recv_forward || o.kind == op_kind::recv_backward) {
        peak = std::max(peak, ++live);
      } else if (is_compute(o.kind)) {
        out[2] += live;
        if (incoming(pl, m, st, o)) {
          --live;
        }
      }
    }
    out[0] = std::max(out[0], peak);
    out[1] += peak;
  }
  return out;
}

}  // namespace detail

/// Inserts SEND_F / RECV_F / SEND_B / RECV_B into every stage's list of a valid compute-only
/// schedule, so that it runs under blocking point-to-point semantics (a SEND completes only
/// together with its matching RECV, like MPI_Ssend; both block) without deadlock. Transfers
/// between chunks on the same stage (the turn of a V, any same-stage neighbours) get no ops.
/// Compute ops keep their order; each SEND follows its producer (only RECVs in between);
/// each RECV precedes its consumer (where exactly: options.receives). An overlapped pair
/// (op_flag::overlap_next) stays adjacent and marked, as PyTorch lowers OVERLAP_F_B: the RECVs
/// of both its ops before it, the SENDs of both after it (so a pair's first SEND follows the
/// pair's second op); with pairs, receive_placement::late places receives in rank order only.
///
/// Why eager cannot deadlock: the transfers are ranked by one global key, the (end time,
/// execution index) of their producer in a timed, dependency-respecting execution of the
/// input (options.costs). On every stage the comm ops appear in increasing key order, SENDs
/// after their producers and RECVs before their consumers. Take the incomplete transfer T of
/// smallest key. On its sender and on its receiver every comm op before T's SEND / RECV has a
/// smaller key, so it has completed; every compute op before it only needs same-stage ops
/// earlier in the list or RECVs earlier in the list (completed). So both stages reach T's ops,
/// the SEND's producer has run, and T completes. By induction all transfers complete, then
/// all compute ops. The placement rules fit the key order because a RECV's producer ends no
/// later than its consumer starts and comes first in the execution, so the RECV's key is
/// smaller than that of any SEND of the consumer or a later op of its stage.
/// A pair runs as one slot once the inputs of both ops are there: its transfers are ranked at
/// the pair's end (the first op's after the second's producers, ties included), so the RECVs
/// it needs rank before its SENDs and the same induction holds with the pair as one op.
/// The late placement either uses the same rank order (same argument) or is the record of a
/// complete lazy execution; with fixed partners a rendezvous system is confluent (a SEND/RECV
/// pair that can meet stays able to until it does), so every execution of the record
/// completes.
///
/// Throws invalid_argument when the input already has comm ops or is not valid (the message
/// quotes the first violation or the deadlock). O(n log n) in the number of ops (traversals,
/// one sort of each stage's transfers).
inline schedule lower_communication(const schedule& compute_only,
                                    const lowering_options& options = {}) {
  const schedule& in = compute_only;
  const std::uint32_t p = in.stages();
  bool pairs = false;
  for (stage_index s = 0; s < p; ++s) {
    const auto ops = in.ops(s);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (is_comm(ops[i].kind)) {
        detail::fail("lower_communication: input schedule \"", in.name(),
                     "\" is already lowered (stage ", s, ", op ", i, " is ",
                     to_string(ops[i], in.chunks() > 1), "); pass a compute-only schedule");
      }
      pairs = pairs || overlaps_next(ops[i]);
    }
  }
  validate_options vo;
  vo.max_violations = 1;
  vo.check_feasibility = false;  // checked below, to quote the whole deadlock witness
  const validation_report report = validate(in, vo);
  if (!report.ok()) {
    detail::fail("lower_communication: input schedule \"", in.name(),
                 "\" is invalid: ", report.violations.front().message);
  }
  schedule out = schedule::on(in.name(), in.layout(), in.microbatches());
  const bool eager = options.receives == receive_placement::eager;
  const shaped_cost_model costs = options.costs.for_shape(in.stages(), in.layout().chunks(),
                                                          in.microbatches(), "lower_communication");
  if (!detail::lower_ranked(in, costs, eager, out)) {
    const traversal_result tr = traverse(in, [](stage_index, std::size_t, const op&) {});
    detail::fail("lower_communication: input schedule \"", in.name(),
                 "\" is invalid: ", tr.witness.describe());
  }
  // The lazy lowering records a one-op-at-a-time execution, which would split a pair.
  if (eager || pairs) {
    return out;
  }
  schedule lazy = schedule::on(in.name(), in.layout(), in.microbatches());
  detail::lower_lazy(in, lazy);
  return detail::receive_buffer_profile(lazy) < detail::receive_buffer_profile(out) ? lazy : out;
}

}  // namespace pipesched
