#pragma once

// The zero-bubble authors' cost-aware ZB-V greedy, ported decision for decision (the rules of
// the port are in gen/detail/zb_published.hpp's opening comment, beside the automatic
// scheduler's greedy): published_zb_v_order, one run per fill_f / fill_b combination, retried
// with the stages' bubbles approved until the largest bubble stops shrinking.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/gen/detail/zb_greedy.hpp"
#include "pipesched/gen/detail/zb_published.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched::detail {

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
