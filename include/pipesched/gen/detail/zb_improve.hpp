#pragma once

// Local search over per-stage orders: the improvement phase of zb_search. Starting from the
// best order the heuristics found, it repeatedly re-times the order (time_order), walks the
// critical path of each stage that sets the objective (the longest, or for the makespan the
// last to end) back to its start, and tries the moves that can shorten
// it: swap two adjacent ops on the path whose order is what makes the later one wait (job
// shop's critical-block neighbourhood), and move a W that sits on the path later into an
// idle slot. A move is kept when the order stays valid (time_order completes: no deadlock),
// fits the memory limit, and the objective — the search's (longest stage span then makespan,
// or makespan then span: search_objective), then the sum of stage spans (so ties among
// several longest stages still make progress) — strictly improves. Deterministic: moves are tried
// in a fixed order and the budget counts evaluations, never time (a time budget, when given, only
// cuts the search short).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/gen/detail/zb_greedy.hpp"
#include "pipesched/ir/detail/splitmix.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched::detail {

/// What the improvement phase may spend and what it did.
struct improve_budget {
  std::size_t evaluations = 0;  ///< candidate orders timed at most (0: none)
  double milliseconds = 0.0;    ///< wall-clock cap, 0 for none (makes the result timing-dependent)
};
struct improve_stats {
  std::size_t evaluations = 0;  ///< candidate orders timed
  std::size_t accepted = 0;     ///< moves kept
  bool converged = false;       ///< stopped at a local optimum (not at the budget)
};

/// What the local search compares (smaller is better): the search's objective
/// (search_objective: span and makespan, in its order), then the sum of stage spans, then
/// where the idle sits.
struct order_score {
  double span = 0.0;
  double makespan = 0.0;
  double span_sum = 0.0;
  /// Σ over idle gaps of length × start: larger means the idle sits later, where pending W
  /// can fill it. Last in the order, so a move that only pushes a gap later is progress (and
  /// the search cannot cycle), and the next move can then fill it.
  double idle_moment = 0.0;
  bool better_than(const order_score& o, const search_objective& obj, double eps) const noexcept {
    if (obj.better(span, makespan, o.span, o.makespan, eps)) {
      return true;
    }
    if (obj.better(o.span, o.makespan, span, makespan, eps)) {
      return false;
    }
    if (span_sum < o.span_sum - eps) {
      return true;
    }
    if (span_sum > o.span_sum + eps) {
      return false;
    }
    return idle_moment > o.idle_moment * (1.0 + 1e-12) + eps;
  }
};

class order_improver {
 public:
  explicit order_improver(const greedy_problem& pr) : pr_(pr), meps_(pr.meps) {}

  /// Improves `ops` in place; returns what it did. Descends to a local optimum, then
  /// (iterated local search) kicks the best order with a few random moves from a fixed-seed
  /// generator and descends again, keeping the best, until the budget is spent.
  improve_stats run(std::vector<std::vector<op>>& ops, const improve_budget& budget) {
    improve_stats st;
    const auto t0 = std::chrono::steady_clock::now();
    auto out_of_budget = [&]() {
      if (st.evaluations >= budget.evaluations) {
        return true;
      }
      if (budget.milliseconds <= 0.0) {
        return false;
      }
      const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - t0;
      return d.count() > budget.milliseconds;
    };
    order_score best;
    if (!score(ops, start_, best)) {
      return st;  // the input must be a valid order; leave it alone otherwise
    }
    std::vector<std::vector<op>> cur = ops;
    order_score cur_score = best;
    std::uint64_t rng = 0x9e3779b97f4a7c15ull;
    bool first = true;
    // Rounds are capped too, so a problem with no valid move cannot spin without evaluating.
    for (std::size_t round = 0; round <= budget.evaluations && !out_of_budget(); ++round) {
      if (!first) {
        // Kick: one or two moves of the best order's own neighbourhood, taken even when they
        // do not improve (a neutral move often opens the gap that a second move then fills),
        // kept when the order stays valid and within memory; then descend again.
        cur = ops;
        score(cur, start_, cur_score);
        const int want = 1 + int(splitmix64(rng) % 2);
        int kicks = 0;
        for (int tries = 0; tries < 16 && kicks < want && !out_of_budget(); ++tries) {
          collect_moves(cur, cur_score, moves_);
          if (moves_.empty()) {
            break;
          }
          const move mv = moves_[std::size_t(splitmix64(rng) % moves_.size())];
          trial_ = cur;
          if (!apply(trial_, mv) || !fits_memory(trial_)) {
            continue;
          }
          ++st.evaluations;
          order_score sc;
          if (!score(trial_, tstart_, sc)) {
            continue;
          }
          cur.swap(trial_);
          start_.swap(tstart_);
          cur_score = sc;
          ++kicks;
        }
        if (kicks == 0) {
          continue;
        }
      }
      first = false;
      const bool done = descend(cur, cur_score, st, out_of_budget);
      if (cur_score.better_than(best, pr_.objective, pr_.eps)) {
        best = cur_score;
        ops = cur;
        ++st.accepted;
      }
      (void)done;
    }
    st.converged = !out_of_budget();
    return st;
  }

 private:
  /// First-improvement descent from `ops` (whose times are in start_). Returns true at a
  /// local optimum, false when the budget ran out.
  template <class OutOfBudget>
  bool descend(std::vector<std::vector<op>>& ops,
               order_score& cur,
               improve_stats& st,
               OutOfBudget&& out_of_budget) {
    for (;;) {
      collect_moves(ops, cur, moves_);
      bool improved = false;
      for (const move& mv : moves_) {
        if (out_of_budget()) {
          return false;
        }
        trial_ = ops;
        if (!apply(trial_, mv)) {
          continue;
        }
        ++st.evaluations;
        order_score sc;
        if (!fits_memory(trial_) || !score(trial_, tstart_, sc) ||
            !sc.better_than(cur, pr_.objective, pr_.eps)) {
          continue;
        }
        ops.swap(trial_);
        start_.swap(tstart_);
        cur = sc;
        improved = true;
        break;  // re-derive the critical paths of the new order
      }
      if (!improved) {
        return true;
      }
    }
  }

  /// Move: take the op at (stage, from) and insert it so that it ends at index `to` of the
  /// stage's list (to > from moves it later).
  /// A move on one stage's list. `insert`: take the op at `from` and re-insert it at index
  /// `to`. The shifts change a stage's whole rhythm from index `from` on, which single
  /// swaps cannot do one step at a time without first getting worse: `b_earlier` moves every
  /// B at or after `from` one slot before the F preceding it (one warm-up F fewer),
  /// `b_later` one slot after the F following it (one more); `w_earlier` / `w_later` do the
  /// same for every W against the op next to it (W delayed by one micro-batch less / more).
  enum class move_kind : std::uint8_t { insert, b_earlier, b_later, w_earlier, w_later };
  struct move {
    stage_index s;
    std::uint32_t from, to;
    move_kind kind = move_kind::insert;
  };

  double dur(stage_index s, const op& o) const noexcept {
    return pr_.op_time(std::size_t{s} * pr_.pl.chunks() + o.chunk, o.kind, o.mb);
  }

  bool score(const std::vector<std::vector<op>>& ops,
             std::vector<std::vector<double>>& start,
             order_score& sc) const {
    const order_times t = time_order(pr_, ops, start);
    if (!t.complete) {
      return false;
    }
    sc.span = t.max_span;
    sc.makespan = t.makespan;
    sc.span_sum = 0.0;
    sc.idle_moment = 0.0;
    for (stage_index s = 0; s < ops.size(); ++s) {
      const auto& l = ops[s];
      if (l.empty()) {
        continue;
      }
      sc.span_sum += start[s].back() + dur(s, l.back()) - start[s].front();
      for (std::size_t k = 1; k < l.size(); ++k) {
        const double end = start[s][k - 1] + dur(s, l[k - 1]);
        if (start[s][k] > end + pr_.eps) {
          sc.idle_moment += (start[s][k] - end) * end;
        }
      }
    }
    return true;
  }

  // What the ops hold stays within each stage's budget: the memory engine's running sum.
  bool fits_memory(const std::vector<std::vector<op>>& ops) const {
    for (stage_index s = 0; s < ops.size(); ++s) {
      const double cap = pr_.avail[s] + meps_;
      if (!walk_live_memory(ops[s], 0.0, pr_.deltas[s],
                            [cap](std::size_t, double value) { return value <= cap; })) {
        return false;
      }
    }
    return true;
  }

  static bool apply(std::vector<std::vector<op>>& ops, const move& mv) {
    if (mv.kind != move_kind::insert) {
      return shift(ops[mv.s], mv);
    }
    auto& l = ops[mv.s];
    if (mv.from == mv.to || mv.from >= l.size() || mv.to >= l.size()) {
      return false;
    }
    const op x = l[mv.from];
    // Same-kind ops of a chunk keep micro-batch order; a W stays after its B, an F before
    // its own B (the timing would reject those as deadlocks; this just skips them cheaply).
    if (mv.to > mv.from) {
      for (std::uint32_t k = mv.from + 1; k <= mv.to; ++k) {
        if (l[k].chunk == x.chunk && (l[k].kind == x.kind || (l[k].mb == x.mb))) {
          return false;
        }
      }
      std::rotate(l.begin() + mv.from, l.begin() + mv.from + 1, l.begin() + mv.to + 1);
    } else {
      for (std::uint32_t k = mv.to; k < mv.from; ++k) {
        if (l[k].chunk == x.chunk && (l[k].kind == x.kind || (l[k].mb == x.mb))) {
          return false;
        }
      }
      std::rotate(l.begin() + mv.to, l.begin() + mv.from, l.begin() + mv.from + 1);
    }
    return true;
  }

  static bool shift(std::vector<op>& l, const move& mv) {
    const op_kind k = mv.kind == move_kind::b_earlier || mv.kind == move_kind::b_later
                          ? op_kind::backward_input
                          : op_kind::backward_weight;
    const bool earlier = mv.kind == move_kind::b_earlier || mv.kind == move_kind::w_earlier;
    const std::size_t n = l.size();
    bool changed = false;
    if (earlier) {
      // Left to right: each op of kind k hops over the op before it when that one is an F
      // (for B) or any non-W (for W) that is not its own predecessor.
      for (std::size_t i = std::max<std::size_t>(mv.from, 1); i < n; ++i) {
        if (l[i].kind != k) {
          continue;
        }
        const op& before = l[i - 1];
        const bool hop = k == op_kind::backward_input ? before.kind == op_kind::forward
                                                      : before.kind != op_kind::backward_weight;
        if (hop && !(before.chunk == l[i].chunk && before.mb == l[i].mb)) {
          std::swap(l[i - 1], l[i]);
          changed = true;
        }
      }
    } else {
      for (std::size_t i = n; i-- > mv.from;) {
        if (l[i].kind != k || i + 1 >= n) {
          continue;
        }
        const op& after = l[i + 1];
        const bool hop = k == op_kind::backward_input ? after.kind == op_kind::forward
                                                      : after.kind != op_kind::backward_weight;
        if (hop && !(after.chunk == l[i].chunk && after.mb == l[i].mb)) {
          std::swap(l[i], l[i + 1]);
          changed = true;
        }
      }
    }
    return changed;
  }

  /// Moves from the critical path of every stage that sets the objective (the longest, or the
  /// last to end; then of every stage, for the tie-breaks), nearest the path's end first.
  void collect_moves(const std::vector<std::vector<op>>& ops,
                     const order_score& cur,
                     std::vector<move>& out) {
    out.clear();
    const std::uint32_t p = pr_.pl.stages();
    const std::uint32_t v = pr_.pl.chunks();
    const std::uint32_t m = pr_.m;
    // Where each F and B is: (stage, index) by (global chunk, micro-batch).
    const std::size_t cells = std::size_t{pr_.pl.total_chunks()} * m;
    fpos_.assign(cells, npos_);
    bpos_.assign(cells, npos_);
    for (stage_index s = 0; s < p; ++s) {
      for (std::uint32_t k = 0; k < ops[s].size(); ++k) {
        const op& o = ops[s][k];
        const std::size_t cell = std::size_t{pr_.gl[std::size_t{s} * v + o.chunk]} * m + o.mb;
        if (o.kind == op_kind::forward) {
          fpos_[cell] = pack(s, k);
        } else if (o.kind == op_kind::backward_input) {
          bpos_[cell] = pack(s, k);
        }
      }
    }
    // Each stage's share of the objective: its span, or its end for the makespan.
    std::vector<stage_index> order;
    std::vector<double> key(p, 0.0);
    for (stage_index s = 0; s < p; ++s) {
      if (!ops[s].empty()) {
        const double end = start_[s].back() + dur(s, ops[s].back());
        key[s] = pr_.objective.primary(end - start_[s].front(), end);
        order.push_back(s);
      }
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](stage_index a, stage_index b) { return key[a] > key[b]; });
    // The shifts, for every stage, from its first B and first W on.
    for (stage_index s = 0; s < p; ++s) {
      std::uint32_t fb = npos32_, fw = npos32_;
      for (std::uint32_t k = 0; k < ops[s].size(); ++k) {
        if (fb == npos32_ && ops[s][k].kind == op_kind::backward_input) {
          fb = k;
        }
        if (fw == npos32_ && ops[s][k].kind == op_kind::backward_weight) {
          fw = k;
        }
      }
      if (fb != npos32_) {
        out.push_back({s, fb, 0, move_kind::b_earlier});
        out.push_back({s, fb, 0, move_kind::b_later});
      }
      if (fw != npos32_) {
        out.push_back({s, fw, 0, move_kind::w_earlier});
        out.push_back({s, fw, 0, move_kind::w_later});
      }
    }
    seen_.assign(cells * 3, 0);
    for (stage_index s0 : order) {
      if (key[s0] < pr_.objective.primary(cur.span, cur.makespan) - pr_.eps && !out.empty()) {
        break;  // the stages that set the objective first; the others when those give nothing
      }
      walk(ops, s0, std::uint32_t(ops[s0].size() - 1), out);
    }
  }

  /// Walks the critical path back from (s, k), adding the moves of every stage arc on it.
  void walk(const std::vector<std::vector<op>>& ops,
            stage_index s,
            std::uint32_t k,
            std::vector<move>& out) {
    const std::uint32_t v = pr_.pl.chunks();
    const std::uint32_t m = pr_.m;
    for (;;) {
      const op& o = ops[s][k];
      const std::size_t i = std::size_t{s} * v + o.chunk;
      const std::size_t cell = std::size_t{pr_.gl[i]} * m + o.mb;
      const std::size_t key = cell * 3 + std::size_t(o.kind == op_kind::forward          ? 0
                                                     : o.kind == op_kind::backward_input ? 1
                                                                                         : 2);
      if (seen_[key]) {
        return;
      }
      seen_[key] = 1;
      const double st = start_[s][k];
      // Machine arc: the previous op on the stage ends exactly when this one starts.
      const bool machine = k > 0 && start_[s][k - 1] + dur(s, ops[s][k - 1]) >= st - pr_.eps;
      if (machine) {
        const op& prev = ops[s][k - 1];
        out.push_back({s, k, k - 1});  // this op one earlier (swap)
        if (prev.kind == op_kind::backward_weight) {
          // The W delays this op: push it later, to each of the next few slots.
          const std::uint32_t last = std::uint32_t(ops[s].size() - 1);
          for (std::uint32_t to = k; to <= std::min(last, k + 6); ++to) {
            out.push_back({s, k - 1, to});
          }
        } else if (k >= 2) {
          out.push_back({s, k, k - 2});  // two earlier
        }
        --k;
        continue;
      }
      if (k > 0) {
        // An idle gap before this op: bring forward the next op of each kind (and chunk)
        // that could fill it.
        std::uint32_t found = 0;
        const std::uint32_t want = 3 * v;
        std::uint32_t mask = 0;
        for (std::uint32_t j = k + 1; j < ops[s].size() && found < want; ++j) {
          const op& x = ops[s][j];
          const std::uint32_t bit =
              1u << (x.chunk * 3 + std::uint32_t(x.kind == op_kind::forward          ? 0
                                                 : x.kind == op_kind::backward_input ? 1
                                                                                     : 2));
          if ((mask & bit) == 0) {
            mask |= bit;
            ++found;
            out.push_back({s, j, k});
          }
        }
      }
      // Input arc (or the stage's start): follow the producer on its stage.
      std::uint64_t at = npos_;
      if (o.kind == op_kind::forward && pr_.prev[i] != greedy_problem::npos) {
        at = fpos_[cell - m];
      } else if (o.kind == op_kind::backward_input && pr_.next[i] != greedy_problem::npos) {
        at = bpos_[cell + m];
      }
      if (at == npos_) {
        return;
      }
      const stage_index ps = stage_index(at >> 32);
      const std::uint32_t pk = std::uint32_t(at & 0xffffffffu);
      if (ps == s) {
        return;  // same-stage producer, already a machine-order predecessor
      }
      s = ps;
      k = pk;
    }
  }

  static std::uint64_t pack(stage_index s, std::uint32_t k) noexcept {
    return (std::uint64_t(s) << 32) | k;
  }

  const greedy_problem& pr_;
  double meps_;
  std::vector<std::vector<double>> start_, tstart_;
  std::vector<std::vector<op>> trial_;
  std::vector<move> moves_;
  std::vector<std::uint64_t> fpos_, bpos_;
  std::vector<char> seen_;
  static constexpr std::uint64_t npos_ = ~std::uint64_t{0};
  static constexpr std::uint32_t npos32_ = ~std::uint32_t{0};
};

}  // namespace pipesched::detail
