#pragma once

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/gen/detail/zb_bound.hpp"
#include "pipesched/gen/detail/zb_greedy.hpp"
#include "pipesched/gen/detail/zb_improve.hpp"
#include "pipesched/gen/detail/zb_objective.hpp"
#include "pipesched/gen/detail/zb_published.hpp"
#include "pipesched/gen/detail/zb_v_order.hpp"
#include "pipesched/gen/detail/zb_v_published.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/zb_search_types.hpp"
#include "pipesched/gen/zero_bubble.hpp"
#include "pipesched/ir/detail/parallel.hpp"

// The automatic zero-bubble scheduler's search (docs/model.md §7): greedy runs over the choice
// combinations with exact pruning, on a small parallel runner, then gap filling and local
// search. Entry points: zb_auto_search (gen/zb_auto.hpp), zb_v_search (gen/zb_v.hpp).

namespace pipesched {

namespace detail {

/// The F + B + W work of local chunk c on stage s over m micro-batches: m·(T_F + T_B + T_W), or
/// with per-micro-batch factors the sum of each micro-batch's (docs/model.md §3.1).
inline double stage_chunk_work(const shaped_cost_model& costs,
                               std::uint32_t m,
                               stage_index s,
                               chunk_index c) {
  if (!costs.has_microbatch_factors()) {
    const op_costs t = costs.at(s, c);
    return double(m) * (t.forward + t.backward_input + t.backward_weight);
  }
  double sum = 0.0;
  for (microbatch_index j = 0; j < m; ++j) {
    const op_costs t = costs.at(s, c, j);
    sum += t.forward + t.backward_input + t.backward_weight;
  }
  return sum;
}

/// Per-stage peak memory (static included) of an order with `chunks` chunks per stage: the
/// memory engine's running sum (stage_peak, analysis/memory_events.hpp).
template <class Lists>
std::vector<double> order_peak(const Lists& lists,
                               const shaped_memory_model& memory,
                               std::uint32_t chunks) {
  std::vector<double> out(lists.size(), 0.0);
  for (stage_index s = 0; s < lists.size(); ++s) {
    out[s] = stage_peak(lists[s], memory, s, chunks);
  }
  return out;
}

/// Improvement pass: moves pending W ops (their B already placed) into earlier idle gaps they
/// fit in. With the old times as upper bounds no op starts later, so the span never grows,
/// and memory only drops (a W frees memory earlier). Returns true if any W moved.
inline bool fill_gaps_with_w(const greedy_problem& pr,
                             std::vector<std::vector<op>>& ops,
                             const std::vector<std::vector<double>>& start) {
  const std::uint32_t v = pr.pl.chunks();
  const std::uint32_t m = pr.m;
  bool moved_any = false;
  std::vector<char> emitted(std::size_t{m} * v);
  std::vector<op> pending;
  std::vector<op> out;
  for (stage_index s = 0; s < pr.pl.stages(); ++s) {
    const auto& list = ops[s];
    if (list.empty()) {
      continue;
    }
    std::fill(emitted.begin(), emitted.end(), 0);
    pending.clear();
    out.clear();
    out.reserve(list.size());
    std::size_t head = 0;
    double cursor = start[s][0];
    auto dur = [&](const op& o) { return pr.op_time(std::size_t{s} * v + o.chunk, o.kind, o.mb); };
    for (std::size_t k = 0; k < list.size(); ++k) {
      const op& x = list[k];
      const std::size_t cell = std::size_t{x.mb} * v + x.chunk;
      if (x.kind == op_kind::backward_weight && emitted[cell]) {
        continue;
      }
      double room = start[s][k] - cursor;
      while (room > pr.eps) {
        while (head < pending.size() &&
               emitted[std::size_t{pending[head].mb} * v + pending[head].chunk]) {
          ++head;
        }
        if (head >= pending.size()) {
          break;
        }
        const op w = pending[head];
        if (w == x || dur(w) > room + pr.eps) {
          break;
        }
        out.push_back(w);
        emitted[std::size_t{w.mb} * v + w.chunk] = 1;
        cursor += dur(w);
        room -= dur(w);
        moved_any = true;
      }
      out.push_back(x);
      cursor = std::max(cursor, start[s][k]) + dur(x);
      if (x.kind == op_kind::backward_input) {
        pending.push_back(make_op(op_kind::backward_weight, x.mb, x.chunk));
      } else if (x.kind == op_kind::backward_weight) {
        emitted[cell] = 1;
      }
    }
    ops[s] = out;
  }
  return moved_any;
}

inline schedule to_schedule(std::string_view name,
                            std::uint32_t m,
                            const placement& pl,
                            std::vector<std::vector<op>> ops) {
  schedule out = schedule::on(std::string(name), pl, m);
  for (stage_index s = 0; s < pl.stages(); ++s) {
    out.stage_ops(s) = std::move(ops[s]);
  }
  return out;
}

/// The greedy flags of a choice.
inline greedy_flags flags_of(const zb_choices& c) {
  return greedy_flags{c.b_first_when_ahead, c.wait_for_b,        c.fill_small_gaps,
                      c.bubble_rule,        c.later_chunk_first, c.wait_for_later_chunk};
}

/// What searching the greedy choices found.
struct choice_search_result {
  std::vector<zb_choice_outcome> tried;  ///< per choice, in index order
  greedy_run best;                       ///< the winning run (ops empty when none finished)
  zb_choices best_choice;
};

/// Every choice run to its end, one after another: what prune = false asks for.
inline choice_search_result run_every_choice(const greedy_problem& pr, unsigned n) {
  choice_search_result out;
  greedy_scheduler gs(pr);
  for (unsigned i = 0; i < n; ++i) {
    const zb_choices c = zb_choices::from_index(i);
    greedy_run run = gs.run(flags_of(c));
    out.tried.push_back(
        {c, run.ok, run.pruned, -1, run.ok ? run.max_span : 0.0, run.ok ? run.makespan : 0.0});
    if (run.ok &&
        (out.best.ops.empty() || pr.objective.better(run.max_span, run.makespan, out.best.max_span,
                                                     out.best.makespan, pr.eps))) {
      out.best_choice = c;
      out.best = std::move(run);
    }
  }
  return out;
}

/// search_choices' shared state and its steps; every member but the runs' own work is read and
/// written under `mu`.
struct choice_search {
  enum class state : std::uint8_t { waiting, running, done, copy };
  static constexpr std::size_t slice = 128;  // ops a run advances per turn

  const greedy_problem& pr;
  unsigned n;
  const greedy_cut& seed;
  choice_search_result out;
  std::vector<state> st;
  std::vector<std::unique_ptr<greedy_scheduler>> live;
  std::vector<std::unique_ptr<greedy_scheduler>> spare;  // finished, buffers kept for reuse
  std::vector<char> busy;
  std::vector<char> fresh;
  std::vector<unsigned> used;
  std::vector<double> bound;
  std::size_t max_live = 1;
  std::size_t n_live = 0;
  std::size_t n_busy = 0;
  bool dirty = true;
  std::size_t n_waiting = 0;
  double best_span = 0.0;
  double best_makespan = 0.0;
  int best_index = -1;
  std::mutex mu;
  std::condition_variable cv;
  bool failed = false;

  choice_search(const greedy_problem& problem, unsigned choices, const greedy_cut& seed_cut)
      : pr(problem),
        n(choices),
        seed(seed_cut),
        st(choices, state::waiting),
        live(choices),
        busy(choices, 0),
        fresh(choices, 0),
        used(choices, 0),
        bound(choices, 0.0) {
    out.tried.resize(n);
    // Live runs are capped by memory (a run holds O(p·m·v) state); at 1 the search is the
    // plain sequential one.
    const double run_bytes = 80.0 * double(pr.pl.total_chunks()) * double(pr.m) + 4096.0;
    max_live = std::max<std::size_t>(
        1, std::min<std::size_t>(n, std::size_t((256.0 * 1048576.0) / run_bytes)));
  }

  /// What run i must beat.
  greedy_cut cut_for(unsigned i) const {
    return best_index < 0 ? seed : greedy_cut{best_span, best_makespan, int(i) > best_index};
  }

  /// Starts every choice that may start, marks copies.
  void start_ready() {
    for (unsigned i = 0; i < n && n_live < max_live; ++i) {
      if (st[i] != state::waiting) {
        continue;
      }
      int same = -1;
      bool wait = false;
      for (unsigned j = 0; j < i; ++j) {
        if (st[j] == state::copy) {
          continue;
        }
        if (st[j] == state::waiting) {
          wait = true;  // its relation to i is not known yet
          break;
        }
        if (((i ^ j) & used[j]) == 0) {
          if (st[j] == state::done) {
            same = int(j);
          } else {
            wait = true;  // identical to live run j so far
          }
          break;
        }
      }
      if (same >= 0) {
        zb_choice_outcome o = out.tried[unsigned(same)];
        o.choices = zb_choices::from_index(i);
        o.same_as = same;
        out.tried[i] = o;
        st[i] = state::copy;
      } else if (!wait) {
        if (spare.empty()) {
          live[i] = std::make_unique<greedy_scheduler>(pr);
        } else {
          live[i] = std::move(spare.back());
          spare.pop_back();
        }
        fresh[i] = 1;  // begun by the thread that first advances it, outside the lock
        bound[i] = 0.0;
        st[i] = state::running;
        ++n_live;
      }
    }
  }

  /// The idle live run with the smallest bound, or -1.
  int pick() const {
    int r = -1;
    for (unsigned i = 0; i < n; ++i) {
      if (st[i] == state::running && !busy[i] && (r < 0 || bound[i] < bound[unsigned(r)])) {
        r = int(i);
      }
    }
    return r;
  }

  /// For a run that is over and still marked busy by the caller: records its outcome. Returns
  /// whether it is the new best, whose op lists the caller then copies out without holding
  /// the lock.
  bool settle(unsigned i) {
    dirty = true;
    const greedy_scheduler& g = *live[i];
    const bool ok = !g.cut() && g.complete();
    const search_objective& obj = pr.objective;
    const bool wins = ok && (best_index < 0 ||
                             obj.better(g.span(), g.makespan(), best_span, best_makespan, pr.eps) ||
                             (int(i) < best_index && !obj.better(best_span, best_makespan, g.span(),
                                                                 g.makespan(), pr.eps)));
    --n_live;
    st[i] = state::done;
    used[i] = g.used();
    const zb_choices c = zb_choices::from_index(i);
    out.tried[i] = {c, ok, g.cut(), -1, ok ? g.span() : 0.0, ok ? g.makespan() : 0.0};
    if (wins) {
      best_span = g.span();
      best_makespan = g.makespan();
      best_index = int(i);
      out.best_choice = c;
      for (unsigned k = 0; k < n; ++k) {
        if (st[k] == state::running && !busy[k] && !fresh[k]) {
          live[k]->tighten_cut(cut_for(k));
          bound[k] = live[k]->bound();
        }
      }
    }
    return wins;
  }

  /// One worker: advances the most promising idle run by a slice at a time until every
  /// choice is done or a copy (or the search failed).
  void work() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (failed) {
        return;
      }
      if (dirty) {  // only a finished run or a newly used flag can let a choice start
        dirty = false;
        start_ready();
      }
      const int r = pick();
      if (r < 0) {
        if (n_busy == 0) {
          // Nothing live and nothing busy: every choice is done or a copy.
          cv.notify_all();
          return;
        }
        ++n_waiting;
        cv.wait(lock);
        --n_waiting;
        continue;
      }
      advance(unsigned(r), lock);
    }
  }

  /// Runs run i's next slice without the lock (beginning it first if fresh), then records
  /// its state; settles it if over.
  void advance(unsigned i, std::unique_lock<std::mutex>& lock) {
    busy[i] = 1;
    ++n_busy;
    greedy_scheduler& gs = *live[i];
    const bool begin = fresh[i] != 0;
    fresh[i] = 0;
    const greedy_cut cut = cut_for(i);
    // The run's own work (starting it, advancing it) runs without the lock.
    lock.unlock();
    if (begin) {
      gs.begin(flags_of(zb_choices::from_index(i)), cut);
    }
    const bool over = gs.advance(slice);  // allocates nothing: cannot throw
    lock.lock();
    gs.tighten_cut(cut_for(i));  // the best may have improved meanwhile
    dirty = dirty || used[i] != gs.used();
    used[i] = gs.used();
    bound[i] = gs.bound();
    if (over || gs.over()) {
      if (settle(i)) {
        lock.unlock();
        greedy_run run = gs.finish(true);
        lock.lock();
        if (best_index == int(i)) {  // unless a better run finished meanwhile
          out.best = std::move(run);
        }
      }
      spare.push_back(std::move(live[i]));
    }
    busy[i] = 0;
    --n_busy;
    if (n_waiting > 0) {
      cv.notify_all();
    }
  }

  /// E.g. out of memory starting a run: every worker stops at its next look at the state.
  void stop() {
    const std::lock_guard<std::mutex> lock(mu);
    failed = true;
    cv.notify_all();
  }
};

/// The choices searched best-first with exact pruning. Runs are resumable, so the live run
/// with the smallest lower bound on its objective is always the one advanced: the eventual
/// best tends to finish first, and every other run stops as soon as its bounds show it cannot
/// beat the best finished run (pr.objective: shorter primary, on a tie shorter secondary; on
/// a tie again, the lower index) or `seed` (the best seed's cut: ties go to the greedy). A choice
/// starts only once every earlier choice either finished or used a flag it differs in: a choice
/// identical so far to a finished one makes the same decisions (it is reported as a copy,
/// same_as), and one identical to a live run waits for it to diverge. The result never
/// depends on the interleaving (nor on threads): a run is cut only when it provably loses;
/// which runs are reported cut rather than finished can.
inline choice_search_result search_choices(const greedy_problem& pr,
                                           unsigned n,
                                           const greedy_cut& seed,
                                           unsigned threads) {
  choice_search cs(pr, n, seed);
  detail::run_parallel(
      std::max(threads, 1u), [&] { cs.work(); }, [&] { cs.stop(); });
  return std::move(cs.out);
}

/// A candidate order with its exact timing.
struct timed_order {
  std::vector<std::vector<op>> ops;
  std::vector<std::vector<double>> start;
  double span = 0.0;
  double makespan = 0.0;
  bool empty() const noexcept { return ops.empty(); }
  /// Strictly better than `o` by the problem's objective.
  bool beats(const timed_order& o, const greedy_problem& pr) const noexcept {
    return pr.objective.better(span, makespan, o.span, o.makespan, pr.eps);
  }
  /// Its objective value: the span or the makespan.
  double value(const greedy_problem& pr) const noexcept {
    return pr.objective.primary(span, makespan);
  }
};

/// zb_search's checks of its request, before any work: the limits hold the minimum memory, the
/// budget is a number, and no time the search computes can overflow.
inline void check_search_request(std::string_view who,
                                 const shaped_params& params,
                                 const placement& pl,
                                 const std::vector<double>& limits,
                                 const zb_auto_options& opts) {
  require_minimum_memory(who, pl, params.memory, limits);
  if (!std::isfinite(opts.search_budget_ms) || opts.search_budget_ms < 0.0) {
    fail(who, ": search_budget_ms (", opts.search_budget_ms,
         ") must be finite and >= 0 (0: no wall-clock cap)");
  }
  const std::uint32_t p = pl.stages();
  const std::uint32_t m = params.microbatches;
  // Every time the search computes is at most all the work plus a transfer per op: when that
  // sum overflows, no time it would report is a number.
  double all_work = 0.0;
  for (stage_index s = 0; s < p; ++s) {
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      all_work += stage_chunk_work(params.costs, m, s, c) +
                  double(m) * 3.0 * params.costs.comm(s, (s + 1) % p);
    }
  }
  if (!std::isfinite(all_work)) {
    fail(who, ": the costs are too large: the total work (", all_work, ") is not a finite number");
  }
}

/// The orders zb_search tries before the greedy (hand-crafted and published), keeping the best
/// that fits the limits, and what they report into the result.
struct zb_seeds {
  const greedy_problem& pr;
  const shaped_memory_model& memory;
  const std::vector<double>& limits;
  zb_auto_result& res;
  timed_order best;

  /// Whether pruning is on and the best seed already reaches the lower bound `bound` of the
  /// objective: nothing can be shorter, so the rest of the search is skipped.
  bool at_bound(const zb_auto_options& opts, double bound) const {
    return opts.prune && !best.empty() && best.value(pr) <= bound + pr.eps;
  }

  /// Times `ops` and keeps it when it fits the limits and beats the best seed; its span goes
  /// to span_out.
  void offer(std::string_view name,
             std::vector<std::vector<op>> ops,
             std::optional<double>& span_out) {
    const std::vector<double> pk = order_peak(ops, memory, pr.pl.chunks());
    for (stage_index s = 0; s < pr.pl.stages(); ++s) {
      if (pk[s] > limits[s] + pr.meps) {
        return;  // does not fit the limit
      }
    }
    timed_order t;
    t.ops = std::move(ops);
    const order_times ot = time_order(pr, t.ops, t.start);
    // A hand-crafted seed is valid by construction; a published heuristic's order is not
    // always (their ZB-V greedy can emit a deadlocking order when m < p): then it is dropped.
    PIPESCHED_ASSERT(ot.complete || name == "published",
                     "zb_search: a hand-crafted seed deadlocks");
    if (!ot.complete) {
      return;
    }
    t.span = ot.max_span;
    t.makespan = ot.makespan;
    span_out = t.span;
    if (best.empty() || t.beats(best, pr)) {
      best = std::move(t);
      res.winner = name;
    }
  }

  /// A published heuristic's run, when it finished; the best published span is reported.
  void offer_published(published_order o) {
    if (!o.ok) {
      return;
    }
    std::optional<double> span;
    offer("published", std::move(o.ops), span);
    if (span && (!res.published_span || *span < *res.published_span)) {
      res.published_span = span;
    }
  }
};

/// Seeds: the hand-crafted ZB-H1 / ZB-H2 (or ZB-V) orders, when they fit the limits. The
/// greedy's list scheduling can lose to them with T_comm or uneven per-stage costs.
inline void seed_handcrafted(zb_seeds& seeds,
                             const shaped_params& params,
                             const placement& pl,
                             const zb_auto_options& opts) {
  const std::uint32_t p = pl.stages();
  zb_auto_result& res = seeds.res;
  if (opts.seed_handcrafted && pl.chunks() == 1) {
    for (int h = 0; h < 2; ++h) {
      const schedule z = zero_bubble_family(h == 0 ? "zb-h1" : "zb-h2", params, h == 1);
      std::vector<std::vector<op>> ops(p);
      for (stage_index s = 0; s < p; ++s) {
        ops[s].assign(z.ops(s).begin(), z.ops(s).end());
      }
      seeds.offer(h == 0 ? "zb-h1" : "zb-h2", std::move(ops),
                  h == 0 ? res.zb_h1_span : res.zb_h2_span);
    }
  } else if (opts.seed_handcrafted && pl.kind() == placement_kind::v_shape && pl.chunks() == 2) {
    seeds.offer("zb-v-handcrafted", zb_v_handcrafted_ops(p, params.microbatches),
                res.zb_v_handcrafted_span);
  }
}

/// Seeds: the authors' heuristics, each combination a seed (until one reaches the bound).
inline void seed_published(zb_seeds& seeds,
                           const placement& pl,
                           const zb_auto_options& opts,
                           double bound) {
  const greedy_problem& pr = seeds.pr;
  if (pl.chunks() == 1 && pl.kind() == placement_kind::sequential) {
    std::vector<unsigned> used;  // per combination run; a copy of an earlier one is skipped
    for (unsigned i = 0; i < 8; ++i) {
      bool same = false;
      for (unsigned j = 0; j < used.size() && !same; ++j) {
        same = used[j] != ~0u && ((i ^ j) & used[j]) == 0;
      }
      if (same || seeds.at_bound(opts, bound)) {
        used.push_back(~0u);  // a copy, or a candidate already reaches the lower bound
        continue;
      }
      // A run longer than the best candidate so far cannot win: it stops early. Not when
      // micro-batches differ: the port times with one micro-batch's costs for all.
      const double cut = opts.prune && !seeds.best.empty() && !pr.varies
                             ? seeds.best.value(pr)
                             : std::numeric_limits<double>::infinity();
      published_order o = published_zb_order(pr, published_zb_combination(i), cut);
      used.push_back(o.used);
      seeds.offer_published(std::move(o));
    }
  } else if (pl.kind() == placement_kind::v_shape && pl.chunks() == 2) {
    for (int i = 0; i < 4 && !seeds.at_bound(opts, bound); ++i) {
      seeds.offer_published(published_zb_v_order(pr, (i & 1) == 0, (i & 2) == 0));
    }
  }
}

/// The greedy choices searched (none when a seed already reaches the bound), on how many
/// threads, with the best seed as their cut; reports them into res and returns the winning
/// run's order, timed (empty when no run finished).
inline timed_order search_greedy(const greedy_problem& pr,
                                 const zb_seeds& seeds,
                                 const zb_auto_options& opts,
                                 double bound,
                                 zb_auto_result& res) {
  const placement& pl = pr.pl;
  const unsigned n_choices = seeds.at_bound(opts, bound) ? 0u
                             : opts.paper_choices_only   ? 8u
                                                         : (pl.chunks() > 1 ? 64u : 16u);
  greedy_cut seed_cut;  // a greedy run that cannot beat the best seed stops early
  if (!seeds.best.empty()) {
    seed_cut = {seeds.best.span, seeds.best.makespan, false};
  }
  unsigned threads = opts.threads;
  if (threads == 0) {
    const std::size_t size = std::size_t{pl.stages()} * pr.m * pl.chunks();
    threads = std::thread::hardware_concurrency() >= 2 && size >= 2048 && n_choices > 1 ? 2u : 1u;
  }
  choice_search_result found = opts.prune ? search_choices(pr, n_choices, seed_cut, threads)
                                          : run_every_choice(pr, n_choices);
  res.tried = std::move(found.tried);
  greedy_run best_run = std::move(found.best);
  res.best = found.best_choice;
  timed_order cur;
  if (!best_run.ops.empty()) {
    res.greedy_span = best_run.max_span;
    cur.ops = std::move(best_run.ops);
    [[maybe_unused]] const order_times t = time_order(pr, cur.ops, cur.start);
    PIPESCHED_ASSERT(t.complete && t.max_span <= best_run.max_span + pr.eps,
                     "zb_search: the greedy's order times differently");
    cur.span = best_run.max_span;
    cur.makespan = best_run.makespan;
  }
  return cur;
}

/// Improvement, first part: up to 4 rounds of moving W into earlier gaps (fill_gaps_with_w),
/// each kept only if its exact timing is no worse; res.span / res.makespan follow.
inline void improve_fill_gaps(const greedy_problem& pr, timed_order& cur, zb_auto_result& res) {
  std::vector<std::vector<double>> start2;
  for (int round = 0; round < 4; ++round) {
    auto trial = cur.ops;
    if (!fill_gaps_with_w(pr, trial, cur.start)) {
      break;
    }
    const order_times t = time_order(pr, trial, start2);
    if (!t.complete ||
        pr.objective.better(res.span, res.makespan, t.max_span, t.makespan, pr.eps)) {
      break;  // cannot happen (monotone), but never accept a worse order
    }
    res.span = t.max_span;
    res.makespan = t.makespan;
    cur.ops = std::move(trial);
    std::swap(cur.start, start2);
  }
}

/// Improvement, second part: the local search (order_improver) within opts' evaluations and
/// wall-clock budget, unless the order already reaches the bound.
inline void improve_local_search(const greedy_problem& pr,
                                 timed_order& cur,
                                 const zb_auto_options& opts,
                                 double bound,
                                 zb_auto_result& res) {
  const search_objective& obj = pr.objective;
  improve_budget budget;
  budget.evaluations = opts.search_evaluations;
  if (budget.evaluations == zb_auto_options::default_evaluations) {
    const double n = double(pr.pl.stages()) * pr.m * pr.pl.chunks() * 3.0;
    budget.evaluations = std::size_t(std::clamp(6e5 / n, 16.0, 2000.0));
  }
  budget.milliseconds = opts.search_budget_ms;
  if (budget.evaluations > 0 && obj.primary(res.span, res.makespan) > bound + pr.eps) {
    order_improver imp(pr);
    const improve_stats st = imp.run(cur.ops, budget);
    res.search_evaluations = st.evaluations;
    res.search_moves = st.accepted;
    if (st.accepted > 0) {
      const order_times t = time_order(pr, cur.ops, cur.start);
      PIPESCHED_ASSERT(
          t.complete && !obj.better(res.span, res.makespan, t.max_span, t.makespan, pr.eps),
          "zb_search: the local search made the order worse");
      res.span = t.max_span;
      res.makespan = t.makespan;
    }
  }
}

/// The search shared by zb-auto and zb-v. Order of work, cheapest first: the lower bounds,
/// the hand-crafted seeds that fit the limits (a seed at the bound of the objective ends the
/// search: nothing can be shorter), then every greedy choice with the best order so far as its
/// cut, then the improvement pass on the winner. The objective is opts.objective, automatic
/// resolved by stages_differ (docs/model.md §7); every comparison is pr.objective's.
inline zb_auto_result zb_search(std::string_view who,
                                const shaped_params& params,
                                const placement& pl,
                                std::vector<double> limits,
                                const zb_auto_options& opts) {
  check_search_request(who, params, pl, limits, opts);
  const std::uint32_t p = pl.stages();
  const std::uint32_t m = params.microbatches;
  std::vector<double> avail(p);
  for (stage_index s = 0; s < p; ++s) {
    avail[s] = limits[s] - params.memory.static_memory(s);
  }
  const search_objective obj =
      search_objective::resolve(opts.objective, stages_differ(pl, params.costs, params.memory));
  const greedy_problem pr(pl, m, params.costs, params.memory, avail, obj);
  zb_auto_result res;
  res.objective = obj.kind();
  const search_bounds bounds =
      pr.varies ? lower_bounds_per_microbatch(pl, m, params.costs, params.memory, avail)
                : lower_bounds(pl, m, params.costs, params.memory, avail);
  const double bound = obj.primary(bounds.span, bounds.makespan);  // on the objective
  zb_seeds seeds{pr, params.memory, limits, res, {}};
  seed_handcrafted(seeds, params, pl, opts);
  if (opts.published) {
    seed_published(seeds, pl, opts, bound);
  }
  timed_order cur = search_greedy(pr, seeds, opts, bound, res);
  // A seed replaces the greedy's order only when strictly better.
  if (!seeds.best.empty() && (cur.empty() || seeds.best.beats(cur, pr))) {
    cur = std::move(seeds.best);
  } else {
    res.winner = "greedy";
  }
  if (cur.empty()) {
    PIPESCHED_ASSERT(false, "zb_search: every greedy run stalled");
    fail(who, ": internal error: no greedy run placed every op (please report)");
  }
  res.span = cur.span;
  res.makespan = cur.makespan;
  res.seeded_span = res.span;
  if (opts.improve) {
    improve_fill_gaps(pr, cur, res);
  }
  res.filled_span = res.span;
  if (opts.improve) {
    improve_local_search(pr, cur, opts, bound, res);
  }
  res.peak = order_peak(cur.ops, params.memory, pl.chunks());
  res.sched = to_schedule(who, m, pl, std::move(cur.ops));
  res.limits = std::move(limits);
  res.lower_bound = std::min(res.span, bounds.span);
  res.makespan_lower_bound = std::min(res.makespan, bounds.makespan);
  for (stage_index s = 0; s < p; ++s) {
    double busy = 0.0;
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      busy += stage_chunk_work(params.costs, m, s, c);
    }
    res.ideal = std::max(res.ideal, busy);
  }
  return res;
}

/// Per-stage limits: the given memory_limit (one for every stage or one per stage), or
/// `factor`·(activations of all chunks of one micro-batch)·p + static memory when none is given.
inline std::vector<double> stage_limits(std::string_view who,
                                        const shaped_params& params,
                                        const placement& pl,
                                        double factor) {
  if (params.memory_limit) {
    params.memory_limit.check(std::string(who), "memory_limit", pl.stages());
    return params.memory_limit.for_stages(pl.stages());
  }
  std::vector<double> out(pl.stages());
  for (stage_index s = 0; s < pl.stages(); ++s) {
    out[s] = params.memory.static_memory(s) +
             factor * double(pl.stages()) * stage_activation(params.memory, s, pl.chunks());
    if (!std::isfinite(out[s])) {
      fail(who, ": the default memory limit of stage ", s, " (static + ", factor,
           "*p*M_B = ", out[s], ") is not a finite number: the memory sizes are too large");
    }
  }
  return out;
}

}  // namespace detail

}  // namespace pipesched
