#pragma once

// The list-scheduling greedy of the zero-bubble search (docs/model.md §7): its yes/no choices,
// one run's result and the scheduler. The problem it reads is gen/detail/zb_problem.hpp; the
// timing of a finished order gen/detail/zb_order_timing.hpp.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/gen/detail/zb_bound.hpp"
#include "pipesched/gen/detail/zb_objective.hpp"
#include "pipesched/gen/detail/zb_order_timing.hpp"
#include "pipesched/gen/detail/zb_problem.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched::detail {

/// The yes/no heuristics one greedy run uses (one bit each; see zb_choices in zb_auto.hpp).
struct greedy_flags {
  bool b_first_when_ahead = false;    ///< B before a ready F only when >= 2 F ahead of the consumer
  bool wait_for_b = false;            ///< don't start an F that would delay a known B
  bool fill_small_gaps = false;       ///< put a W into any gap, even one shorter than T_W
  bool bubble_rule = true;            ///< W when the gap would raise the largest accumulated bubble
  bool later_chunk_first = true;      ///< among ready F, the one of the later model chunk first
  bool wait_for_later_chunk = false;  ///< wait for a later chunk's F arriving during this F
};

/// Output of one greedy run: its outcome and, when asked for, its per-stage op lists.
struct greedy_run {
  bool ok = false;      ///< every op placed (false when pruned or, never expected, stalled)
  bool pruned = false;  ///< stopped early: provably loses to the cut
  /// Bit i set: flag i (greedy_flags order) changed some decision. A run with only unused
  /// flags flipped makes the same decisions, so the search skips it.
  unsigned used = 0;
  std::vector<std::vector<op>> ops;  ///< per stage (only when asked for: see finish)
  double max_span = 0.0;
  double makespan = 0.0;
  /// The largest lower bound on the run's span it checked against its cut.
  double max_bound = 0.0;
};

/// One run of the list-scheduling greedy (docs/model.md §7), generalised to several chunks per
/// stage. Stages are processed in order of the time at which they next decide (a binary heap,
/// so a run costs O(ops · (v + log p))). A stage decides among its next B, its next F (per
/// chunk, admitted only if the activation budget keeps room for the stage's later chunks, so
/// the oldest micro-batch can always finish: no stall above the minimum budget) and its
/// oldest pending W. The times are exact for the resulting order because every op is placed
/// after the ops it waits for, at max(stage free, inputs + T_comm).
class greedy_scheduler {
 public:
  explicit greedy_scheduler(const greedy_problem& pr)
      : pr_(pr),
        tf_(pr.varies ? pr.vtf.data() : pr.tf.data()),
        tb_(pr.varies ? pr.vtb.data() : pr.tb.data()),
        tw_(pr.varies ? pr.vtw.data() : pr.tw.data()),
        fcomm_(pr.fcomm.data()),
        bcomm_(pr.bcomm.data()),
        df_(pr.varies ? pr.vdf.data() : pr.df.data()),
        db_(pr.varies ? pr.vdb.data() : pr.db.data()),
        dw_(pr.varies ? pr.vdw.data() : pr.dw.data()),
        reserve_(pr.reserve.data()),
        gl_(pr.gl.data()),
        prev_(pr.prev.data()),
        next_(pr.next.data()),
        own_cell_(pr.own_cell.data()),
        prev_cell_(pr.prev_cell.data()),
        next_cell_(pr.next_cell.data()),
        prev_stage_(pr.prev_stage.data()),
        next_stage_(pr.next_stage.data()),
        eps_(pr.eps),
        obj_(pr.objective),
        n_(pr.tf.size()),
        varies_(pr.varies) {
    // The memory budget with its tolerance folded in, once: the hot loop then compares
    // memory against memory (never against the time tolerance) with one load.
    cap_.resize(pr.avail.size());
    for (std::size_t s = 0; s < cap_.size(); ++s) {
      cap_[s] = pr.avail[s] + pr.meps;
    }
  }

  /// One whole run, to its end.
  greedy_run run(const greedy_flags& fl) {
    begin(fl);
    advance(std::numeric_limits<std::size_t>::max());
    return finish();
  }

  /// Starts a run that advance() then moves forward; a run can be paused between steps and
  /// resumed, and its cut tightened, without changing any decision it makes.
  void begin(const greedy_flags& fl, const greedy_cut& cut = {}) {
    init();
    fl_ = fl;
    cut_ = cut;
    cut_hit_ = false;
    over_ = false;
    used_ = 0;
    max_bound_ = 0.0;
    max_end_ = 0.0;
    // Each step places an op or moves the stage's key forward; the budget only guards
    // against a heuristic bug turning into a hang.
    budget_ = std::size_t{64} * (std::size_t{3} * m_ * v_ + 4) * p_;
    until_chain_ = chain_every_;
  }

  /// Runs up to `steps` more steps; true once the run is over (complete, cut or stalled).
  bool advance(std::size_t steps) {
    if (!over_) {
      if (varies_) {
        over_ = v_ == 1 ? loop<true, true>(steps) : loop<false, true>(steps);
      } else {
        over_ = v_ == 1 ? loop<true, false>(steps) : loop<false, false>(steps);
      }
    }
    return over_;
  }

  /// Replaces the cut by a stricter one (a better order was found); a run that already
  /// loses to it ends at once.
  void tighten_cut(const greedy_cut& cut) noexcept {
    cut_ = cut;
    if (!over_ && obj_.loses(cut_, max_bound_, max_end_, eps_)) {
      cut_hit_ = true;
      over_ = true;
    }
  }

  bool over() const noexcept { return over_; }
  /// Whether the run was stopped by its cut.
  bool cut() const noexcept { return cut_hit_; }
  /// Whether every op is placed.
  bool complete() const noexcept {
    for (stage_index s = 0; s < p_; ++s) {
      if (count_[s] != stride_) {
        return false;
      }
    }
    return true;
  }
  /// The longest stage span of the ops placed so far.
  double span() const noexcept {
    double out = 0.0;
    for (stage_index s = 0; s < p_; ++s) {
      if (count_[s] != 0) {
        out = std::max(out, t_[s] - first_[s]);
      }
    }
    return out;
  }
  /// The last end of the ops placed so far.
  double makespan() const noexcept {
    double out = 0.0;
    for (stage_index s = 0; s < p_; ++s) {
      if (count_[s] != 0) {
        out = std::max(out, t_[s]);
      }
    }
    return out;
  }
  /// The largest lower bound seen so far on the run's final objective value (its span or
  /// makespan, search_objective::primary): what the best-first search orders runs by.
  double bound() const noexcept { return obj_.primary(max_bound_, max_end_); }
  /// The flags that changed some decision so far (greedy_run::used).
  unsigned used() const noexcept { return used_; }

  /// The outcome of a run that is over, with its op lists when `take_ops` (the scheduler
  /// keeps its buffers for the next run either way; time_order gives the start times).
  greedy_run finish(bool take_ops = true) {
    greedy_run out;
    out.ok = !cut_hit_ && complete();
    out.pruned = cut_hit_;
    out.used = used_;
    out.max_bound = max_bound_;
    out.max_span = span();
    out.makespan = makespan();
    if (take_ops) {
      out.ops.resize(p_);
      for (stage_index s = 0; s < p_; ++s) {
        const std::size_t base = std::size_t{s} * stride_;
        out.ops[s].resize(count_[s]);
        for (std::size_t k = 0; k < count_[s]; ++k) {
          out.ops[s][k] = std::bit_cast<op>(ops_flat_[base + k]);
        }
      }
    }
    return out;
  }

  static constexpr double never = std::numeric_limits<double>::infinity();

 private:
  // The run's main loop, for at most `steps` steps; true when the run is over. One: a
  // single chunk per stage (zb-auto), compiled without the per-chunk loops. Var: costs and
  // memory per micro-batch (greedy_problem::varies), compiled without them otherwise.
  template <bool One, bool Var>
  bool loop(std::size_t steps) {
    while (steps-- > 0) {
      if (cut_hit_ || budget_-- == 0) {
        return true;
      }
      if (--until_chain_ == 0) {
        until_chain_ = chain_every_;
        chain_bound<Var>();
      }
      const stage_index s = tree_[1].stage;
      const double k = tree_[1].key;
      if (k == never) {
        return true;  // every stage done or asleep
      }
      key_[s] = never;  // the tree is fixed below, once, unless step() pushes s again
      step<One, Var>(s, k);
      if (key_[s] == never) {
        update(s);
      }
    }
    return cut_hit_;
  }

  template <bool One>
  std::uint32_t chunks() const {
    return One ? 1u : v_;
  }

  struct cand {
    bool exists = false;
    bool known = false;
    double ready = never;  // exact when known, else a lower bound
    chunk_index c = 0;
  };

  void init() {
    p_ = pr_.pl.stages();
    m_ = pr_.m;
    v_ = pr_.pl.chunks();
    const std::size_t n = std::size_t{p_} * v_;
    const std::size_t cells = std::size_t{pr_.pl.total_chunks()} * m_;
    // End times per (global chunk, micro-batch). Not initialised: an entry is read only once
    // its op is placed (the per-chunk counters tell), so a run cut early touches few pages.
    if (cells > cells_cap_) {
      f_end_ = std::make_unique_for_overwrite<double[]>(cells);
      b_end_ = std::make_unique_for_overwrite<double[]>(cells);
      cells_cap_ = cells;
    }
    nf_.assign(n, 0);
    nb_.assign(n, 0);
    t_.assign(p_, 0.0);
    mem_.assign(p_, 0.0);
    idle_.assign(p_, 0.0);
    max_idle_ = 0.0;
    wq_head_.assign(p_, 0);
    // Cleared, not reallocated: a scheduler reused for another run keeps its buffers.
    wq_.resize(p_);
    stride_ = std::size_t{3} * m_ * v_;
    if (stride_ * p_ > flat_cap_) {  // kept when reused for a run of the same problem
      flat_cap_ = stride_ * p_;
      ops_flat_ = std::make_unique_for_overwrite<std::uint64_t[]>(flat_cap_);
    }
    count_.assign(p_, 0);
    for (stage_index s = 0; s < p_; ++s) {
      wq_[s].clear();
      wq_[s].reserve(std::size_t{m_} * v_);
    }
    // Tournament tree over the stages' keys, each node holding its winner's key (one load
    // per child, no indirection): tree_[1] is the stage deciding next (ties: the lower
    // stage). Leaves past p hold a sentinel whose key stays `never`.
    leaves_ = 1;
    while (leaves_ < p_) {
      leaves_ *= 2;
    }
    key_.assign(p_ + 1, 0.0);
    key_[p_] = never;
    rem_.assign(p_, 0.0);
    for (stage_index s = 0; s < p_; ++s) {
      for (chunk_index c = 0; c < v_; ++c) {
        const std::size_t i = idx<false>(s, c);
        if (!varies_) {
          rem_[s] += double(m_) * (tf_[i] + tb_[i] + tw_[i]);
          continue;
        }
        for (std::uint32_t j = 0; j < m_; ++j) {
          const std::size_t a = at<true>(i, j);
          rem_[s] += tf_[a] + tb_[a] + tw_[a];
        }
      }
    }
    if (varies_) {
      // Per (global chunk, micro-batch): the work of that chunk's F (and B) from that
      // micro-batch on, for chain_bound.
      const std::size_t rows = std::size_t{pr_.pl.total_chunks()} * (m_ + 1);
      f_rest_.assign(rows, 0.0);
      b_rest_.assign(rows, 0.0);
      for (global_chunk g = 0; g < pr_.pl.total_chunks(); ++g) {
        const std::size_t i = pr_.flat[g];
        for (std::uint32_t j = m_; j-- > 0;) {
          const std::size_t cell = std::size_t{g} * (m_ + 1) + j;
          f_rest_[cell] = f_rest_[cell + 1] + tf_[at<true>(i, j)];
          b_rest_[cell] = b_rest_[cell + 1] + tb_[at<true>(i, j)];
        }
      }
    }
    first_.assign(p_, never);
    lf_.assign(pr_.pl.total_chunks(), 0.0);
    lb_.assign(pr_.pl.total_chunks(), 0.0);
    chain_every_ = std::max<std::size_t>(4 * lf_.size(), 64);
    tree_.assign(2 * std::size_t{leaves_}, node{never, p_});
    for (stage_index s = 0; s < p_; ++s) {
      tree_[leaves_ + s] = node{key_[s], s};
    }
    for (std::size_t i = leaves_; i-- > 1;) {
      tree_[i] = winner(tree_[2 * i], tree_[2 * i + 1]);
    }
  }

  struct node {
    double key;
    stage_index stage;
  };

  static node winner(const node& a, const node& b) {
    return b.key < a.key ? b : a;  // a is the left (lower) subtree: ties go to it
  }

  // key_[s] changed: fix the path from its leaf to the root.
  void update(stage_index s) {
    std::size_t i = leaves_ + std::size_t{s};
    tree_[i].key = key_[s];
    for (i /= 2; i >= 1; i /= 2) {
      const node w = winner(tree_[2 * i], tree_[2 * i + 1]);
      if (w.stage == tree_[i].stage && w.stage != s) {
        break;  // same winner, same key: nothing above changes
      }
      tree_[i] = w;
    }
  }

  template <bool One>
  std::size_t idx(stage_index s, chunk_index c) const {
    return One ? std::size_t{s} : std::size_t{s} * v_ + c;
  }

  // Where micro-batch j's cost or memory change of flat index i is: per micro-batch (Var),
  // or the one value of i.
  template <bool Var>
  std::size_t at(std::size_t i, std::uint32_t j) const noexcept {
    if constexpr (Var) {
      return std::size_t{j} * n_ + i;
    } else {
      static_cast<void>(j);
      return i;
    }
  }

  void push(stage_index s, double k) {
    key_[s] = k;
    update(s);
  }

  // A lower bound on when the producer on stage x could finish an op of duration d.
  double producer_bound(stage_index x, double now, double d) const {
    return std::max(now, t_[x]) + d;
  }

  // F and B share one code path, Fwd choosing the pass's tables: an F of flat index i takes
  // its input from the previous chunk's F and feeds the next chunk's; a B the other way round.

  // How many ops of the pass flat index i has placed.
  template <bool Fwd>
  std::uint32_t placed(std::size_t i) const noexcept {
    return Fwd ? nf_[i] : nb_[i];
  }

  // Whether flat index i has an op of the pass left: an F until all m are placed, a B only
  // behind its own F.
  template <bool Fwd>
  bool pending(std::size_t i) const noexcept {
    return Fwd ? nf_[i] < m_ : nb_[i] < nf_[i];
  }

  // When the pass's op of micro-batch j on flat index i gets its input: exact when the
  // producing chunk's op of j is placed (`known`), else a lower bound. At the chain's ends the
  // first chunk's F reads the data, and the last chunk's B its own F(j) (always placed before
  // its B is considered).
  template <bool Fwd, bool Var>
  double input(std::size_t i, std::uint32_t j, double now, bool& known) const {
    const std::size_t cell = Fwd ? prev_cell_[i] : next_cell_[i];
    known = true;
    if (cell == greedy_problem::npos) {
      return Fwd ? 0.0 : f_end_[own_cell_[i] + j];
    }
    const std::size_t x = Fwd ? prev_[i] : next_[i];
    known = placed<Fwd>(x) > j;
    return input_arrival(known ? (Fwd ? f_end_ : b_end_)[cell + j]
                               : producer_bound(Fwd ? prev_stage_[i] : next_stage_[i], now,
                                                (Fwd ? tf_ : tb_)[at<Var>(x, j)]),
                         (Fwd ? fcomm_ : bcomm_)[i]);
  }

  // Whether the next F of flat index i (its micro-batch nf_[i]) fits stage s's budget, room
  // for its later chunks kept: the memory engine's admission rule.
  template <bool Var>
  bool f_fits(stage_index s, std::size_t i) const noexcept {
    return admits_forward(mem_[s], df_[at<Var>(i, nf_[i])], reserve_[i], cap_[s]);
  }

  // The pass's next op on stage s: of its chunks', one whose input is known first, then the
  // earliest ready. An F is admitted only if it fits (f_fits): `blocked` reports an F held
  // back only by the memory budget (a B leaves `blocked` and `blocked_ready` alone), and of
  // two F both ready now the chunk preference decides.
  template <bool Fwd, bool One, bool Var>
  cand next_op(stage_index s, double now, bool& blocked, double& blocked_ready) {
    if constexpr (Fwd) {
      blocked = false;
      blocked_ready = never;
    }
    if constexpr (One) {
      // One chunk: no comparison, and the result built in one go (a piecewise-built struct
      // read back whole stalls store forwarding in this hot path).
      const std::size_t i = s;
      if (!pending<Fwd>(i)) {
        return cand{};
      }
      bool known = true;
      const double ready = input<Fwd, Var>(i, placed<Fwd>(i), now, known);
      if constexpr (Fwd) {
        if (!f_fits<Var>(s, i)) {
          blocked = true;
          blocked_ready = known ? ready : never;
          return cand{};
        }
      }
      return cand{true, known, ready, 0};
    }
    // Scalars, not a cand built field by field and copied: see the single-chunk path.
    bool b_exists = false;
    bool b_known = false;
    double b_ready = never;
    chunk_index b_c = 0;
    for (chunk_index c = 0; c < chunks<One>(); ++c) {
      const std::size_t i = idx<One>(s, c);
      if (!pending<Fwd>(i)) {
        continue;
      }
      bool known = true;
      const double ready = input<Fwd, Var>(i, placed<Fwd>(i), now, known);
      if constexpr (Fwd) {
        if (!f_fits<Var>(s, i)) {
          blocked = true;
          if (known) {
            blocked_ready = std::min(blocked_ready, ready);
          }
          continue;
        }
      }
      bool better =
          !b_exists || (known && !b_known) || (known == b_known && ready < b_ready - eps_);
      if constexpr (Fwd) {
        // Both ready now: the chunk preference decides.
        if (b_exists && known && b_known && ready <= now + eps_ && b_ready <= now + eps_) {
          used_ |= 16u;
          const global_chunk g = gl_[i];
          const global_chunk h = gl_[idx<One>(s, b_c)];
          better = fl_.later_chunk_first ? g > h : g < h;
        }
      }
      if (better) {
        b_exists = true;
        b_known = known;
        b_ready = ready;
        b_c = c;
      }
    }
    if constexpr (Fwd) {
      if (fl_.later_chunk_first && b_exists && b_known && b_ready <= now + eps_) {
        // A later chunk's F that arrives before the chosen one could end: waiting for it keeps
        // the chunk order a small transfer latency would otherwise flip (only meaningful when
        // later chunks are preferred: otherwise the flag is unused, and its runs are copies).
        const std::size_t bi = idx<One>(s, b_c);
        const double end = std::max(t_[s], b_ready) + tf_[at<Var>(bi, nf_[bi])];
        const global_chunk h = gl_[bi];
        for (chunk_index c = 0; c < chunks<One>(); ++c) {
          const std::size_t i = idx<One>(s, c);
          if (!pending<true>(i) || gl_[i] <= h || !f_fits<Var>(s, i)) {
            continue;
          }
          bool known = true;
          const double ready = input<true, Var>(i, nf_[i], now, known);
          if (known && ready > now + eps_ && ready < end - eps_) {
            used_ |= 32u;
            if (fl_.wait_for_later_chunk) {
              return cand{true, true, ready, c};
            }
          }
        }
      }
    }
    return cand{b_exists, b_known, b_ready, b_c};
  }

  // How many forwards of chunk c stage s is ahead of the stage consuming them.
  template <bool One>
  std::uint32_t ahead(stage_index s, chunk_index c) const {
    const std::size_t i = idx<One>(s, c);
    const std::size_t nx = next_[i];
    if (nx == greedy_problem::npos) {
      return std::numeric_limits<std::uint32_t>::max();
    }
    return nf_[i] - nf_[nx];
  }

  template <bool One>
  stage_index stage_of(std::size_t flat) const {
    return static_cast<stage_index>(One ? flat : flat / v_);
  }

  void place(stage_index s, const op& o, double start, double dur) {
    const std::size_t k = count_[s]++;
    if (k == 0) {
      first_[s] = start;
    } else if (start > t_[s] + eps_) {
      idle_[s] += start - t_[s];
      max_idle_ = std::max(max_idle_, idle_[s]);
    }
    ops_flat_[std::size_t{s} * stride_ + k] = std::bit_cast<std::uint64_t>(o);
    // The stage will end no earlier than its end so far plus the work it still has to do,
    // which bounds its span and the makespan: a run that loses to the best known can stop.
    rem_[s] -= dur;
    const double end = start + dur + rem_[s];
    max_bound_ = std::max(max_bound_, end - first_[s]);
    max_end_ = std::max(max_end_, end);
    if (obj_.loses(cut_, max_bound_, max_end_, eps_)) {
      cut_hit_ = true;
    }
  }

  // A stronger bound for the drain, checked every chain_every_ steps (amortised O(1) per op):
  // the last micro-batch's F must go down the whole chunk chain and its B back up, and on
  // each stage the last B follows every F and B of that chunk still to place. So the last B
  // of global chunk g ends no earlier than
  //   LF(g) = max(t(stage) + remaining F of g, LF(g−1) + comm + T_F(g))        (its last F)
  //   LB(g) = max(t(stage) + remaining F and B of g, LB(g+1) + comm + T_B(g))  (LF for the last)
  // (exact end times once placed), and the stage's last op, a W, ends T_W later.
  template <bool Var>
  void chain_bound() {
    const std::size_t G = lf_.size();
    const std::uint32_t last_mb = m_ - 1;
    for (std::size_t g = 0; g < G; ++g) {
      const std::size_t i = pr_.flat[g];
      const stage_index s = pr_.stage[g];
      const std::size_t last = g * m_ + (m_ - 1);
      double e = 0.0;
      if (nf_[i] == m_) {
        e = f_end_[last];
      } else {
        e = t_[s] + rest<true, Var>(g, i);
        if (g > 0) {
          e = std::max(e, lf_[g - 1] + fcomm_[i] + tf_[at<Var>(i, last_mb)]);
        }
      }
      lf_[g] = e;
    }
    for (std::size_t g = G; g-- > 0;) {
      const std::size_t i = pr_.flat[g];
      const stage_index s = pr_.stage[g];
      const std::size_t last = g * m_ + (m_ - 1);
      double e = 0.0;
      if (nb_[i] == m_) {
        e = b_end_[last];
      } else {
        e = t_[s] + rest<true, Var>(g, i) + rest<false, Var>(g, i);
        e = std::max(e, (g + 1 == G ? lf_[g] : lb_[g + 1] + bcomm_[i]) + tb_[at<Var>(i, last_mb)]);
      }
      lb_[g] = e;
    }
    for (std::size_t g = 0; g < G; ++g) {
      const std::size_t i = pr_.flat[g];
      const stage_index s = pr_.stage[g];
      if (first_[s] == never) {
        continue;
      }
      // The last micro-batch's W follows its B, on the same stage.
      max_bound_ = std::max(max_bound_, lb_[g] + tw_[at<Var>(i, last_mb)] - first_[s]);
      max_end_ = std::max(max_end_, lb_[g] + tw_[at<Var>(i, last_mb)]);
    }
    if (obj_.loses(cut_, max_bound_, max_end_, eps_)) {
      cut_hit_ = true;
    }
  }

  // The F (B) work of global chunk g (flat index i) still to place.
  template <bool Fwd, bool Var>
  double rest(std::size_t g, std::size_t i) const noexcept {
    if constexpr (Var) {
      return (Fwd ? f_rest_ : b_rest_)[g * (m_ + 1) + placed<Fwd>(i)];
    } else {
      return double(m_ - placed<Fwd>(i)) * (Fwd ? tf_ : tb_)[i];
    }
  }

  void wake(stage_index y, double ready) {
    const double k = std::max(t_[y], ready);
    if (k < key_[y]) {
      push(y, k);
    }
  }

  template <bool One, bool Var>
  void do_w(stage_index s) {
    const op w = wq_[s][wq_head_[s]++];
    const std::size_t a = at<Var>(idx<One>(s, w.chunk), w.mb);
    place(s, w, t_[s], tw_[a]);
    t_[s] += tw_[a];
    mem_[s] += dw_[a];
  }

  // Places the pass's next op of chunk c on stage s and wakes the stage of its consumer (the
  // next chunk's F, the previous chunk's B); a B also queues its W.
  template <bool Fwd, bool One, bool Var>
  void run_op(stage_index s, chunk_index c, double ready) {
    const std::size_t i = idx<One>(s, c);
    const std::uint32_t j = (Fwd ? nf_ : nb_)[i]++;
    const std::size_t a = at<Var>(i, j);
    const double start = std::max(t_[s], ready);
    const double dur = (Fwd ? tf_ : tb_)[a];
    place(s, make_op(Fwd ? op_kind::forward : op_kind::backward_input, j, c), start, dur);
    t_[s] = start + dur;
    mem_[s] += (Fwd ? df_ : db_)[a];
    if constexpr (!Fwd) {
      wq_[s].push_back(make_op(op_kind::backward_weight, j, c));
    }
    (Fwd ? f_end_ : b_end_)[own_cell_[i] + j] = t_[s];
    const std::size_t x = Fwd ? next_[i] : prev_[i];
    const stage_index xs = Fwd ? next_stage_[i] : prev_stage_[i];
    if (x != greedy_problem::npos && xs != s) {
      wake(xs, input_arrival(t_[s], (Fwd ? fcomm_ : bcomm_)[x]));
    }
  }

  bool w_pending(stage_index s) const { return wq_head_[s] < wq_[s].size(); }

  // Whether to put the oldest pending W into a gap of length `gap` before the next op.
  template <bool One, bool Var>
  bool w_fits(stage_index s, double gap) {
    const op& w = wq_[s][wq_head_[s]];
    const double tw = tw_[at<Var>(idx<One>(s, w.chunk), w.mb)];
    if (gap >= tw - eps_) {
      return true;
    }
    if (gap <= eps_) {
      return false;
    }
    const bool raises = idle_[s] + gap > max_idle_ + eps_;
    if (!(fl_.bubble_rule && raises)) {
      used_ |= 4u;  // flipping fill_small_gaps would change the answer
    }
    if (!fl_.fill_small_gaps && raises) {
      used_ |= 8u;  // flipping the bubble rule would
    }
    return fl_.fill_small_gaps || (fl_.bubble_rule && raises);
  }

  template <bool One, bool Var>
  void step(stage_index s, double now) {
    for (;;) {
      bool f_blocked = false;
      double f_blocked_ready = never;
      const cand b = next_op<false, One, Var>(s, now, f_blocked, f_blocked_ready);
      const cand f = next_op<true, One, Var>(s, now, f_blocked, f_blocked_ready);
      if (!b.exists && !f.exists && !f_blocked) {
        while (w_pending(s)) {  // all F and B placed: flush the W
          do_w<One, Var>(s);
        }
        return;
      }
      const bool b_now = b.exists && b.known && b.ready <= now + eps_;
      bool f_now = f.exists && f.known && f.ready <= now + eps_;
      bool f_deferred = false;
      const std::size_t fi = idx<One>(s, f.c);
      if (f_now && b.exists && b.known && !b_now &&
          b.ready < std::max(t_[s], f.ready) + tf_[at<Var>(fi, nf_[fi])] - eps_) {
        used_ |= 2u;
        if (fl_.wait_for_b) {
          f_now = false;  // the F would delay a B that is about to arrive
          f_deferred = true;
        }
      }
      int pick = 0;  // 1 = B, 2 = F
      if (b_now && f_now) {
        const bool close = ahead<One>(s, f.c) < 2;
        used_ |= close ? 1u : 0u;
        pick = fl_.b_first_when_ahead && close ? 2 : 1;
      } else if (b_now) {
        pick = 1;
      } else if (f_now) {
        pick = 2;
      }
      if (pick != 0) {
        const double start = std::max(t_[s], pick == 1 ? b.ready : f.ready);
        if (w_pending(s) && start > t_[s] + eps_ && w_fits<One, Var>(s, start - t_[s])) {
          do_w<One, Var>(s);
          continue;
        }
        if (pick == 1) {
          run_op<false, One, Var>(s, b.c, b.ready);
        } else {
          run_op<true, One, Var>(s, f.c, f.ready);
        }
        push(s, std::max(t_[s], now));
        return;
      }
      // Nothing can start now.
      double next = never;
      if (b.exists) {
        next = std::min(next, b.ready);
      }
      if (f.exists && !f_deferred) {
        next = std::min(next, f.ready);
      }
      if (w_pending(s)) {
        // Memory must be recycled: an F waits only for room and no B is coming to free it.
        const bool recycle = f_blocked && (!b.exists || f_blocked_ready <= now + eps_);
        if (recycle || (next < never && w_fits<One, Var>(s, next - t_[s]))) {
          do_w<One, Var>(s);
          continue;
        }
      }
      double wake_at = never;
      if (b.exists && b.known) {
        wake_at = std::min(wake_at, b.ready);
      }
      if (f.exists && f.known && !f_deferred) {
        wake_at = std::min(wake_at, f.ready);
      }
      if (wake_at < never) {
        push(s, std::max({wake_at, now, t_[s]}));
      }
      return;  // otherwise asleep until a producer finishes an input for this stage
    }
  }

  const greedy_problem& pr_;
  // Raw views of pr_'s arrays: the hot loop then reads them without reloading the vectors.
  const double* tf_;
  const double* tb_;
  const double* tw_;
  const double* fcomm_;
  const double* bcomm_;
  const double* df_;  // memory_delta of F, B, W per (s, c)
  const double* db_;
  const double* dw_;
  const double* reserve_;
  std::vector<double> cap_;  // per stage: avail + pr.meps
  const global_chunk* gl_;
  const std::size_t* prev_;
  const std::size_t* next_;
  const std::size_t* own_cell_;
  const std::size_t* prev_cell_;
  const std::size_t* next_cell_;
  const stage_index* prev_stage_;
  const stage_index* next_stage_;
  double eps_;
  search_objective obj_;
  std::size_t n_;  // p·v: the stride of one micro-batch's row in the per-micro-batch tables
  bool varies_;    // greedy_problem::varies
  greedy_flags fl_{};
  greedy_cut cut_;
  double max_end_ = 0.0;  // lower bound on the makespan
  bool cut_hit_ = false;
  bool over_ = false;
  std::size_t budget_ = 0;
  std::size_t until_chain_ = 1;
  double max_bound_ = 0.0;
  unsigned used_ = 0;
  std::uint32_t p_ = 0;
  std::uint32_t m_ = 0;
  std::uint32_t v_ = 0;
  std::unique_ptr<double[]> f_end_, b_end_;
  std::size_t cells_cap_ = 0;
  std::vector<std::uint32_t> nf_, nb_;
  std::vector<double> t_, key_, mem_, idle_;
  double max_idle_ = 0.0;
  std::vector<std::vector<op>> wq_;
  std::vector<std::size_t> wq_head_;
  // Output, stage s's k-th op at s·stride_ + k (flat: one allocation, reused across runs).
  std::size_t stride_ = 0;
  // Raw (op is trivially copyable, 8 bytes) and not initialised: only what a run writes
  // is ever touched.
  std::unique_ptr<std::uint64_t[]> ops_flat_;
  std::size_t flat_cap_ = 0;
  std::vector<std::size_t> count_;
  std::uint32_t leaves_ = 1;
  std::vector<node> tree_;
  std::vector<double> rem_;      // busy time still to place, per stage
  std::vector<double> first_;    // start of each stage's first op
  std::vector<double> lf_, lb_;  // chain_bound's scratch, per global chunk
  // Per-micro-batch costs only: F and B work of (global chunk, micro-batch j on), for
  // chain_bound (row g·(m + 1), a last 0).
  std::vector<double> f_rest_, b_rest_;
  std::size_t chain_every_ = 64;
};

}  // namespace pipesched::detail
