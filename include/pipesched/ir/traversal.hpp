#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/detail/key_table.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"

namespace pipesched {

/// A stage that could not finish its list: the op it is blocked on and what that op waits for.
struct blocked_stage {
  stage_index stage = 0;
  std::size_t op_index = 0;  ///< position of the blocked op in the stage's list
  op blocked{};              ///< the op at that position
  /// The stage that should produce what `blocked` waits for (its partner for SEND/RECV).
  stage_index waits_on_stage = 0;
  /// What it waits for, as text: "F3 of chunk 1 on stage 2", "matching RECV_F3 on stage 1".
  std::string waits_for;
  /// True when the awaited op is not pending anywhere (missing, or ordered where it can't run).
  bool never_produced = false;
};

/// Proof that a schedule cannot run to the end.
struct deadlock_witness {
  std::vector<blocked_stage> stuck;  ///< every stage that stopped early, by stage
  /// The wait-for cycle, as stages in order (stage[k] waits on stage[k+1], the last on the
  /// first); empty when the stuck stages wait on an op that is never produced instead.
  std::vector<stage_index> cycle;

  /// True for the stages on `cycle`, indexed by stage (sized to the largest stuck or cycle
  /// stage + 1): one pass, so listing the stuck stages on a p-stage cycle stays O(p).
  std::vector<bool> on_cycle() const {
    std::size_t n = 0;
    for (const auto& b : stuck) {
      n = std::max(n, std::size_t{b.stage} + 1);
    }
    for (stage_index c : cycle) {
      n = std::max(n, std::size_t{c} + 1);
    }
    std::vector<bool> out(n, false);
    for (stage_index c : cycle) {
      out[c] = true;
    }
    return out;
  }

  /// One line: "deadlock: stage 0 blocked at op 4 (B1) waiting for ... -> cycle 0 -> 1 -> 0".
  std::string describe() const {
    std::string out = "deadlock:";
    const std::vector<bool> in_cycle = on_cycle();
    for (const auto& b : stuck) {
      if (!cycle.empty() && !in_cycle[b.stage]) {
        continue;
      }
      out += " stage " + std::to_string(b.stage) + " blocked at op " + std::to_string(b.op_index) +
             " (" + to_string(b.blocked, b.blocked.chunk != 0) + ") waiting for " + b.waits_for +
             (b.never_produced ? " which is never produced" : "") + ";";
    }
    if (!cycle.empty()) {
      out += " cycle: stage " + std::to_string(cycle.front());
      for (std::size_t k = 1; k < cycle.size(); ++k) {
        out += " -> stage " + std::to_string(cycle[k]);
      }
      out += " -> stage " + std::to_string(cycle.front());
    }
    return out;
  }
};

/// Result of traverse(): complete, or a witness of why not.
struct traversal_result {
  bool complete = true;
  deadlock_witness witness;
};

namespace detail {

inline std::string describe_requirement(const placement& pl, const requirement& r) {
  const char* what = "?";
  switch (r.what) {
    case event_kind::forward_done:
      what = "F";
      break;
    case event_kind::input_grad_done:
      what = "B/BW";
      break;
    case event_kind::backward_input_done:
      what = "B";
      break;
    case event_kind::received_forward:
      what = "RECV_F";
      break;
    case event_kind::received_backward:
      what = "RECV_B";
      break;
    case event_kind::activations_ready:
      what = "F/R";
      break;
  }
  return std::string(what) + std::to_string(r.mb) + " of chunk " +
         std::to_string(pl.local_of(r.chunk)) + " on stage " + std::to_string(r.stage);
}

}  // namespace detail

namespace detail {

/// Position of (global chunk, micro-batch) in a per-event table. Micro-batch major: the stages
/// of a pipeline advance through the micro-batches together, so at any moment the traversal
/// touches a few table rows (memory pages) instead of one row per stage.
struct event_index {
  std::size_t chunks = 0;  ///< total_chunks of the placement
  std::size_t operator()(global_chunk g, microbatch_index mb) const noexcept {
    return std::size_t{mb} * chunks + g;
  }
};

/// What requirements_of() and events_produced() give for one (stage, local chunk, op kind),
/// without the micro-batch (a requirement's micro-batch is always the op's own), so the hot
/// loops of traverse() and simulate() look requirements up instead of rebuilding them per op.
struct op_plan {
  struct dep {
    global_chunk chunk = 0;  ///< the event's global chunk: its row in a per-(chunk, mb) table
    stage_index stage = 0;   ///< the stage on which the event happens
    event_kind what = event_kind::forward_done;
    std::uint8_t bit = 0;  ///< event_bit(what)
    bool remote = false;   ///< requirement::remote
  };
  std::array<dep, 2> deps{};
  global_chunk own = 0;       ///< the op's own global chunk
  std::uint8_t count = 0;     ///< deps in use, as requirements_of(...).count
  std::uint8_t produced = 0;  ///< events_produced(kind)
};

/// True when the dense tables of a traversal or simulation (8 op_plans per (stage, chunk),
/// a few bytes per (chunk, micro-batch)) stay small or proportional to the op count. A spec far
/// beyond the ops (a file declaring p*v*m = 2^40 with ten ops) lacks most of its ops anyway.
inline bool traversable(const schedule& s) noexcept {
  const std::uint64_t chunks = s.layout().total_chunks();
  return key_table<double>::fits_dense(chunks * s.microbatches() * 4, s.size()) &&
         key_table<std::array<double, 4>>::fits_dense(chunks * op_kind_count, s.size());
}
/// Refuses, instead of allocating, a schedule that is not traversable().
inline void require_traversable(const schedule& s, const char* who) {
  for (stage_index t = 0; t < s.stages(); ++t) {
    if (!s.ops(t).empty()) {  // the last op's position must fit timed_op::index
      op_position(s.ops(t).size() - 1, t, who);
    }
  }
  if (!traversable(s)) {
    fail(who, ": stages*chunks*microbatches (",
         std::uint64_t{s.layout().total_chunks()} * s.microbatches(),
         ") is far beyond the op count (", s.size(),
         "): most ops are missing (validate() lists them)");
  }
}

/// An op_plan for every (stage, local chunk, op kind) of a placement: p·v·8 small entries,
/// built once per traversal (independent of m and of the op lists).
class traversal_plan {
 public:
  traversal_plan(const placement& pl, bool lowered)
      : chunks_(pl.chunks()),
        lowered_(lowered),
        table_(std::size_t{pl.stages()} * pl.chunks() * op_kind_count) {
    for (stage_index s = 0; s < pl.stages(); ++s) {
      for (std::uint32_t c = 0; c < chunks_; ++c) {
        for (op_kind k : all_op_kinds) {
          const op o = make_op(k, 0, static_cast<chunk_index>(c));
          op_plan& e = table_[index(s, o)];
          e.own = pl.global(s, o.chunk);
          e.produced = events_produced(k);
          for (const requirement& r : requirements_of(pl, s, o, lowered)) {
            e.deps[e.count++] = op_plan::dep{r.chunk, r.stage, r.what, event_bit(r.what), r.remote};
          }
        }
      }
    }
  }

  bool lowered() const noexcept { return lowered_; }
  /// Position of (s, o.chunk, o.kind) in the table; o.chunk must be in range.
  std::size_t index(stage_index s, const op& o) const noexcept {
    return (std::size_t{s} * chunks_ + o.chunk) * op_kind_count + static_cast<std::size_t>(o.kind);
  }
  const op_plan& at(stage_index s, const op& o) const noexcept { return table_[index(s, o)]; }
  const op_plan* data() const noexcept { return table_.data(); }
  std::size_t size() const noexcept { return table_.size(); }

 private:
  std::uint32_t chunks_;
  bool lowered_;
  std::vector<op_plan> table_;
};

/// Per-stage op lists on a placement, read the way traverse_planned reads a schedule: lets a
/// search time a candidate order (vectors of ops) without building a schedule from it.
struct op_lists {
  const placement* pl = nullptr;
  std::uint32_t m = 0;
  const std::vector<std::vector<op>>* lists = nullptr;

  const placement& layout() const noexcept { return *pl; }
  std::uint32_t stages() const noexcept { return pl->stages(); }
  std::uint32_t microbatches() const noexcept { return m; }
  std::span<const op> ops(stage_index s) const noexcept { return (*lists)[s]; }
};

/// The witness of an incomplete traversal, from the final positions and done flags.
/// `Sched` is a schedule or an op_lists.
template <class Sched>
traversal_result traversal_outcome(const Sched& sched,
                                   bool lowered,
                                   const std::vector<std::size_t>& pos,
                                   const std::vector<std::uint8_t>& done,
                                   event_index at) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  auto satisfied = [&](const requirement& r) {
    return (done[at(r.chunk, r.mb)] & event_bit(r.what)) != 0;
  };
  traversal_result result;
  std::vector<std::int64_t> next(p, -1);  // wait-for edge of each stuck stage
  for (stage_index s = 0; s < p; ++s) {
    const auto ops = sched.ops(s);
    if (pos[s] >= ops.size()) {
      continue;
    }
    result.complete = false;
    blocked_stage b;
    b.stage = s;
    b.op_index = pos[s];
    b.blocked = ops[pos[s]];
    const op& o = b.blocked;
    stage_index target = s;
    if (is_comm(o.kind)) {
      const auto partner = comm_partner(pl, s, o);
      bool ready = true;
      requirement first_missing{};
      for (const requirement& r : requirements_of(pl, s, o, lowered)) {
        if (!satisfied(r) && ready) {
          ready = false;
          first_missing = r;
        }
      }
      if (!ready) {
        target = first_missing.stage;
        b.waits_for = describe_requirement(pl, first_missing);
      } else {
        target = partner->stage;
        b.waits_for =
            "matching " + to_string(partner->o, true) + " on stage " + std::to_string(target);
      }
    } else {
      for (const requirement& r : requirements_of(pl, s, o, lowered)) {
        if (!satisfied(r)) {
          target = r.stage;
          b.waits_for = describe_requirement(pl, r);
          break;
        }
      }
    }
    b.waits_on_stage = target;
    if (pos[target] >= sched.ops(target).size()) {
      b.never_produced = true;
    } else {
      next[s] = target;
    }
    result.witness.stuck.push_back(std::move(b));
  }
  if (!result.complete) {
    // Follow wait-for edges from each stuck stage; the first revisit closes the cycle.
    std::vector<std::uint8_t> state(p, 0);  // 0 new, 1 on current path, 2 finished
    for (stage_index s0 = 0; s0 < p && result.witness.cycle.empty(); ++s0) {
      std::vector<stage_index> path;
      std::int64_t cur = s0;
      while (cur >= 0 && state[static_cast<std::size_t>(cur)] == 0) {
        state[static_cast<std::size_t>(cur)] = 1;
        path.push_back(static_cast<stage_index>(cur));
        cur = next[static_cast<std::size_t>(cur)];
      }
      if (cur >= 0 && state[static_cast<std::size_t>(cur)] == 1) {
        std::size_t k = 0;
        while (path[k] != static_cast<stage_index>(cur)) {
          ++k;
        }
        result.witness.cycle.assign(path.begin() + static_cast<std::ptrdiff_t>(k), path.end());
      }
      for (stage_index v : path) {
        state[v] = 2;
      }
    }
  }
  return result;
}

/// traverse() on a prebuilt plan (whose `lowered` must be sched.has_comm()) over a schedule or
/// an op_lists. Calls
/// `visit(stage, op_index, op, entry)` with the op's plan entry, or nullptr for an op with an
/// out-of-range chunk or micro-batch. Same order and result as traverse().
template <class Visitor, class Sched = schedule>
traversal_result traverse_planned(const Sched& sched, const traversal_plan& plan, Visitor&& visit) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const std::uint32_t v = pl.chunks();
  const bool lowered = plan.lowered();
  const event_index at{pl.total_chunks()};
  std::vector<std::uint8_t> done(std::size_t{pl.total_chunks()} * m, 0);
  std::vector<std::size_t> pos(p, 0);
  std::vector<std::vector<stage_index>> waiters(p);
  std::vector<char> queued(p, 1);
  std::vector<stage_index> work;
  work.reserve(p);
  for (stage_index s = p; s-- > 0;) {
    work.push_back(s);  // popped from the back: stage 0 first
  }
  // Locals, not members: stores into the byte-sized done flags may alias anything, and the
  // compiler would otherwise reload these after every one.
  std::uint8_t* const dn = done.data();
  const op_plan* const table = plan.data();

  auto entry = [&](stage_index s, const op& o) -> const op_plan& {
    return table[(std::size_t{s} * v + o.chunk) * op_kind_count + static_cast<std::size_t>(o.kind)];
  };
  // The first requirement of `e` not yet met for micro-batch mb, in requirements_of() order.
  auto first_missing = [&](const op_plan& e, microbatch_index mb) -> const op_plan::dep* {
    for (std::uint8_t k = 0; k < e.count; ++k) {
      if ((dn[at(e.deps[k].chunk, mb)] & e.deps[k].bit) == 0) {
        return &e.deps[k];
      }
    }
    return nullptr;
  };
  auto wake = [&](stage_index t) {
    for (stage_index w : waiters[t]) {
      if (!queued[w]) {
        queued[w] = 1;
        work.push_back(w);
      }
    }
    waiters[t].clear();
  };

  while (!work.empty()) {
    const stage_index s = work.back();
    work.pop_back();
    queued[s] = 0;
    const auto ops = sched.ops(s);
    const op* const list = ops.data();
    const std::size_t n = ops.size();
    const std::size_t first = pos[s];
    std::size_t i = first;
    while (i < n) {
      const op o = list[i];
      if (o.chunk >= v || o.mb >= m) {
        visit(s, i, o, static_cast<const op_plan*>(nullptr));
        ++i;
        continue;
      }
      const op_plan& e = entry(s, o);
      if (is_comm(o.kind)) {
        const auto partner = comm_partner(pl, s, o);
        if (!partner) {  // a transfer with no peer: nothing to pair with, run as a no-op
          visit(s, i, o, &e);
          ++i;
          continue;
        }
        if (first_missing(e, o.mb) != nullptr) {
          break;  // a local input not yet produced can never arrive: the stage is stuck
        }
        const stage_index t = partner->stage;
        const auto tops = sched.ops(t);
        if (t == s || pos[t] >= tops.size() || !(tops[pos[t]] == partner->o)) {
          waiters[t].push_back(s);
          break;
        }
        // The partner must itself be ready (a SEND waits for its local producer).
        const op to = tops[pos[t]];
        const op_plan& te = entry(t, to);
        if (first_missing(te, to.mb) != nullptr) {
          waiters[t].push_back(s);
          break;
        }
        visit(s, i, o, &e);
        visit(t, pos[t], to, &te);
        dn[at(e.own, o.mb)] |= e.produced;
        dn[at(te.own, to.mb)] |= te.produced;
        ++i;
        ++pos[t];
        wake(t);
        if (!queued[t]) {
          queued[t] = 1;
          work.push_back(t);
        }
        continue;
      }
      if (const op_plan::dep* d = first_missing(e, o.mb)) {
        waiters[d->stage].push_back(s);
        break;
      }
      visit(s, i, o, &e);
      dn[at(e.own, o.mb)] |= static_cast<std::uint8_t>(e.produced & ~events_withheld(o));
      ++i;
    }
    pos[s] = i;
    if (i != first) {
      wake(s);
    }
  }
  return traversal_outcome(sched, lowered, pos, done, at);
}

}  // namespace detail

/// Runs every stage's list in a dependency-respecting order without timing, calling
/// `visit(stage, op_index, op)` once per op when it may run (its requirements are done and,
/// for SEND/RECV, its partner is posted at the head of the peer stage's list: rendezvous).
/// Deterministic: stages are taken from a work stack (stage 0 first), each runs until it
/// blocks, and a blocked stage resumes after the stage it waits on progresses. Linear in the
/// number of ops for the placements pipesched builds. Ops with an out-of-range chunk or
/// micro-batch are visited as no-ops (they satisfy nothing).
/// Returns a deadlock witness when some stage can't reach the end of its list.
template <class Visitor>
traversal_result traverse(const schedule& sched, Visitor&& visit) {
  detail::require_traversable(sched, "traverse");
  const detail::traversal_plan plan(sched.layout(), sched.has_comm());
  return detail::traverse_planned(
      sched, plan,
      [&](stage_index s, std::size_t i, const op& o, const detail::op_plan*) { visit(s, i, o); });
}

}  // namespace pipesched
