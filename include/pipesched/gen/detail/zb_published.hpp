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

/// The automatic scheduler's greedy for one flag combination. pr must have one chunk per
/// stage (sequential placement). With a finite `cut` the run stops (ok false, `cut` set)
/// as soon as its objective (pr.objective's primary: the span or the makespan) is sure to
/// exceed it: some stage's end so far plus its remaining work (less its start, for the span).
/// The decisions up to that point are the authors'.
inline published_order published_zb_order(const greedy_problem& pr,
                                          published_zb_flags fl,
                                          double cut = std::numeric_limits<double>::infinity()) {
  const std::uint32_t p = pr.pl.stages();
  const std::uint32_t m = pr.m;
  const double meps = pr.meps;
  published_order out;
  out.ops.resize(p);
  for (auto& l : out.ops) {
    l.reserve(std::size_t{3} * m);
  }
  std::vector<std::uint32_t> f(p, 0), b(p, 0), w(p, 0);
  std::vector<double> e(p, 0.0), mem(p, 0.0), bubble(p, 0.0);
  // End times by (stage, micro-batch); 0 until set, as in their tables.
  std::vector<double> tf(std::size_t{p} * m, 0.0), tb(tf.size(), 0.0), tw(tf.size(), 0.0);
  double max_bubble = 0.0;  // bubbles only grow, so the running max is theirs
  auto mem_of = [&](stage_index s, op_kind k) {
    return k == op_kind::forward ? pr.df[s] : k == op_kind::backward_input ? pr.db[s] : pr.dw[s];
  };
  auto cost_of = [&](stage_index s, op_kind k) {
    return k == op_kind::forward ? pr.tf[s] : k == op_kind::backward_input ? pr.tb[s] : pr.tw[s];
  };
  auto fits = [&](double have, double add, stage_index s) {
    return have + add <= pr.avail[s] + meps;
  };
  bool failed = false;
  auto put = [&](stage_index s, op_kind k) {
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
      t = ready_time(e[s], tf[std::size_t{s - 1} * m + cnt], pr.fcomm[s]) + c;
    }
    if (k == op_kind::backward_input && s + 1 < p) {
      t = ready_time(e[s], tb[std::size_t{s + 1} * m + cnt], pr.bcomm[s]) + c;
    }
    if (f[s] > 0) {
      bubble[s] += t - no_bubble;
      max_bubble = std::max(max_bubble, bubble[s]);
    }
    e[s] = t;
    (k == op_kind::forward          ? tf
     : k == op_kind::backward_input ? tb
                                    : tw)[std::size_t{s} * m + cnt] = t;
    mem[s] += dm;
    out.ops[s].push_back(make_op(k, cnt));
    ++cnt;
    const double rest =
        double(m - f[s]) * pr.tf[s] + double(m - b[s]) * pr.tb[s] + double(m - w[s]) * pr.tw[s];
    const double end = t + rest;
    if (pr.objective.primary(end - (tf[std::size_t{s} * m] - pr.tf[s]), end) > cut + pr.eps) {
      failed = true;  // this stage alone already ends too late
      out.cut = true;
    }
  };
  // Before an op whose input arrives at `arrive`: W while a whole one fits in the gap, then
  // one more when the gap is shorter than T_W and (greedy) or (it would raise the max bubble).
  auto fill_gap = [&](stage_index s, double arrive) {
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
  };
  // W until the op's memory fits; false where they raise "Cannot fit memory".
  auto make_room = [&](stage_index s, double need) {
    while (!fits(mem[s], need, s)) {
      if (w[s] >= b[s]) {
        return false;
      }
      put(s, op_kind::backward_weight);
    }
    return true;
  };
  std::vector<std::uint32_t> need(p);
  for (std::uint32_t i = 0; i < m && !failed; ++i) {
    std::fill(need.begin(), need.end(), 0u);
    if (i == 0) {
      for (stage_index s = 0; s < p; ++s) {
        put(s, op_kind::forward);
      }
      // Warm-up F per stage, backwards from when the first B can arrive.
      double last_t = 0.0;
      for (stage_index s = p; s-- > 0;) {
        if (s == p - 1) {
          last_t = tf[std::size_t{s} * m] + pr.tb[s];
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
      for (stage_index s = p; s-- > 0;) {
        for (std::uint32_t k = 0; k < need[s]; ++k) {
          put(s, op_kind::forward);
        }
        put(s, op_kind::backward_input);
      }
      continue;
    }
    // F round, stages in order; a stage skips when the next one does.
    for (stage_index s = 0; s < p; ++s) {
      if (f[s] >= m) {
        continue;
      }
      if (s + 1 < p && f[s] >= f[s + 1] + 2) {
        out.used |= 2u;
      }
      if (s + 1 < p && f[s] >= f[s + 1] + 2 && fl.prioritize_b) {
        const double next_plus_fw = e[s + 1] + pr.tf[s + 1] + pr.tb[s + 1] + pr.bcomm[s];
        if (e[s] >= next_plus_fw) {
          continue;
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
          need[s] = 1;
          continue;
        }
        if (next_plus_fw - e[s] <= max_bubble - bubble[s]) {
          continue;  // waiting costs no more than the bubble budget
        }
      }
      need[s] = 1;
    }
    for (stage_index s = p - 1; s-- > 0;) {
      need[s] = std::min(need[s], need[s + 1]);
    }
    for (stage_index s = 0; s < p && !failed; ++s) {
      if (need[s] == 0) {
        continue;
      }
      if (!make_room(s, pr.mb[s])) {
        failed = true;
        break;
      }
      if (s > 0) {
        fill_gap(s, tf[std::size_t{s - 1} * m + f[s]] + pr.fcomm[s]);
      }
      put(s, op_kind::forward);
    }
    // B round, last stage first.
    for (stage_index s = p; s-- > 0 && !failed;) {
      if (b[s] != i || !make_room(s, -(pr.mb[s] - pr.mw[s]))) {
        failed = true;
        break;
      }
      if (s + 1 < p) {
        fill_gap(s, tb[std::size_t{s + 1} * m + i] + pr.bcomm[s]);
      }
      if (s == 0 && f[s] == m) {
        while (w[s] < b[s]) {
          put(s, op_kind::backward_weight);
        }
      }
      put(s, op_kind::backward_input);
    }
  }
  for (stage_index s = 0; s < p && !failed; ++s) {
    while (w[s] < m && !failed) {
      put(s, op_kind::backward_weight);
    }
  }
  if (failed) {
    out.ok = false;
    return out;
  }
  out.ok = true;
  for (stage_index s = 0; s < p; ++s) {
    out.span =
        std::max(out.span, tw[std::size_t{s} * m + m - 1] - tf[std::size_t{s} * m] + pr.tf[s]);
  }
  return out;
}

}  // namespace pipesched::detail
