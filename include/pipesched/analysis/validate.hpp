#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/traversal.hpp"

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_VALIDATE)
#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/detail/key_table.hpp"
#endif

namespace pipesched {

/// What rule a violation breaks.
enum class violation_kind : std::uint8_t {
  out_of_range,    ///< micro-batch or chunk index outside the schedule's spec
  duplicate,       ///< the same (kind, micro-batch, chunk) twice on a stage
  missing,         ///< an op the schedule needs is absent
  mixed_backward,  ///< both BW and B/W for the same micro-batch and chunk
  local_order,     ///< F before B/BW before W violated on one stage
  comm_mismatch,   ///< a SEND/RECV without its partner, or one where no transfer is needed
  overlap,         ///< an overlapped pair (op::flags, overlaps_next) breaks a rule of its own
  recompute,       ///< an R whose F is not marked recompute (op_flag::recompute)
  deadlock,        ///< the stages cannot all run to the end (see validation_report::deadlock)
};
/// Number of violation kinds (deadlock is the last).
inline constexpr std::size_t violation_kind_count =
    static_cast<std::size_t>(violation_kind::deadlock) + 1;

constexpr std::string_view to_string(violation_kind k) noexcept {
  switch (k) {
    case violation_kind::out_of_range:
      return "out_of_range";
    case violation_kind::duplicate:
      return "duplicate";
    case violation_kind::missing:
      return "missing";
    case violation_kind::mixed_backward:
      return "mixed_backward";
    case violation_kind::local_order:
      return "local_order";
    case violation_kind::comm_mismatch:
      return "comm_mismatch";
    case violation_kind::overlap:
      return "overlap";
    case violation_kind::recompute:
      return "recompute";
    case violation_kind::deadlock:
      return "deadlock";
  }
  return "?";
}

/// One broken rule, located. `message` is a complete sentence that starts with the location,
/// e.g. "stage 1, op 3 (W0): W0 of chunk 0 before its B".
struct violation {
  /// op_index value for violations that have no position (a missing op).
  static constexpr std::size_t no_index = std::numeric_limits<std::size_t>::max();

  violation_kind kind = violation_kind::missing;
  stage_index stage = 0;
  std::size_t op_index = no_index;
  std::string message;
};

/// Every violation of a schedule, never just a bool.
struct validation_report {
  std::vector<violation> violations;  ///< the first `max_violations` found, in stage order
  std::size_t total = 0;              ///< all violations found, including those not stored
  std::optional<deadlock_witness> deadlock;

  /// All violations found of each kind (index: the violation_kind), stored or not.
  std::array<std::size_t, violation_kind_count> totals{};

  bool ok() const noexcept { return total == 0; }
  /// Violations found beyond the stored ones.
  std::size_t truncated() const noexcept { return total - violations.size(); }
  /// How many violations of kind `k` the schedule has: the true total, including those beyond
  /// max_violations that were counted but not stored.
  std::size_t count(violation_kind k) const noexcept { return totals[static_cast<std::size_t>(k)]; }
};

struct validate_options {
  std::size_t max_violations = 1000;  ///< a broken 50M-op schedule must not yield 50M strings
  bool check_feasibility = true;      ///< run the cross-stage (deadlock) check
};

namespace detail {

struct report_builder {
  validation_report& r;
  std::size_t limit;
  // `msg` is a callable returning the message, built only when the violation is stored, so
  // a hopeless 50M-op schedule costs counts, not strings.
  template <class Msg>
  void add(violation_kind k, stage_index s, std::size_t idx, Msg&& msg) {
    ++r.total;
    ++r.totals[static_cast<std::size_t>(k)];
    if (r.violations.size() < limit) {
      r.violations.push_back({k, s, idx, msg()});
    }
  }
};

inline std::string where(stage_index s, std::size_t idx, const op& o, bool chunked) {
  return "stage " + std::to_string(s) + ", op " + std::to_string(idx) + " (" +
         to_string(o, chunked) + "): ";
}

/// The violation to report first: a missing or misordered op usually causes the deadlock
/// too, so the root cause before the deadlock; null when the report only has a deadlock
/// witness and no violation.
inline const violation* first_cause(const validation_report& r) {
  for (const violation& v : r.violations) {
    if (v.kind != violation_kind::deadlock) {
      return &v;
    }
  }
  return r.violations.empty() ? nullptr : &r.violations.front();
}

/// "<who>: schedule "<name>" is invalid: <first cause> (and N more violations)".
inline std::string invalid_schedule_message(const validation_report& r,
                                            const std::string& name,
                                            const std::string& who) {
  const violation* first = first_cause(r);
  std::string msg = who + ": schedule \"" + name + "\" is invalid: " +
                    (first != nullptr ? first->message : std::string("it cannot run to the end"));
  if (r.total > 1) {
    msg += " (and " + std::to_string(r.total - 1) + " more violations)";
  }
  return msg;
}

/// "3 of chunk 1": how a message names a micro-batch of a chunk (after an op kind: "F3 of
/// chunk 1").
inline std::string mb_label(microbatch_index mb, chunk_index c) {
  return std::to_string(mb) + " of chunk " + std::to_string(c);
}

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_VALIDATE)

/// validate()'s passes over one schedule. They share the per-key op counts that the first pass
/// fills and the later ones read; each reports through `rb`, in the order validate() runs them.
class schedule_checker {
 public:
  schedule_checker(const schedule& sched, report_builder& rb)
      : sched_(sched),
        pl_(sched.layout()),
        rb_(rb),
        p_(sched.stages()),
        m_(sched.microbatches()),
        v_(sched.chunks()),
        chunked_(v_ > 1),
        lowered_(sched.has_comm()),
        marked_(lowered_ ? op_kind_count : 5),
        nk_(marked_ + 1),
        keys_(std::uint64_t{p_} * v_ * m_),
        seen_(keys_ * nk_, sched.size()) {}

  /// Pass 1, op by op in list order: indices in range, no duplicates, and the local order of
  /// each op after the ops of its micro-batch and chunk seen so far on its stage.
  void check_indices_and_local_order() {
    for (stage_index s = 0; s < p_; ++s) {
      const auto ops = sched_.ops(s);
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const op& o = ops[i];
        if (o.mb >= m_ || o.chunk >= v_) {
          rb_.add(violation_kind::out_of_range, s, i, [&] {
            return where(s, i, o, chunked_) +
                   (o.mb >= m_ ? "micro-batch " + std::to_string(o.mb) + " must be < m (" +
                                     std::to_string(m_) + ")"
                               : "chunk " + std::to_string(o.chunk) + " must be < chunks (" +
                                     std::to_string(v_) + ")");
          });
          continue;
        }
        if (!sched_.on_route(o.mb, pl_.global(s, o.chunk))) {
          rb_.add(violation_kind::out_of_range, s, i, [&] {
            return where(s, i, o, chunked_) + "micro-batch " + std::to_string(o.mb) +
                   " runs along route " + std::to_string(sched_.route_of(o.mb)) +
                   ", which does not pass chunk " + std::to_string(o.chunk) + " of this stage";
          });
          continue;
        }
        const std::uint64_t k = key(s, o.chunk, o.mb);
        std::uint8_t& c = seen_.slot(k * nk_ + static_cast<std::size_t>(o.kind));
        if (c > 0) {
          rb_.add(violation_kind::duplicate, s, i, [&] {
            return where(s, i, o, chunked_) + "appears more than once on this stage";
          });
        }
        if (c < 255) {
          ++c;
        }
        check_local_order(s, i, o, k);
      }
    }
  }

  /// Pass 2: every op the schedule needs, in (stage, chunk, micro-batch) order; one summary
  /// instead when the counts are sparse (most ops are missing, and a scan would take p*v*m
  /// steps).
  void report_missing_ops() {
    if (!seen_.dense()) {
      rb_.add(violation_kind::missing, 0, violation::no_index, [&] {
        return concat("schedule: stages*chunks*microbatches (", keys_,
                      ") (chunk, micro-batch) pairs need at least ", 2 * keys_,
                      " ops (F and BW, or F, B and W each), the schedule has ", sched_.size());
      });
      return;
    }
    for (stage_index s = 0; s < p_; ++s) {
      for (chunk_index c = 0; c < v_; ++c) {
        const global_chunk g = pl_.global(s, c);
        for (microbatch_index j = 0; j < m_; ++j) {
          if (!sched_.on_route(j, g)) {
            continue;  // j has no ops on another route's chunks
          }
          report_missing_compute(s, c, j);
          if (lowered_) {
            report_missing_transfers(s, c, j, g);
          }
        }
      }
    }
  }

  /// Pass 3: the local rules of overlapped pairs. Returns how many pairs pass them (and have
  /// indices in range): the pairs find_deadlock times as slots.
  std::size_t check_overlapped_pairs() {
    std::size_t pairs = 0;
    for (stage_index s = 0; s < p_; ++s) {
      const auto ops = sched_.ops(s);
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const op& o = ops[i];
        if (!overlaps_next(o)) {
          continue;
        }
        auto say = [&](std::size_t at, const std::string& what) {
          rb_.add(violation_kind::overlap, s, at,
                  [&] { return where(s, at, ops[at], chunked_) + what; });
        };
        if (i + 1 == ops.size()) {
          say(i, "marked to overlap with the next op, but it is the last op of the stage");
          continue;
        }
        const op& o2 = ops[i + 1];
        const std::string pair_name =
            "(" + to_string(o, chunked_) + ";" + to_string(o2, chunked_) + ")";
        auto backward = [](op_kind k) { return produces_input_grad(k); };
        if (!((o.kind == op_kind::forward && backward(o2.kind)) ||
              (backward(o.kind) && o2.kind == op_kind::forward))) {
          say(i, "overlapped pair " + pair_name +
                     " must be one F and one B or BW (a forward with a backward, either first)");
        } else if (o.mb == o2.mb && o.chunk == o2.chunk) {
          say(i, "overlapped pair " + pair_name +
                     " runs both ops at once, so they need different micro-batches or chunks: "
                     "the backward needs its own forward");
        } else if (o.mb < m_ && o.chunk < v_ && o2.mb < m_ && o2.chunk < v_) {
          ++pairs;
        }
        if (overlaps_next(o2)) {
          say(i + 1, "pairs don't chain: " + to_string(o2, chunked_) +
                         " is the second op of the overlapped pair " + pair_name +
                         " and is marked to overlap with the next op too");
        }
        ++i;  // the second op of a pair is not a first one
      }
    }
    return pairs;
  }

  /// Pass 4 (the schedule must be traversable): runs the stages against each other. If they
  /// finish one op at a time, times the `pairs` overlapped pairs as slots; if not, reports the
  /// deadlock and keeps its witness in the report.
  void find_deadlock(std::size_t pairs) {
    const traversal_plan plan(pl_, lowered_);
    auto tr =
        traverse_planned(sched_, plan, [](stage_index, std::size_t, const op&, const op_plan*) {});
    if (tr.complete && pairs > 0) {
      check_pair_slots(plan);
    }
    if (!tr.complete) {
      report_deadlock(tr);
    }
  }

 private:
  std::uint64_t key(stage_index s, chunk_index c, microbatch_index j) const noexcept {
    return (std::uint64_t{s} * v_ + c) * m_ + j;
  }
  std::uint8_t count(std::uint64_t k, op_kind kind) const {
    return seen_.get(k * nk_ + static_cast<std::size_t>(kind));
  }
  /// The extra slot per key: "the F is marked recompute".
  bool f_marked(std::uint64_t k) const { return seen_.get(k * nk_ + marked_) != 0; }
  bool backward_seen(std::uint64_t k) const {
    return count(k, op_kind::backward_input) > 0 || count(k, op_kind::backward_full) > 0;
  }

  /// Op i of stage s (key k, already counted) against the ops of its key before it.
  void check_local_order(stage_index s, std::size_t i, const op& o, std::uint64_t k) {
    switch (o.kind) {
      case op_kind::forward:
        if (is_recomputed(o)) {
          seen_.slot(k * nk_ + marked_) = 1;
        }
        break;
      case op_kind::recompute:
        check_recompute_order(s, i, o, k);
        break;
      case op_kind::backward_input:
      case op_kind::backward_full:
        check_backward_order(s, i, o, k);
        break;
      case op_kind::backward_weight:
        check_weight_order(s, i, o, k);
        break;
      default:
        if (is_comm(o.kind)) {
          check_transfer(s, i, o, k);
        }
        break;
    }
  }

  /// An R: after its F, which is marked recompute, and before its backward.
  void check_recompute_order(stage_index s, std::size_t i, const op& o, std::uint64_t k) {
    auto label = [&] { return mb_label(o.mb, o.chunk); };
    if (count(k, op_kind::forward) == 0) {
      rb_.add(violation_kind::local_order, s, i, [&] {
        return where(s, i, o, chunked_) + "R" + label() + " before F" + label() +
               " (R re-runs its forward)";
      });
    } else if (!f_marked(k)) {
      rb_.add(violation_kind::recompute, s, i, [&] {
        return where(s, i, o, chunked_) + "R" + label() + " re-runs F" + label() +
               ", which is not marked recompute (it keeps its activations): mark "
               "the F (\"recompute\": true in a schedule JSON, op_flag::recompute in C++) or "
               "drop the R";
      });
    } else if (backward_seen(k)) {
      rb_.add(violation_kind::local_order, s, i, [&] {
        return where(s, i, o, chunked_) + "R" + label() +
               " after its backward (R rebuilds the activations the backward needs)";
      });
    }
  }

  /// A B or BW: after its F (and its R when the F is marked recompute); not both B and BW.
  void check_backward_order(stage_index s, std::size_t i, const op& o, std::uint64_t k) {
    auto label = [&] { return mb_label(o.mb, o.chunk); };
    if (count(k, op_kind::forward) == 0) {
      rb_.add(violation_kind::local_order, s, i, [&] {
        return where(s, i, o, chunked_) + std::string(to_string(o.kind)) + label() + " before F" +
               label();
      });
    } else if (f_marked(k) && count(k, op_kind::recompute) == 0) {
      rb_.add(violation_kind::local_order, s, i, [&] {
        return where(s, i, o, chunked_) + std::string(to_string(o.kind)) + label() + " before R" +
               label() + " (F" + label() + " is marked recompute: R rebuilds its activations)";
      });
    }
    if (count(k, op_kind::backward_input) > 0 && count(k, op_kind::backward_full) > 0) {
      rb_.add(violation_kind::mixed_backward, s, i, [&] {
        return where(s, i, o, chunked_) + "BW and B both present for micro-batch " + label();
      });
    }
  }

  /// A W: after its B, and not with a BW (which computes the weight gradient already).
  void check_weight_order(stage_index s, std::size_t i, const op& o, std::uint64_t k) {
    auto label = [&] { return mb_label(o.mb, o.chunk); };
    if (count(k, op_kind::backward_full) > 0) {
      rb_.add(violation_kind::mixed_backward, s, i, [&] {
        return where(s, i, o, chunked_) + "W after BW for micro-batch " + label() +
               " (BW already computes the weight gradient)";
      });
    } else if (count(k, op_kind::backward_input) == 0) {
      rb_.add(violation_kind::local_order, s, i,
              [&] { return where(s, i, o, chunked_) + "W" + label() + " before B" + label(); });
    }
  }

  /// A SEND / RECV: a transfer to another stage must exist for it; a SEND comes after its
  /// producer and a RECV before its consumer, on this stage.
  void check_transfer(stage_index s, std::size_t i, const op& o, std::uint64_t k) {
    const std::optional<op_ref> partner = comm_partner(pl_, s, o);
    if (!partner) {
      rb_.add(violation_kind::comm_mismatch, s, i, [&] {
        return where(s, i, o, chunked_) + "no transfer exists for this op (first or last chunk)";
      });
      return;
    }
    if (partner->stage == s) {
      rb_.add(violation_kind::comm_mismatch, s, i, [&] {
        return where(s, i, o, chunked_) +
               "producer and consumer are on the same stage: no transfer is needed";
      });
      return;
    }
    const bool fwd = o.kind == op_kind::send_forward || o.kind == op_kind::recv_forward;
    const bool send = o.kind == op_kind::send_forward || o.kind == op_kind::send_backward;
    const bool local_done = fwd ? count(k, op_kind::forward) > 0 : backward_seen(k);
    if (send != local_done) {
      rb_.add(violation_kind::local_order, s, i, [&] {
        return where(s, i, o, chunked_) + std::string(to_string(o.kind)) + mb_label(o.mb, o.chunk) +
               (send ? " before " : " after its consumer ") + (fwd ? "F" : "B/BW") +
               mb_label(o.mb, o.chunk);
      });
    }
  }

  /// The compute ops of micro-batch j of local chunk c on stage s: F, its R when the F is
  /// marked recompute, and a BW or both B and W.
  void report_missing_compute(stage_index s, chunk_index c, microbatch_index j) {
    const std::uint64_t k = key(s, c, j);
    auto label = [&] { return mb_label(j, c); };
    auto miss = [&](std::string_view what) {
      rb_.add(violation_kind::missing, s, violation::no_index, [&] {
        return "stage " + std::to_string(s) + ": " + std::string(what) + label() + " is missing";
      });
    };
    const std::uint8_t b = count(k, op_kind::backward_input);
    const std::uint8_t w = count(k, op_kind::backward_weight);
    if (count(k, op_kind::forward) == 0) {
      miss("F");
    }
    if (f_marked(k) && count(k, op_kind::recompute) == 0) {
      rb_.add(violation_kind::missing, s, violation::no_index, [&] {
        return "stage " + std::to_string(s) + ": R" + label() + " is missing (F" + label() +
               " is marked recompute)";
      });
    }
    if (count(k, op_kind::backward_full) == 0) {
      if (b == 0) {
        miss(w > 0 ? "B" : "backward (BW, or B and W) ");
      }
      if (w == 0 && b > 0) {
        miss("W");
      }
    }
  }

  /// The SEND / RECV ops of micro-batch j of local chunk c (global chunk g) on stage s: one for
  /// each neighbouring chunk on another stage.
  void report_missing_transfers(stage_index s, chunk_index c, microbatch_index j, global_chunk g) {
    const std::uint64_t k = key(s, c, j);
    // SEND_F and RECV_B pair with the next chunk, SEND_B and RECV_F with the previous one.
    const bool next_remote = !pl_.is_last(g) && pl_.stage_of(g + 1) != s;
    const bool prev_remote = !pl_.is_first(g) && pl_.stage_of(g - 1) != s;
    auto need = [&](op_kind kind, bool expected) {
      if (expected && count(k, kind) == 0) {
        rb_.add(violation_kind::comm_mismatch, s, violation::no_index, [&] {
          return "stage " + std::to_string(s) + ": " + std::string(to_string(kind)) +
                 mb_label(j, c) + " is missing (its partner transfer needs it)";
        });
      }
    };
    need(op_kind::send_forward, next_remote);
    need(op_kind::send_backward, prev_remote);
    need(op_kind::recv_forward, prev_remote);
    need(op_kind::recv_backward, next_remote);
  }

  /// The stages finish one op at a time; timed with each pair as one slot (unit costs), a pair
  /// whose second op's inputs wait for the pair itself blocks: report each one.
  void check_pair_slots(const traversal_plan& plan) {
    const std::vector<op_cost> unit(plan.size(), op_cost{1.0, {}});
    const traversal_result slots = timed_traverse(
        sched_, plan, unit.data(), [](stage_index, stage_index) { return 1.0; },
        [](const timed_step&) {});
    for (const blocked_stage& b : slots.witness.stuck) {
      rb_.add(violation_kind::overlap, b.stage, b.op_index, [&] {
        const op& o2 = sched_.ops(b.stage)[b.op_index + 1];
        return where(b.stage, b.op_index, b.blocked, chunked_) + "overlapped with " +
               to_string(o2, chunked_) +
               ", whose inputs wait for this pair itself (through other stages): "
               "the inputs of both ops must be ready when the pair starts";
      });
    }
  }

  /// The stuck stages of a deadlock (only those on its cycle, when it has one), then a summary;
  /// the witness goes into the report.
  void report_deadlock(traversal_result& tr) {
    const std::vector<bool> in_cycle = tr.witness.on_cycle();
    for (const auto& b : tr.witness.stuck) {
      if (!tr.witness.cycle.empty() && !in_cycle[b.stage]) {
        continue;
      }
      rb_.add(violation_kind::deadlock, b.stage, b.op_index, [&] {
        return where(b.stage, b.op_index, b.blocked, chunked_) + "blocked waiting for " +
               b.waits_for + (b.never_produced ? ", which is never produced" : "");
      });
    }
    rb_.add(violation_kind::deadlock,
            tr.witness.cycle.empty() ? stage_index{0} : tr.witness.cycle.front(),
            violation::no_index, [&] {
              // describe() starts with "deadlock: ", which the violation kind already says.
              const std::string d = tr.witness.describe();
              return "summary: " + d.substr(d.find(':') + 2);
            });
    rb_.r.deadlock = std::move(tr.witness);
  }

  const schedule& sched_;
  const placement& pl_;
  report_builder& rb_;
  std::uint32_t p_;
  std::uint32_t m_;
  std::uint32_t v_;
  bool chunked_;
  bool lowered_;
  // Per (stage, local chunk, mb): one count per kind (compute kinds first, comm kinds only when
  // lowered), then the "F is marked recompute" slot. Sparse when p*v*m dwarfs the op count
  // (see key_table).
  std::size_t marked_;
  std::size_t nk_;
  std::uint64_t keys_;
  key_table<std::uint8_t> seen_;
};

#endif

}  // namespace detail

/// Checks a schedule against the rules of docs/model.md §1 and returns every violation:
/// - counts: each (kind, micro-batch, chunk) exactly once on the chunk's stage; F plus either
///   B and W or BW; indices in range; no BW mixed with B/W;
/// - local order on a stage: F before B/BW before W for the same micro-batch and chunk; in a
///   lowered schedule also each SEND after its producer and each RECV before its consumer;
/// - recomputation (docs/model.md §1): an F marked recompute has exactly one R of its
///   micro-batch and chunk, after it and before its B / BW; an R needs such an F;
/// - for lowered schedules (with SEND/RECV ops): every cross-stage transfer has exactly one
///   SEND on the producer and one RECV on the consumer, and none where no transfer is needed;
/// - overlapped pairs (an op marked overlaps_next runs with the next op of its stage,
///   docs/model.md §1): the marked op has a next op; the pair is one F and one B or BW (in
///   either order); neither needs the other (so not the same micro-batch and chunk); pairs
///   don't chain (the second op of a pair is not marked: a slot holds two ops); and the
///   inputs of both can be ready when the pair starts, i.e. the second op's inputs don't wait
///   for the pair itself through other stages (checked by timing the pairs as slots);
/// - feasibility: every stage can run its list to the end given the cross-stage dependencies
///   (and SEND/RECV rendezvous); otherwise a deadlock with a witness cycle.
/// Linear in the number of ops. Never throws for an invalid schedule.
PIPESCHED_INLINE validation_report validate(const schedule& sched,
                                            const validate_options& opts = {});

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_VALIDATE)
PIPESCHED_INLINE validation_report validate(const schedule& sched, const validate_options& opts) {
  validation_report report;
  detail::report_builder rb{report, opts.max_violations};
  detail::schedule_checker check(sched, rb);
  check.check_indices_and_local_order();
  check.report_missing_ops();
  const std::size_t pairs = check.check_overlapped_pairs();
  // Not traversable: most ops are missing (reported above), there is nothing to run.
  if (opts.check_feasibility && detail::traversable(sched)) {
    check.find_deadlock(pairs);
  }
  return report;
}
#endif

namespace detail {

/// Throws invalid_argument naming the first violation when `sched` breaks a rule: what
/// simulate() and the drivers do before timing or running an order (an invalid order times to
/// plausible but wrong numbers).
inline void require_valid(const schedule& sched, const std::string& who) {
  const validation_report r = validate(sched);
  if (!r.ok()) {
    throw invalid_argument(invalid_schedule_message(r, sched.name(), who));
  }
}

}  // namespace detail

}  // namespace pipesched
