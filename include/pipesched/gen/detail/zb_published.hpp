#pragma once

// Faithful ports of the zero-bubble paper authors' published heuristics (Qi et al., ICLR 2024,
// arXiv 2401.10241, §3 and appendix; their public scheduler code, branch "arxiv"):
//   - published_zb_order: the automatic scheduler's greedy (one chunk per stage), one run per
//     combination of its three yes/no choices;
//   - published_zb_v_order: the cost-aware ZB-V greedy (V placement, two chunks), one run per
//     fill_f / fill_b combination, retried with the stages' bubbles approved until the
//     largest bubble stops shrinking.
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

/// The cost-aware ZB-V greedy for one (fill_f, fill_b) pair, with the authors' retries: run
/// with no approved bubbles, then again with each run's per-stage bubbles approved while the
/// largest bubble strictly shrinks; the run with the smallest largest bubble is kept. pr
/// must have the V placement (two chunks; local chunk 0 is global chunk s, 1 is 2p−1−s).
/// `span` is the largest stage bubble plus the stage's busy time (their m·2·(F+B+W)).
inline published_order published_zb_v_order(const greedy_problem& pr, bool fill_f, bool fill_b);

namespace zbv {

/// One try_v_schedule run. Indices follow the authors': cat 0 F, 1 B, 2 W; for F, chunk c is
/// local chunk c; for B and W, chunk c is local chunk 1−c (their B chunk 0 is the V's second
/// leg, whose B runs first).
class run {
 public:
  run(const greedy_problem& pr, bool fill_f, bool fill_b, const std::vector<double>* approved)
      : pr_(pr),
        p_(pr.pl.stages()),
        m_(pr.m),
        fill_f_(fill_f),
        fill_b_(fill_b),
        meps_(pr.meps),
        count_(std::size_t{p_} * 6, 0),
        end_(std::size_t{6} * p_ * m_, -1.0),
        cur_(p_, 0.0),
        mem_(p_, 0.0),
        bubble_(p_, 0.0),
        pending_(p_),
        approved_(approved) {
    ops.resize(p_);
    if (p_ > 1) {
      link_comm_ = pr.fcomm[2];  // stage 1's chunk-0 input crosses the first link
    }
    if (approved_ != nullptr) {
      max_approved_ = *std::max_element(approved_->begin(), approved_->end());
    }
  }

  std::vector<std::vector<op>> ops;
  bool ok = true;
  double max_bubble = 0.0;
  const std::vector<double>& stage_bubble() const noexcept { return bubble_; }

  void go() {
    warm_up();
    for (std::uint32_t it = 0; it < 2 * m_ && ok; ++it) {
      b_round();
      if (ok) {
        f_round();
      }
    }
    for (stage_index s = 0; s < p_ && ok; ++s) {
      while (!pending_[s].empty() && ok) {
        put_w(s);
      }
    }
    for (double x : bubble_) {
      max_bubble = std::max(max_bubble, x);
    }
  }

 private:
  std::size_t id(int cat, int chunk, stage_index s, std::uint32_t mb) const noexcept {
    return ((std::size_t(cat) * 2 + std::size_t(chunk)) * p_ + s) * m_ + mb;
  }
  /// Their end_time[fa_id], where fa_id == -1 reads the table's last entry.
  double end_at(std::ptrdiff_t fa) const noexcept {
    return fa >= 0 ? end_[std::size_t(fa)] : end_.back();
  }
  std::uint32_t& count(stage_index s, int k) noexcept {
    return count_[std::size_t{s} * 6 + std::size_t(k)];
  }
  chunk_index local(int cat, int chunk) const noexcept {
    return chunk_index(cat == 0 ? chunk : 1 - chunk);
  }
  std::size_t cell(stage_index s, int cat, int chunk) const noexcept {
    return std::size_t{s} * 2 + local(cat, chunk);
  }
  double cost(int cat, int chunk, stage_index s) const noexcept {
    const std::size_t i = cell(s, cat, chunk);
    return cat == 0 ? pr_.tf[i] : cat == 1 ? pr_.tb[i] : pr_.tw[i];
  }
  double memd(int cat, int chunk, stage_index s) const noexcept {
    const std::size_t i = cell(s, cat, chunk);
    return cat == 0 ? pr_.df[i] : cat == 1 ? pr_.db[i] : pr_.dw[i];
  }
  double comm(int cat, int chunk, stage_index s) const noexcept {
    const std::size_t i = cell(s, cat, chunk);
    return cat == 0 ? pr_.fcomm[i] : pr_.bcomm[i];
  }
  bool fits(stage_index s, double add) const noexcept {
    return mem_[s] + add <= pr_.avail[s] + meps_;
  }
  double max_stage_bubble(stage_index s) const noexcept {
    double mx = bubble_max_;
    if (approved_ != nullptr) {  // none: their approvals are all −1, which adds nothing
      mx = std::max(mx, max_approved_ - (*approved_)[s]);
    }
    return mx;
  }

  void put(int cat, int chunk, stage_index s) {
    if (!ok) {
      return;
    }
    std::uint32_t& cnt = count(s, cat * 2 + chunk);
    const double dm = memd(cat, chunk, s);
    if (cnt >= m_ || !fits(s, dm)) {
      ok = false;
      return;
    }
    const double c = cost(cat, chunk, s);
    const double no_bubble = cur_[s] + c;
    double t = no_bubble;
    if (cat < 2) {
      const bool up = chunk == 1;  // input from the next stage (F of the V's second leg, or B)
      if (up && s + 1 < p_) {
        const double pe = end_[id(cat, chunk, s + 1, cnt)];
        if (pe < 0.0) {
          ok = false;  // their put() asserts
          return;
        }
        t = ready_time(cur_[s], pe, comm(cat, chunk, s)) + c;
      }
      if (!up && s > 0) {
        const double pe = end_[id(cat, chunk, s - 1, cnt)];
        if (pe < 0.0) {
          ok = false;
          return;
        }
        t = ready_time(cur_[s], pe, comm(cat, chunk, s)) + c;
      }
    }
    if (count(s, 0) > 0) {
      bubble_[s] += t - no_bubble;
      bubble_max_ = std::max(bubble_max_, bubble_[s]);  // bubbles only grow: the running max
    }
    end_[id(cat, chunk, s, cnt)] = t;
    cur_[s] = t;
    mem_[s] += dm;
    ops[s].push_back(make_op(cat == 0   ? op_kind::forward
                             : cat == 1 ? op_kind::backward_input
                                        : op_kind::backward_weight,
                             cnt, local(cat, chunk)));
    if (cat == 1) {
      pending_[s].push_back(chunk);
    }
    ++cnt;
  }
  void put_w(stage_index s) {
    if (pending_[s].empty()) {
      ok = false;
      return;
    }
    const int chunk = pending_[s].front();
    pending_[s].pop_front();
    put(2, chunk, s);
  }
  /// Before an op whose input comes from fa: W into the gap (their "fill the bubble").
  void fill(stage_index s, std::ptrdiff_t fa, int chunk, bool is_b) {
    // With no producer on another stage (fa < 0) their code still adds T_comm: the link's.
    const double c = fa >= 0 ? comm(is_b ? 1 : 0, chunk, s) : link_comm_;
    while (ok && !pending_[s].empty() && fa >= 0 &&
           end_at(fa) + c >= cur_[s] + pr_.tw[cell(s, 2, pending_[s].front())]) {
      put_w(s);
    }
    if (ok && !pending_[s].empty() && end_at(fa) + c - cur_[s] > max_stage_bubble(s) - bubble_[s]) {
      if (is_b ? (chunk == 1 || fill_b_) : fill_f_) {
        put_w(s);
      }
    }
  }

  void warm_up() {
    for (stage_index s = 0; s < p_; ++s) {
      put(0, 0, s);
    }
    for (stage_index s = p_; s-- > 0 && ok;) {
      if (s == p_ - 1) {
        put(0, 1, s);
        continue;
      }
      const double tmp = end_[id(0, 1, s + 1, 0)] + comm(0, 1, s);
      while (ok &&
             mem_[s] + pr_.mb[std::size_t{s} * 2] * double(2 + s * 2) <= pr_.avail[s] + meps_ &&
             cur_[s] + pr_.tf[std::size_t{s} * 2] <= tmp && count(s, 0) < m_) {
        for (stage_index j = 0; j <= s; ++j) {
          put(0, 0, j);
        }
      }
      put(0, 1, s);
    }
    int chunk = 0;
    for (stage_index s = 1; s < p_ && ok; ++s) {
      while (ok && count(s, 0) + count(s, 1) < count(s - 1, 0) + count(s - 1, 1)) {
        for (stage_index j = p_; j-- > s;) {
          if (count(j, chunk) < m_) {
            put(0, chunk, j);
          }
        }
        chunk = 1 - chunk;
      }
    }
  }

  void b_round() {
    for (stage_index s = 0; s < p_ && ok; ++s) {
      while (ok && !fits(s, memd(1, 0, s))) {
        put_w(s);
      }
    }
    b0_.clear();
    b1_.clear();
    for (stage_index s = 0; s < p_; ++s) {
      if (count(s, 3) >= count(s, 2)) {
        b0_.push_back(s);
      } else if (s == p_ - 1) {
        b1_.push_back(s);
      } else if (end_[id(1, 1, s + 1, count(s, 3))] >= 0.0 || count(s, 2) >= m_) {
        b1_.push_back(s);
      } else {
        b0_.push_back(s);
      }
    }
    order_.clear();
    for (auto it = b1_.rbegin(); it != b1_.rend(); ++it) {
      order_.push_back({*it, 1});
    }
    for (stage_index s : b0_) {
      order_.push_back({s, 0});
    }
    for (const auto& [s, chunk] : order_) {
      if (!ok) {
        return;
      }
      std::ptrdiff_t fa = -1;
      if (chunk == 1 && s + 1 < p_) {
        fa = std::ptrdiff_t(id(1, 1, s + 1, count(s, 3)));
      }
      if (chunk == 0 && s > 0) {
        fa = std::ptrdiff_t(id(1, 0, s - 1, count(s, 2)));
      }
      fill(s, fa, chunk, true);
      put(1, chunk, s);
    }
  }

  void f_round() {
    for (stage_index s = 0; s < p_ && ok; ++s) {
      if (count(s, 1) >= m_) {
        continue;
      }
      int item = -1;
      if (count(s, 1) >= count(s, 0)) {
        item = 0;
      } else if (s == p_ - 1) {
        item = 1;
      } else if (end_[id(0, 1, s + 1, count(s, 1))] >= 0.0) {
        item = 1;
      } else if (count(s, 0) < m_) {
        if (s == 0 || end_[id(0, 0, s - 1, count(s, 0))] >= 0.0) {
          item = 0;
        }
      }
      if (item < 0) {
        continue;
      }
      while (ok && !fits(s, memd(0, item, s))) {
        put_w(s);
      }
      std::ptrdiff_t fa = -1;
      if (item == 0 && s > 0) {
        fa = std::ptrdiff_t(id(0, 0, s - 1, count(s, 0)));
      }
      if (item == 1 && s + 1 < p_) {
        fa = std::ptrdiff_t(id(0, 1, s + 1, count(s, 1)));
      }
      fill(s, fa, item, false);
      put(0, item, s);
    }
  }

  const greedy_problem& pr_;
  std::uint32_t p_, m_;
  bool fill_f_, fill_b_;
  double meps_;
  std::vector<std::uint32_t> count_;
  std::vector<double> end_;
  std::vector<double> cur_, mem_, bubble_;
  std::vector<std::deque<int>> pending_;
  const std::vector<double>* approved_;
  double max_approved_ = -1.0;
  double bubble_max_ = 0.0;  // max of bubble_ (O(1) per op rather than a pass over the stages)
  double link_comm_ = 0.0;
  std::vector<stage_index> b0_, b1_;
  struct slot {
    stage_index s;
    int chunk;
  };
  std::vector<slot> order_;
};

}  // namespace zbv

inline published_order published_zb_v_order(const greedy_problem& pr, bool fill_f, bool fill_b) {
  double busy = 0.0;  // their expected time: a stage's whole work (uniform in their code)
  for (stage_index s = 0; s < pr.pl.stages(); ++s) {
    double t = 0.0;
    for (std::size_t i = std::size_t{s} * 2; i < std::size_t{s} * 2 + 2; ++i) {
      t += double(pr.m) * (pr.tf[i] + pr.tb[i] + pr.tw[i]);
    }
    busy = std::max(busy, t);
  }
  published_order out;
  zbv::run first(pr, fill_f, fill_b, nullptr);
  first.go();
  if (!first.ok) {
    return out;
  }
  out.ok = true;
  out.ops = std::move(first.ops);
  double best = first.max_bubble;
  // Retry with the last run's bubbles approved while the largest bubble strictly shrinks.
  std::vector<double> approved = first.stage_bubble();
  for (;;) {
    zbv::run next(pr, fill_f, fill_b, &approved);
    next.go();
    if (!next.ok || !(next.max_bubble < best)) {
      break;
    }
    best = next.max_bubble;
    approved = next.stage_bubble();
    out.ops = std::move(next.ops);
  }
  out.span = busy + best;
  return out;
}

}  // namespace pipesched::detail
