#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched::detail {

/// One chunk per stage, split B/W, flattened for the exact search (index: stage).
struct exact_problem {
  std::uint32_t p = 0;
  std::uint32_t m = 0;
  std::vector<double> tf, tb, tw;
  std::vector<double> fcomm;  ///< latency of stage s's F input (from s−1); 0 on stage 0
  std::vector<double> bcomm;  ///< latency of stage s's B input (from s+1); 0 on the last stage
  std::vector<chunk_memory> sizes;  ///< M_B, M_W per stage (counted with held_after)
  std::vector<double> avail;        ///< limit − static memory + the rounding tolerance
  /// Start of F0 on each stage. It is every stage's first op and waits only for the F0 chain,
  /// so it is the same in every order: the stage span's fixed origin.
  std::vector<double> first;
  std::vector<std::uint32_t> live;  ///< most activations a stage holds at once (bound only)
  /// Per (stage, mb j): W that every order runs on the stage before F_j (memory), and for
  /// each W_i the first F that needs it (m when none).
  std::vector<std::uint32_t> w_need, w_first;
  double eps = 1e-9;  ///< an order counts as shorter only by more than this
};

/// The flattened problem for one chunk per stage; `limits` per stage, static memory included.
inline exact_problem make_exact_problem(const shaped_params& params,
                                        const std::vector<double>& limits) {
  exact_problem pr;
  const std::uint32_t p = params.stages;
  const std::uint32_t m = params.microbatches;
  pr.p = p;
  pr.m = m;
  double scale = 0.0;
  for (stage_index s = 0; s < p; ++s) {
    const op_costs& t = params.costs.at(s);
    pr.tf.push_back(t.forward);
    pr.tb.push_back(t.backward_input);
    pr.tw.push_back(t.backward_weight);
    pr.fcomm.push_back(s == 0 ? 0.0 : params.costs.comm(s - 1, s));
    pr.bcomm.push_back(s + 1 == p ? 0.0 : params.costs.comm(s + 1, s));
    const chunk_memory& cm = params.memory.at(s);
    pr.sizes.push_back(cm);
    // A relative tolerance in memory units: the memory checker accepts at least as much.
    pr.avail.push_back(limits[s] - params.memory.static_memory(s) + 1e-9 * limits[s]);
    std::uint32_t live = 0;
    while (live < m && held_after(live + 1, 0, 0, cm) <= pr.avail.back()) {
      ++live;
    }
    pr.live.push_back(std::max(live, 1u));
    // With b B done before F_j (at least j + 1 − live), the fewest W done that leave room for
    // its activation; the least over b is needed whatever the order.
    for (std::uint32_t j = 0; j < m; ++j) {
      std::uint32_t need = j + 1;
      for (std::uint32_t b = j + 1 > pr.live.back() ? j + 1 - pr.live.back() : 0; b <= j; ++b) {
        std::uint32_t w = 0;
        while (w < b && held_after(j + 1, b, w, cm) > pr.avail.back()) {
          ++w;
        }
        need = std::min(need, w);
      }
      pr.w_need.push_back(need);
    }
    for (std::uint32_t i = 0; i < m; ++i) {
      std::uint32_t j = 0;
      while (j < m && pr.w_need[std::size_t{s} * m + j] <= i) {
        ++j;
      }
      pr.w_first.push_back(j);
    }
    pr.first.push_back(s == 0 ? 0.0 : pr.first.back() + pr.tf[s - 1] + pr.fcomm[s]);
    scale =
        std::max({scale, t.forward, t.backward_input, t.backward_weight, pr.fcomm[s], pr.bcomm[s]});
  }
  pr.eps = 1e-9 * scale;
  return pr;
}

/// Where the search stops.
struct exact_limits {
  std::uint64_t nodes = 0;  ///< 0: no limit
  double ms = 0.0;          ///< 0: no limit
  bool dominance = true;
  std::size_t memo_bytes = std::size_t{256} << 20;
};

/// Depth-first branch and bound over per-stage op lists in which F, B and W each run in
/// micro-batch order. A node extends the list of the free stage whose last timed op ends
/// first (ties: lower stage) by its next F, B or W. An op whose input is not timed yet stays
/// pending on its stage (the stage is blocked) until the producer is timed, so every set of
/// lists is reached by exactly one path and each op is timed once, incrementally, under the
/// docs/model.md §3 model. Prunes, all exact: each cut order has a no-worse one that the search
/// keeps or that is cut in turn by a rule pointing further back (it lies in the subtree of the
/// node that cut it or of the ancestor that placed the W a W rule is about; for dominance, of
/// the node searched before, which shares the bans):
/// - bound: per stage, one machine with release dates (earliest-release order is optimal for
///   it) over the ops still to time; releases from the producer chains and the ops the stage
///   must run first (its earlier F and B, and the B and W memory needs before an F);
/// - deadlines: to beat the incumbent every stage must end by its first start + that span,
///   which gives each op a latest end (the ops its stage runs after it, its consumer on the
///   next stage, the F its memory blocks); a stage whose ops cannot meet them on one machine
///   even preemptively (earliest-deadline-first, exact for that relaxation) is cut. Stronger
///   than the bound when a stage cannot both feed the next stage and answer the previous one;
/// - gap: an F or B that waits at least T_W while a W is ready is cut: the W first ends by the
///   time it starts, frees memory earlier and leaves the rest no later;
/// - W then X, where X (F or B) could have started when the W did: X first is no worse (it
///   ends sooner, the W ends when X did; for an F only when memory allowed it), so after a W
///   the stage's next F / B must not be one that was ready then (the ban, kept per stage);
/// - dominance: nodes with the same F / B counts, pending ops and bans are compared on the
///   times the future depends on (each stage's end, and the end + T_comm of every F / B
///   produced but not yet consumed, raised to its consumer's end) and on W done (more is no
///   worse: a W dropped from a list delays nothing); one no later everywhere than a node
///   already searched is cut. The timing is monotone, so its completions are no better.
class exact_search {
 public:
  exact_search(const exact_problem& pr, const exact_limits& lim) : pr_(pr), lim_(lim) {
    const std::uint32_t p = pr_.p;
    bits_ = static_cast<unsigned>(std::bit_width(pr_.m));
    depth_max_ = std::size_t{3} * p * pr_.m;
    pool_.resize(3 * (depth_max_ + 2));
    for (state& s : pool_) {
      s.n.assign(std::size_t{3} * p, 0);
      s.pend.assign(p, 0);
      s.ban.assign(p, 0);
      s.e.assign(p, 0.0);
      s.fend.assign(std::size_t{p} * pr_.m, 0.0);
      s.bend.assign(std::size_t{p} * pr_.m, 0.0);
    }
    fe_.resize(std::size_t{p} * pr_.m);
    be_.resize(std::size_t{p} * pr_.m);
    df_.resize(std::size_t{p} * pr_.m);
    db_.resize(std::size_t{p} * pr_.m);
  }

  /// Bits a node's counts need; the memo key holds 256.
  static std::size_t key_bits(std::uint32_t p, std::uint32_t m) {
    return std::size_t{p} * (2 * static_cast<std::size_t>(std::bit_width(m)) + 4);
  }

  /// Looks for an order with a span shorter than `incumbent` by more than eps; stops early
  /// when one reaches `floor` (nothing can be shorter) or a limit is hit.
  void run(double incumbent, double floor) {
    best_ = incumbent;
    floor_ = floor;
    start_ = std::chrono::steady_clock::now();
    if (best_ <= floor_ + pr_.eps) {
      return;  // the incumbent is at the bound: proven without a node
    }
    dfs(0, 0);
  }

  bool improved() const noexcept { return !best_ops_.empty(); }
  /// True when the search was cut by a node or time limit (the result is then not proven).
  bool exhausted() const noexcept { return exhausted_; }
  double best_span() const noexcept { return best_; }
  const std::vector<std::vector<op>>& best_ops() const noexcept { return best_ops_; }
  std::uint64_t nodes() const noexcept { return nodes_; }
  std::uint64_t dominated() const noexcept { return dominated_; }
  std::uint64_t bounded() const noexcept { return bounded_; }
  std::size_t memo_states() const noexcept { return memo_states_; }

 private:
  struct state {
    std::vector<std::uint8_t> n;     // per stage: F, B, W placed (a pending op included)
    std::vector<std::uint8_t> pend;  // per stage: 1 + kind of an op waiting for its input
    std::vector<std::uint8_t> ban;   // per stage: bit k, the next F / B must not be of kind k
    std::vector<double> e;           // per stage: end of its last timed op
    std::vector<double> fend, bend;  // per (stage, mb): end of a timed F / B
  };
  struct key {
    std::array<std::uint64_t, 4> w{};
    friend bool operator==(const key&, const key&) = default;
  };
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      std::uint64_t h = 0x9e3779b97f4a7c15ull;
      for (std::uint64_t x : k.w) {
        h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
      }
      return static_cast<std::size_t>(h);
    }
  };
  struct bucket {
    std::vector<double> t;  // entries of one length, back to back
    std::uint32_t next = 0;
  };
  static constexpr std::size_t bucket_cap = 16;

  std::uint32_t count(const state& st, stage_index s, int k) const {
    return st.n[std::size_t{3} * s + static_cast<std::size_t>(k)];
  }
  bool f_timed(const state& st, stage_index s, std::uint32_t j) const {
    const std::uint32_t nf = count(st, s, 0);
    return j < nf && !(st.pend[s] == 1 && j + 1 == nf);
  }
  bool b_timed(const state& st, stage_index s, std::uint32_t j) const {
    const std::uint32_t nb = count(st, s, 1);
    return j < nb && !(st.pend[s] == 2 && j + 1 == nb);
  }

  // Times the last op of kind k placed on stage s, its input ready at `ready`.
  bool time_op(state& st, stage_index s, int k, double ready) const {
    if (k != 2) {
      const int w_ready = int(count(st, s, 1)) - (k == 1 ? 1 : 0) - int(count(st, s, 2));
      if (w_ready > 0 && ready >= st.e[s] + pr_.tw[s]) {
        return false;  // gap rule: the W first is no worse
      }
    }
    const double dur = k == 0 ? pr_.tf[s] : (k == 1 ? pr_.tb[s] : pr_.tw[s]);
    const double end = std::max(st.e[s], ready) + dur;  // ready: input_arrival, or 0
    st.e[s] = end;
    const std::size_t cell = std::size_t{s} * pr_.m + count(st, s, k) - 1;
    if (k == 0) {
      st.fend[cell] = end;
    } else if (k == 1) {
      st.bend[cell] = end;
    }
    return true;
  }

  // The kinds (bit 0 F, bit 1 B) whose next op stage s could start at once, before a W it
  // runs now: after W, W, ..., such an op X is dominated by X first (it ends sooner, the W
  // end when X did, memory allowing). Without T_W nothing is gained; the gap rule then wins.
  std::uint8_t ready_now(const state& st, stage_index s, bool f_fits) const {
    if (!(pr_.tw[s] > 0.0)) {
      return 0;
    }
    const std::uint32_t m = pr_.m;
    const std::uint32_t nf = count(st, s, 0);
    const std::uint32_t nb = count(st, s, 1);
    std::uint8_t out = 0;
    if (f_fits &&
        (s == 0 || (f_timed(st, s - 1, nf) && input_arrival(st.fend[std::size_t{s - 1} * m + nf],
                                                            pr_.fcomm[s]) <= st.e[s]))) {
      out |= 1u;
    }
    if (nb < nf && (s + 1 == pr_.p ||
                    (b_timed(st, s + 1, nb) && input_arrival(st.bend[std::size_t{s + 1} * m + nb],
                                                             pr_.bcomm[s]) <= st.e[s]))) {
      out |= 2u;
    }
    return out;
  }

  // Appends the next op of kind k to stage s and times whatever became timeable; false when
  // a prune rule rejects the result.
  bool apply(state& st, stage_index s, int k) const {
    const std::uint32_t m = pr_.m;
    const std::uint32_t j = st.n[std::size_t{3} * s + static_cast<std::size_t>(k)]++;
    if (k == 0) {
      if (s == 0) {
        if (!time_op(st, s, 0, 0.0)) {
          return false;
        }
      } else if (f_timed(st, s - 1, j)) {
        if (!time_op(st, s, 0, input_arrival(st.fend[std::size_t{s - 1} * m + j], pr_.fcomm[s]))) {
          return false;
        }
      } else {
        st.pend[s] = 1;
      }
    } else if (k == 1) {
      if (s + 1 == pr_.p) {
        if (!time_op(st, s, 1, st.fend[std::size_t{s} * m + j])) {
          return false;
        }
      } else if (b_timed(st, s + 1, j)) {
        if (!time_op(st, s, 1, input_arrival(st.bend[std::size_t{s + 1} * m + j], pr_.bcomm[s]))) {
          return false;
        }
      } else {
        st.pend[s] = 2;
      }
    } else if (!time_op(st, s, 2, st.bend[std::size_t{s} * m + j])) {
      return false;
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (stage_index t = 0; t < pr_.p; ++t) {
        if (st.pend[t] == 1) {
          const std::uint32_t i = count(st, t, 0) - 1;
          if (f_timed(st, t - 1, i)) {
            st.pend[t] = 0;
            if (!time_op(st, t, 0,
                         input_arrival(st.fend[std::size_t{t - 1} * m + i], pr_.fcomm[t]))) {
              return false;
            }
            changed = true;
          }
        } else if (st.pend[t] == 2) {
          const std::uint32_t i = count(st, t, 1) - 1;
          if (b_timed(st, t + 1, i)) {
            st.pend[t] = 0;
            if (!time_op(st, t, 1,
                         input_arrival(st.bend[std::size_t{t + 1} * m + i], pr_.bcomm[t]))) {
              return false;
            }
            changed = true;
          }
        }
      }
    }
    return true;
  }

  // Earliest end, on stage s from its end, of its untimed F below `a`, B below `b` and W below
  // `w` (w <= b), each from its release (earliest release first is optimal for one machine).
  // fe_ / be_ must hold those ops' bounds.
  double prefix_end(
      const state& st, stage_index s, std::uint32_t a, std::uint32_t b, std::uint32_t w) const {
    const std::size_t base = std::size_t{s} * pr_.m;
    std::uint32_t jf = count(st, s, 0) - (st.pend[s] == 1 ? 1u : 0u);
    std::uint32_t jb = count(st, s, 1) - (st.pend[s] == 2 ? 1u : 0u);
    std::uint32_t jw = count(st, s, 2);
    constexpr double inf = std::numeric_limits<double>::infinity();
    double t = st.e[s];
    while (jf < a || jb < b || jw < w) {
      const double rf = jf < a ? fe_[base + jf] - pr_.tf[s] : inf;
      const double rb = jb < b ? be_[base + jb] - pr_.tb[s] : inf;
      const double rw = jw < w ? be_[base + jw] : inf;
      if (rf <= rb && rf <= rw) {
        t = std::max(t, rf) + pr_.tf[s];
        ++jf;
      } else if (rb <= rw) {
        t = std::max(t, rb) + pr_.tb[s];
        ++jb;
      } else {
        t = std::max(t, rw) + pr_.tw[s];
        ++jw;
      }
    }
    return t;
  }

  // A lower bound on the span of every completion of st.
  double bound(const state& st) {
    const std::uint32_t p = pr_.p;
    const std::uint32_t m = pr_.m;
    for (std::uint32_t j = 0; j < m; ++j) {
      for (stage_index s = 0; s < p; ++s) {
        const std::size_t c = std::size_t{s} * m + j;
        if (f_timed(st, s, j)) {
          fe_[c] = st.fend[c];
          continue;
        }
        double r = s == 0 ? std::max(st.e[s], 0.0) : ready_time(st.e[s], fe_[c - m], pr_.fcomm[s]);
        if (j > 0) {
          r = std::max(r, fe_[c - 1]);
        }
        if (pr_.live[s] <= j) {
          r = std::max(r, be_[c - pr_.live[s]]);
        }
        // Before it on the stage: the earlier F and, for memory, B up to j − live and the W
        // the memory needs.
        r = std::max(
            r, prefix_end(st, s, j, j + 1 > pr_.live[s] ? j + 1 - pr_.live[s] : 0, pr_.w_need[c]));
        fe_[c] = r + pr_.tf[s];
      }
      for (stage_index s = p; s-- > 0;) {
        const std::size_t c = std::size_t{s} * m + j;
        if (b_timed(st, s, j)) {
          be_[c] = st.bend[c];
          continue;
        }
        double r = std::max(st.e[s], fe_[c]);
        if (s + 1 < p) {
          r = ready_time(r, be_[c + m], pr_.bcomm[s]);
        }
        if (j > 0) {
          r = std::max(r, be_[c - 1]);
        }
        r = std::max(r, prefix_end(st, s, j + 1, j, 0));  // F up to j and the earlier B first
        be_[c] = r + pr_.tb[s];
      }
    }
    double lb = floor_;
    for (stage_index s = 0; s < p; ++s) {
      // Every untimed op of the stage, earliest release first.
      lb = std::max(lb, prefix_end(st, s, m, m, m) - pr_.first[s]);
    }
    return lb;
  }

  // Whether st may still beat the incumbent, judged by deadlines. Every stage must end by its
  // first start + best − eps; an op must leave time for the ops its stage runs after it (all
  // later F, B and W of its kind's chain) and for its consumer on the next stage (+ T_comm),
  // and a B must free memory for the F `live` later. With those latest ends and bound()'s
  // earliest starts (fe_ / be_), each stage's untimed ops must fit one machine; the
  // preemptive earliest-deadline-first schedule meets every deadline whenever any order does
  // (Jackson), so a miss rules the node out. It catches what bound() cannot: a stage that
  // cannot both feed the next stage's F in time and return the B the previous stage needs.
  bool meets_deadlines(const state& st) {
    if (!(best_ < std::numeric_limits<double>::infinity())) {
      return true;
    }
    const std::uint32_t p = pr_.p;
    const std::uint32_t m = pr_.m;
    const double target = best_ - pr_.eps;
    for (std::uint32_t j = m; j-- > 0;) {
      const double later = double(m - 1 - j);
      for (stage_index s = 0; s < p; ++s) {
        const std::size_t c = std::size_t{s} * m + j;
        // After B_j: B_{j+1..}, W_{j..}.
        double d = pr_.first[s] + target - later * pr_.tb[s] - (later + 1.0) * pr_.tw[s];
        if (s > 0) {
          d = std::min(d, db_[c - m] - pr_.tb[s - 1] - pr_.bcomm[s - 1]);
        }
        if (j + pr_.live[s] < m) {
          d = std::min(d, df_[c + pr_.live[s]] - pr_.tf[s]);
        }
        db_[c] = d;
      }
      for (stage_index s = p; s-- > 0;) {
        const std::size_t c = std::size_t{s} * m + j;
        // After F_j: F_{j+1..}, B_{j..} (B_j itself last), W_{j..}.
        double d = std::min(db_[c] - pr_.tb[s], pr_.first[s] + target - later * pr_.tf[s] -
                                                    (later + 1.0) * (pr_.tb[s] + pr_.tw[s]));
        if (s + 1 < p) {
          d = std::min(d, df_[c + m] - pr_.tf[s + 1] - pr_.fcomm[s + 1]);
        }
        df_[c] = d;
      }
    }
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (stage_index s = 0; s < p; ++s) {
      const std::size_t base = std::size_t{s} * m;
      const double end = pr_.first[s] + target;
      jobs_.clear();
      for (std::uint32_t j = 0; j < m; ++j) {
        if (!f_timed(st, s, j)) {
          jobs_.push_back({fe_[base + j] - pr_.tf[s], df_[base + j], pr_.tf[s]});
        } else if (st.fend[base + j] > df_[base + j]) {
          return false;
        }
        if (!b_timed(st, s, j)) {
          jobs_.push_back({be_[base + j] - pr_.tb[s], db_[base + j], pr_.tb[s]});
        } else if (st.bend[base + j] > db_[base + j]) {
          return false;
        }
        if (j >= count(st, s, 2)) {
          double d = end - double(m - 1 - j) * pr_.tw[s];
          if (pr_.w_first[base + j] < m) {
            d = std::min(d, df_[base + pr_.w_first[base + j]] - pr_.tf[s]);
          }
          jobs_.push_back({std::max(be_[base + j], st.e[s]), d, pr_.tw[s]});
        }
      }
      double t = st.e[s];
      for (std::size_t left = jobs_.size(); left > 0;) {
        // The released job with the earliest deadline runs until it ends or a release comes.
        std::size_t pick = jobs_.size();
        double next_release = inf;
        for (std::size_t i = 0; i < jobs_.size(); ++i) {
          const job& x = jobs_[i];
          if (x.left < 0.0) {
            continue;  // done
          }
          if (x.release > t) {
            next_release = std::min(next_release, x.release);
          } else if (pick == jobs_.size() || x.deadline < jobs_[pick].deadline) {
            pick = i;
          }
        }
        if (pick == jobs_.size()) {
          t = next_release;
          continue;
        }
        job& x = jobs_[pick];
        if (t + x.left <= next_release) {
          t += x.left;
          if (t > x.deadline) {
            return false;
          }
          x.left = -1.0;
          --left;
        } else {
          x.left -= next_release - t;
          t = next_release;
        }
      }
    }
    return true;
  }

  // True when a node reached before is no later everywhere; else records st.
  bool dominated(const state& st) {
    const std::uint32_t p = pr_.p;
    const std::uint32_t m = pr_.m;
    key k;
    std::size_t bit = 0;
    auto put = [&](std::uint64_t v, unsigned width) {
      k.w[bit / 64] |= v << (bit % 64);
      if (bit % 64 + width > 64) {
        k.w[bit / 64 + 1] |= v >> (64 - bit % 64);
      }
      bit += width;
    };
    for (stage_index s = 0; s < p; ++s) {
      put(count(st, s, 0), bits_);
      put(count(st, s, 1), bits_);
      put(st.pend[s], 2);
      put(st.ban[s], 2);
    }
    // More W done is no worse (dropping a W from a list delays nothing and frees memory):
    // W counts are compared as times are, negated.
    times_.clear();
    for (stage_index s = 0; s < p; ++s) {
      times_.push_back(-double(count(st, s, 2)));
    }
    times_.insert(times_.end(), st.e.begin(), st.e.end());
    for (stage_index s = 0; s + 1 < p; ++s) {
      for (std::uint32_t j = count(st, s + 1, 0); j < count(st, s, 0); ++j) {
        if (f_timed(st, s, j)) {
          times_.push_back(
              ready_time(st.e[s + 1], st.fend[std::size_t{s} * m + j], pr_.fcomm[s + 1]));
        }
      }
      for (std::uint32_t j = count(st, s, 1); j < count(st, s + 1, 1); ++j) {
        if (b_timed(st, s + 1, j)) {
          times_.push_back(ready_time(st.e[s], st.bend[std::size_t{s + 1} * m + j], pr_.bcomm[s]));
        }
      }
    }
    const std::size_t len = times_.size();
    auto it = memo_.find(k);
    if (it == memo_.end()) {
      if (memo_used_ + 96 + 8 * len > lim_.memo_bytes) {
        return false;
      }
      memo_used_ += 96 + 8 * len;
      ++memo_states_;
      memo_.emplace(k, bucket{times_, 0});
      return false;
    }
    // One pass: an entry no later everywhere prunes st (and moves to the front, where the
    // next lookups find it first); entries st is no later than everywhere are dropped.
    std::vector<double>& t = it->second.t;
    std::size_t n = t.size() / len;
    const auto at = [&](std::size_t i) { return t.begin() + static_cast<std::ptrdiff_t>(i * len); };
    for (std::size_t i = 0; i < n;) {
      const double* a = t.data() + i * len;
      bool a_le = true;
      bool t_le = true;
      for (std::size_t x = 0; x < len && (a_le || t_le); ++x) {
        a_le = a_le && a[x] <= times_[x];
        t_le = t_le && times_[x] <= a[x];
      }
      if (a_le) {
        if (i > 0) {
          std::swap_ranges(at(0), at(1), at(i));
        }
        t.resize(n * len);
        return true;
      }
      if (t_le) {
        --n;
        std::copy(at(n), at(n + 1), at(i));
        memo_used_ -= 8 * len;
        --memo_states_;
      } else {
        ++i;
      }
    }
    t.resize(n * len);
    if (n < bucket_cap) {
      if (memo_used_ + 8 * len <= lim_.memo_bytes) {
        memo_used_ += 8 * len;
        ++memo_states_;
        t.insert(t.end(), times_.begin(), times_.end());
      }
    } else {
      const std::size_t i = it->second.next++ % bucket_cap;
      std::copy(times_.begin(), times_.end(), t.begin() + static_cast<std::ptrdiff_t>(i * len));
    }
    return false;
  }

  bool out_of_budget() {
    if (lim_.nodes != 0 && nodes_ >= lim_.nodes) {
      return true;
    }
    if (lim_.ms > 0.0 && nodes_ % 1024 == 0) {
      const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - start_;
      return d.count() >= lim_.ms;
    }
    return false;
  }

  void dfs(std::size_t level, std::size_t slot) {
    if (stop_) {
      return;
    }
    if (out_of_budget()) {
      stop_ = exhausted_ = true;
      return;
    }
    ++nodes_;
    const state& st = pool_[3 * level + slot];
    const std::uint32_t p = pr_.p;
    const std::uint32_t m = pr_.m;
    stage_index s = p;
    bool all_done = true;
    for (stage_index t = 0; t < p; ++t) {
      if (count(st, t, 2) == m) {
        continue;
      }
      all_done = false;
      if (st.pend[t] == 0 && (s == p || st.e[t] < st.e[s])) {
        s = t;
      }
    }
    if (all_done) {
      double span = 0.0;
      for (stage_index t = 0; t < p; ++t) {
        span = std::max(span, st.e[t] - pr_.first[t]);
      }
      if (span < best_ - pr_.eps) {
        best_ = span;
        best_ops_.assign(p, {});
        std::vector<std::uint32_t> n(std::size_t{3} * p, 0);
        for (const auto& [t, k] : path_) {
          const auto kind = k == 0   ? op_kind::forward
                            : k == 1 ? op_kind::backward_input
                                     : op_kind::backward_weight;
          best_ops_[t].push_back(
              make_op(kind, n[std::size_t{3} * t + static_cast<std::size_t>(k)]++));
        }
        if (best_ <= floor_ + pr_.eps) {
          stop_ = true;  // at the lower bound: nothing is shorter
        }
      }
      return;
    }
    if (s == p) {
      return;  // every unfinished stage waits on another: the lists deadlock
    }
    const std::uint32_t nf = count(st, s, 0);
    const std::uint32_t nb = count(st, s, 1);
    const std::uint32_t nw = count(st, s, 2);
    struct child {
      int kind;
      std::size_t slot;
      double lb;
    };
    std::array<child, 3> kids{};
    std::size_t n_kids = 0;
    const bool f_fits = nf < m && held_after(nf + 1, nb, nw, pr_.sizes[s]) <= pr_.avail[s];
    for (int k : {1, 0, 2}) {
      if ((k == 0 && !f_fits) || (k == 1 && nb == nf) || (k == 2 && nw == nb) ||
          (k != 2 && ((unsigned(st.ban[s]) >> unsigned(k)) & 1u) != 0)) {
        continue;
      }
      state& c = pool_[3 * (level + 1) + n_kids];
      c = st;
      if (k == 2) {
        c.ban[s] |= ready_now(st, s, f_fits);
      } else {
        c.ban[s] = 0;
      }
      if (!apply(c, s, k)) {
        continue;
      }
      if (lim_.dominance && dominated(c)) {
        ++dominated_;
        continue;
      }
      const double lb = bound(c);
      if (lb >= best_ - pr_.eps || !meets_deadlines(c)) {
        ++bounded_;
        continue;
      }
      kids[n_kids] = {k, n_kids, lb};
      ++n_kids;
    }
    std::stable_sort(kids.begin(), kids.begin() + static_cast<std::ptrdiff_t>(n_kids),
                     [](const child& a, const child& b) { return a.lb < b.lb; });
    for (std::size_t i = 0; i < n_kids && !stop_; ++i) {
      if (kids[i].lb >= best_ - pr_.eps) {
        ++bounded_;
        continue;
      }
      path_.push_back({s, kids[i].kind});
      dfs(level + 1, kids[i].slot);
      path_.pop_back();
    }
  }

  const exact_problem& pr_;
  exact_limits lim_;
  unsigned bits_ = 1;
  std::size_t depth_max_ = 0;
  std::vector<state> pool_;  // three child slots per level
  std::vector<double> fe_, be_, times_;
  std::vector<double> df_, db_;  // latest ends of F / B that still beat the incumbent
  struct job {
    double release, deadline, left;
  };
  std::vector<job> jobs_;

  std::vector<std::pair<stage_index, int>> path_;
  std::unordered_map<key, bucket, key_hash> memo_;
  std::size_t memo_used_ = 0;
  std::size_t memo_states_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
  double floor_ = 0.0;
  std::vector<std::vector<op>> best_ops_;
  std::uint64_t nodes_ = 0;
  std::uint64_t dominated_ = 0;
  std::uint64_t bounded_ = 0;
  bool stop_ = false;
  bool exhausted_ = false;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace pipesched::detail
