#pragma once

// Faithful ports of the zero-bubble paper authors' published heuristics (Qi et al., ICLR 2024,
// arXiv 2401.10241, §3 and appendix; their public scheduler code, branch "arxiv"):
//   - published_zb_order (here): the automatic scheduler's greedy (one chunk per stage), one
//     run per combination of its three yes/no choices;
//   - published_zb_v_order (gen/detail/zb_v_published.hpp): the cost-aware ZB-V greedy (V
//     placement, two chunks), one run per fill_f / fill_b combination, retried with the
//     stages' bubbles approved until the largest bubble stops shrinking.
// Written here from the paper and the code's rules, decision for decision, so that both reach
// the authors' spans on every row of tests/data/zb_reference.json; zb_search keeps them as
// candidates, so its result is never worse than the published heuristics. Where the authors'
// code reads a time not yet set (their tables start at 0, or Python's index -1 reads the last
// entry), the port reads the same value: the decision must be theirs, even when odd. The order
// is what zb_search uses; it is re-timed by time_order, and the `span` below (their
// arithmetic) is kept only to prove the port.
// Generalised without changing a decision at uniform inputs: costs, T_comm and memory are
// per stage (and per chunk), and memory compares carry a tolerance relative to the memory
// quantities (never to times).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/gen/detail/zb_greedy.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched::detail {

/// The automatic scheduler's three yes/no choices (paper §3; all 8 are tried).
struct published_zb_flags {
  bool allow_bubble_before_first_b = false;  ///< warm-up F may end after the first B arrives
  bool prioritize_b = false;                 ///< a stage >= 2 F ahead may skip its F round
  bool no_bubble_greedy = true;              ///< fill a gap shorter than T_W with a W anyway
};

/// One run of a published heuristic.
struct published_order {
  bool ok = false;   ///< false where the authors' code raises or asserts, or when cut
  bool cut = false;  ///< stopped early: provably longer than the cut
  std::vector<std::vector<op>> ops;  ///< per stage
  /// The bits of published_zb_combination's index whose choice decided something in this
  /// run (4: allow, 2: prioritize, 1: greedy). A combination that differs from this run's
  /// only in unset bits makes the same decisions, so it need not run.
  unsigned used = 0;
  double span = 0.0;  ///< their objective, in their arithmetic (see above)
};

/// The 8 flag combinations in the authors' loop order (allow, prioritize, greedy; true
/// first). Their search keeps the first strictly shortest.
inline published_zb_flags published_zb_combination(unsigned i) {
  return {(i & 4u) == 0, (i & 2u) == 0, (i & 1u) == 0};
}

/// One run of the automatic scheduler's greedy (published_zb_order): its state and its passes,
/// named after the steps of the authors' loop. Counters and tables mirror theirs.
struct published_zb_run {
  const greedy_problem& pr;
  published_zb_flags fl;
  double cut;
  std::uint32_t p;
  std::uint32_t m;
  published_order out;
  std::vector<std::uint32_t> f, b, w;  ///< per stage: F, B, W placed so far
  std::vector<double> e, mem, bubble;  ///< per stage: end time, live memory, total bubble
  // End times by (stage, micro-batch), at(s, j); 0 until set, as in their tables.
  std::vector<double> tf, tb, tw;
  double max_bubble = 0.0;          // bubbles only grow, so the running max is theirs
  bool failed = false;              // where their code raises or asserts, or cut
  std::vector<std::uint32_t> need;  // per stage: the F to place this round

  published_zb_run(const greedy_problem& problem, published_zb_flags flags, double cut_at)
      : pr(problem),
        fl(flags),
        cut(cut_at),
        p(problem.pl.stages()),
        m(problem.m),
        f(p, 0),
        b(p, 0),
        w(p, 0),
        e(p, 0.0),
        mem(p, 0.0),
        bubble(p, 0.0),
        tf(std::size_t{p} * m, 0.0),
        tb(tf.size(), 0.0),
        tw(tf.size(), 0.0),
        need(p) {
    out.ops.resize(p);
    for (auto& l : out.ops) {
      l.reserve(std::size_t{3} * m);
    }
  }

  std::size_t at(stage_index s, std::uint32_t j) const noexcept { return std::size_t{s} * m + j; }
  double mem_of(stage_index s, op_kind k) const noexcept {
    return k == op_kind::forward ? pr.df[s] : k == op_kind::backward_input ? pr.db[s] : pr.dw[s];
  }
  double cost_of(stage_index s, op_kind k) const noexcept {
    return k == op_kind::forward ? pr.tf[s] : k == op_kind::backward_input ? pr.tb[s] : pr.tw[s];
  }
  bool fits(double have, double add, stage_index s) const noexcept {
    return have + add <= pr.avail[s] + pr.meps;
  }

  /// Their put(): the next op of kind k on stage s, at the earliest time its input allows.
  void put(stage_index s, op_kind k) {
    std::uint32_t& cnt = k == op_kind::forward ? f[s] : k == op_kind::backward_input ? b[s] : w[s];
    const double dm = mem_of(s, k);
    if (cnt >= m || !fits(mem[s], dm, s)) {
      failed = true;  // their put() asserts
      return;
    }
    const double c = cost_of(s, k);
    const double no_bubble = e[s] + c;
    double t = no_bubble;
    // max(end + c, input + T_comm + c) in their arithmetic is ready_time(end, ...) + c.
    if (k == op_kind::forward && s > 0) {
      t = ready_time(e[s], tf[at(s - 1, cnt)], pr.fcomm[s]) + c;
    }
    if (k == op_kind::backward_input && s + 1 < p) {
      t = ready_time(e[s], tb[at(s + 1, cnt)], pr.bcomm[s]) + c;
    }
    if (f[s] > 0) {
      bubble[s] += t - no_bubble;
      max_bubble = std::max(max_bubble, bubble[s]);
    }
    e[s] = t;
    (k == op_kind::forward ? tf : k == op_kind::backward_input ? tb : tw)[at(s, cnt)] = t;
    mem[s] += dm;
    out.ops[s].push_back(make_op(k, cnt));
    ++cnt;
    check_cut(s, t);
  }

  /// Stops the run when stage s, which just reached time t, already ends past the cut.
  void check_cut(stage_index s, double t) {
    const double rest =
        double(m - f[s]) * pr.tf[s] + double(m - b[s]) * pr.tb[s] + double(m - w[s]) * pr.tw[s];
    const double end = t + rest;
    if (pr.objective.primary(end - (tf[at(s, 0)] - pr.tf[s]), end) > cut + pr.eps) {
      failed = true;  // this stage alone already ends too late
      out.cut = true;
    }
  }

  /// Before an op whose input arrives at `arrive`: W while a whole one fits in the gap, then
  /// one more when the gap is shorter than T_W and (greedy) or (it would raise the max bubble).
  void fill_gap(stage_index s, double arrive) {
    while (w[s] < b[s] && e[s] + pr.tw[s] <= arrive) {
      put(s, op_kind::backward_weight);
    }
    if (w[s] < b[s] && e[s] < arrive) {
      if (arrive - e[s] <= max_bubble - bubble[s]) {
        out.used |= 1u;
        if (fl.no_bubble_greedy) {
          put(s, op_kind::backward_weight);
        }
      } else {
        put(s, op_kind::backward_weight);
      }
    }
  }

  /// W until the op's memory fits; false where they raise "Cannot fit memory".
  bool make_room(stage_index s, double add) {
    while (!fits(mem[s], add, s)) {
      if (w[s] >= b[s]) {
        return false;
      }
      put(s, op_kind::backward_weight);
    }
    return true;
  }

  /// Micro-batch 0: an F on every stage, then per stage its warm-up F and the first B.
  void first_round() {
    for (stage_index s = 0; s < p; ++s) {
      put(s, op_kind::forward);
    }
    count_warm_up();
    for (stage_index s = p; s-- > 0;) {
      for (std::uint32_t k = 0; k < need[s]; ++k) {
        put(s, op_kind::forward);
      }
      put(s, op_kind::backward_input);
    }
  }

  /// need[s]: the warm-up F per stage, counted backwards from when the first B can arrive,
  /// then trimmed so that no stage warms up as many as the stage before it.
  void count_warm_up() {
    double last_t = 0.0;
    for (stage_index s = p; s-- > 0;) {
      if (s == p - 1) {
        last_t = tf[at(s, 0)] + pr.tb[s];
        continue;
      }
      double mm = mem[s];
      double cost = e[s];
      const double comm = pr.bcomm[s];
      while (f[s] + need[s] < m && fits(mm, pr.mb[s], s)) {
        const bool stop_allow = cost + pr.tf[s] > last_t + comm;
        const bool stop_strict = cost >= last_t + comm;
        if (stop_allow != stop_strict) {
          out.used |= 4u;
        }
        if (fl.allow_bubble_before_first_b ? stop_allow : stop_strict) {
          break;
        }
        mm += pr.mb[s];
        cost += pr.tf[s];
        ++need[s];
      }
      last_t = std::max(cost, last_t + comm) + pr.tb[s];
    }
    for (stage_index s = 1; s < p; ++s) {
      while (need[s] > 0 && need[s] >= need[s - 1] && f[s] + need[s] < m) {
        --need[s];
      }
    }
  }

  /// need[s] for the F round, stages in order; a stage skips when the next one does.
  void choose_forwards() {
    for (stage_index s = 0; s < p; ++s) {
      if (f[s] >= m) {
        continue;
      }
      const bool ahead = s + 1 < p && f[s] >= f[s + 1] + 2;
      if (ahead) {
        out.used |= 2u;
      }
      if (!(ahead && fl.prioritize_b) || !waits_for_b(s)) {
        need[s] = 1;
      }
    }
    for (stage_index s = p - 1; s-- > 0;) {
      need[s] = std::min(need[s], need[s + 1]);
    }
  }

  /// prioritize_b, for a stage >= 2 F ahead of the next: whether it skips its F to let the
  /// next stage's B come first.
  bool waits_for_b(stage_index s) const {
    const double next_plus_fw = e[s + 1] + pr.tf[s + 1] + pr.tb[s + 1] + pr.bcomm[s];
    if (e[s] >= next_plus_fw) {
      return true;
    }
    double w_cost = 0.0;
    std::uint32_t w_cnt = 0;
    double mem_with_w = mem[s] + pr.mb[s];
    while (!fits(mem_with_w, 0.0, s) && w[s] + w_cnt < b[s]) {
      w_cost += pr.tw[s];
      mem_with_w -= pr.mw[s];
      ++w_cnt;
    }
    if (e[s] + pr.tf[s] + w_cost <= next_plus_fw) {
      return false;  // the F (and the W it needs) ends before the next stage's B is back
    }
    return next_plus_fw - e[s] <= max_bubble - bubble[s];  // waiting fits the bubble budget
  }

  /// The chosen F, stages in order, each after the W its memory or its input's gap calls for.
  void place_forwards() {
    for (stage_index s = 0; s < p && !failed; ++s) {
      if (need[s] == 0) {
        continue;
      }
      if (!make_room(s, pr.mb[s])) {
        failed = true;
        break;
      }
      if (s > 0) {
        fill_gap(s, tf[at(s - 1, f[s])] + pr.fcomm[s]);
      }
      put(s, op_kind::forward);
    }
  }

  /// Micro-batch i's B, last stage first; the first stage drains its W once its F are done.
  void place_backwards(std::uint32_t i) {
    for (stage_index s = p; s-- > 0 && !failed;) {
      if (b[s] != i || !make_room(s, -(pr.mb[s] - pr.mw[s]))) {
        failed = true;
        break;
      }
      if (s + 1 < p) {
        fill_gap(s, tb[at(s + 1, i)] + pr.bcomm[s]);
      }
      if (s == 0 && f[s] == m) {
        while (w[s] < b[s]) {
          put(s, op_kind::backward_weight);
        }
      }
      put(s, op_kind::backward_input);
    }
  }

  /// The remaining W, stage by stage.
  void drain_weights() {
    for (stage_index s = 0; s < p && !failed; ++s) {
      while (w[s] < m && !failed) {
        put(s, op_kind::backward_weight);
      }
    }
  }

  /// Their objective: the largest span (first F's start to last W's end).
  double span() const {
    double out_span = 0.0;
    for (stage_index s = 0; s < p; ++s) {
      out_span = std::max(out_span, tw[at(s, m - 1)] - tf[at(s, 0)] + pr.tf[s]);
    }
    return out_span;
  }
};

/// The automatic scheduler's greedy for one flag combination. pr must have one chunk per
/// stage (sequential placement). With a finite `cut` the run stops (ok false, `cut` set)
/// as soon as its objective (pr.objective's primary: the span or the makespan) is sure to
/// exceed it: some stage's end so far plus its remaining work (less its start, for the span).
/// The decisions up to that point are the authors'.
inline published_order published_zb_order(const greedy_problem& pr,
                                          published_zb_flags fl,
                                          double cut = std::numeric_limits<double>::infinity()) {
  published_zb_run r(pr, fl, cut);
  for (std::uint32_t i = 0; i < r.m && !r.failed; ++i) {
    std::fill(r.need.begin(), r.need.end(), 0u);
    if (i == 0) {
      r.first_round();
      continue;
    }
    r.choose_forwards();
    r.place_forwards();
    r.place_backwards(i);
  }
  r.drain_weights();
  r.out.ok = !r.failed;
  if (r.out.ok) {
    r.out.span = r.span();
  }
  return std::move(r.out);
}

}  // namespace pipesched::detail
