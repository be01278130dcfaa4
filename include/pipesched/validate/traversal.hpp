#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/detail/key_table.hpp"
#include "pipesched/ir/schedule.hpp"

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

  /// One line: "deadlock: stage 0 blocked at op 4 (B1) waiting for ... -> cycle 0 -> 1 -> 0".
  std::string describe() const {
    std::string out = "deadlock:";
    for (const auto& b : stuck) {
      bool on_cycle = false;
      for (stage_index c : cycle) {
        on_cycle = on_cycle || c == b.stage;
      }
      if (!cycle.empty() && !on_cycle) {
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
  }
  return std::string(what) + std::to_string(r.mb) + " of chunk " +
         std::to_string(pl.local_of(r.chunk)) + " on stage " + std::to_string(r.stage);
}

}  // namespace detail

/// Runs every stage's list in a dependency-respecting order without timing, calling
/// `visit(stage, op_index, op)` once per op when it may run (its requirements are done and,
/// for SEND/RECV, its partner is posted at the head of the peer stage's list: rendezvous).
/// Deterministic. Linear in the number of ops for the placements pipesched builds. Ops with an
/// out-of-range chunk or micro-batch are visited as no-ops (they satisfy nothing).
/// Returns a deadlock witness when some stage can't reach the end of its list.
template <class Visitor>
traversal_result traverse(const schedule& sched, Visitor&& visit) {
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const bool lowered = sched.has_comm();
  // Sparse when p*v*m dwarfs the op count (see key_table).
  detail::key_table<std::uint8_t> done(std::uint64_t{pl.total_chunks()} * m, sched.size());
  std::vector<std::size_t> pos(p, 0);
  std::vector<std::vector<stage_index>> waiters(p);
  std::vector<char> queued(p, 1);
  std::vector<stage_index> work;
  work.reserve(p);
  for (stage_index s = p; s-- > 0;) {
    work.push_back(s);  // popped from the back: stage 0 first
  }

  auto in_range = [&](const op& o) { return o.chunk < pl.chunks() && o.mb < m; };
  auto satisfied = [&](const requirement& r) {
    return (done.get(std::uint64_t{r.chunk} * m + r.mb) & event_bit(r.what)) != 0;
  };
  auto complete = [&](stage_index s, const op& o) {
    if (in_range(o)) {
      done.slot(std::uint64_t{pl.global(s, o.chunk)} * m + o.mb) |= events_produced(o.kind);
    }
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
    bool progressed = false;
    while (pos[s] < ops.size()) {
      const op& o = ops[pos[s]];
      if (!in_range(o)) {
        visit(s, pos[s], o);
        ++pos[s];
        progressed = true;
        continue;
      }
      if (is_comm(o.kind)) {
        const auto partner = comm_partner(pl, s, o);
        if (!partner) {  // a transfer with no peer: nothing to pair with, run as a no-op
          visit(s, pos[s], o);
          ++pos[s];
          progressed = true;
          continue;
        }
        bool ready = true;
        for (const requirement& r : requirements_of(pl, s, o, lowered)) {
          ready = ready && satisfied(r);
        }
        const stage_index t = partner->stage;
        const auto tops = sched.ops(t);
        if (!ready) {
          break;  // a local input not yet produced can never arrive: the stage is stuck
        }
        if (t == s || pos[t] >= tops.size() || !(tops[pos[t]] == partner->o)) {
          waiters[t].push_back(s);
          break;
        }
        // The partner must itself be ready (a SEND waits for its local producer).
        bool partner_ready = true;
        for (const requirement& r : requirements_of(pl, t, tops[pos[t]], lowered)) {
          partner_ready = partner_ready && satisfied(r);
        }
        if (!partner_ready) {
          waiters[t].push_back(s);
          break;
        }
        visit(s, pos[s], o);
        visit(t, pos[t], tops[pos[t]]);
        complete(s, o);
        complete(t, tops[pos[t]]);
        ++pos[s];
        ++pos[t];
        progressed = true;
        wake(t);
        if (!queued[t]) {
          queued[t] = 1;
          work.push_back(t);
        }
        continue;
      }
      // Copied, not pointed to: the list returned by requirements_of() is a temporary.
      std::optional<requirement> missing;
      for (const requirement& r : requirements_of(pl, s, o, lowered)) {
        if (!satisfied(r)) {
          missing = r;
          break;
        }
      }
      if (missing) {
        waiters[missing->stage].push_back(s);
        break;
      }
      visit(s, pos[s], o);
      complete(s, o);
      ++pos[s];
      progressed = true;
    }
    if (progressed) {
      wake(s);
    }
  }

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
        b.waits_for = detail::describe_requirement(pl, first_missing);
      } else {
        target = partner->stage;
        b.waits_for =
            "matching " + to_string(partner->o, true) + " on stage " + std::to_string(target);
      }
    } else {
      for (const requirement& r : requirements_of(pl, s, o, lowered)) {
        if (!satisfied(r)) {
          target = r.stage;
          b.waits_for = detail::describe_requirement(pl, r);
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

}  // namespace pipesched
