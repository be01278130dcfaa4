#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "pipesched/gen/detail/timing.hpp"
#include "pipesched/gen/detail/zb_bound.hpp"
#include "pipesched/gen/detail/zb_greedy.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/zero_bubble.hpp"

namespace pipesched {

/// The yes/no heuristics of one greedy run of the automatic zero-bubble scheduler.
/// The first three are the paper's (tried in all 8 combinations); the last two are ours.
struct zb_choices {
  /// Prefer a ready B over a ready F only when the stage is >= 2 forwards ahead of the stage
  /// consuming its output (else the F first, to keep the next stage fed).
  bool b_first_when_ahead = false;
  /// Never start an F that would delay a B arriving before the F could end: accept a short
  /// bubble (the paper's "allow a bubble before the first B" choice, applied throughout).
  bool wait_for_b = false;
  /// Fill any gap before the next F/B with a pending W, even one shorter than T_W.
  bool fill_small_gaps = false;
  /// Fill a gap shorter than T_W when leaving it would raise the largest accumulated bubble
  /// of any stage (on in the paper's runs; off is an extra choice here).
  bool bubble_rule = true;
  /// With several chunks per stage: among ready forwards, run the later model chunk first.
  bool later_chunk_first = true;

  /// Bit i of the index is the i-th field above.
  unsigned index() const noexcept {
    return unsigned(b_first_when_ahead) | unsigned(wait_for_b) << 1 |
           unsigned(fill_small_gaps) << 2 | unsigned(!bubble_rule) << 3 |
           unsigned(!later_chunk_first) << 4;
  }
  static zb_choices from_index(unsigned i) noexcept {
    zb_choices c;
    c.b_first_when_ahead = (i & 1u) != 0;
    c.wait_for_b = (i & 2u) != 0;
    c.fill_small_gaps = (i & 4u) != 0;
    c.bubble_rule = (i & 8u) == 0;
    c.later_chunk_first = (i & 16u) == 0;
    return c;
  }
  friend bool operator==(const zb_choices&, const zb_choices&) = default;
};

/// The outcome of one greedy run.
struct zb_choice_outcome {
  zb_choices choices;
  bool ok = false;      ///< a complete schedule (false when pruned)
  bool pruned = false;  ///< stopped early: its span would exceed the best found before it
  int same_as = -1;     ///< index of an earlier choice that provably makes the same decisions
  double span = 0.0;    ///< longest stage span (when ok)
  double makespan = 0.0;
};

struct zb_auto_options {
  /// Only the paper's 8 combinations (bubble_rule and later_chunk_first on).
  bool paper_choices_only = false;
  /// Run the local improvement pass (W moved into earlier gaps) on the best greedy result.
  bool improve = true;
  /// Also try the hand-crafted ZB-H1 and ZB-H2 orders (one chunk per stage) when they fit
  /// the limits, and keep them if shorter.
  bool seed_handcrafted = true;
  /// Skip a choice when an earlier run shows it makes the same decisions (its flags that
  /// differ never influenced that run), stop a run once it is longer than the best so far
  /// (a seed included), and run no choice when a seed reaches the lower bound. Exact: the
  /// span is the same; off, every choice runs and reports its own span.
  bool prune = true;
  /// Threads for the greedy runs: 1 (default) runs them one after another; 2 or more run
  /// choices ahead of their turn on that many threads; 0 picks 2 when the machine has them
  /// and the problem is large (p·m·chunks >= 2048). The result is the same for any value:
  /// a run made ahead of its turn is kept only when it provably matches the in-order run
  /// (same cut, or a cut it never reached), else it is redone.
  unsigned threads = 1;
};

/// The result of zb_auto_search / zb_v_search: the schedule, how good it is and how it won.
struct zb_auto_result {
  schedule sched;
  double span = 0.0;         ///< longest stage span (the objective)
  double makespan = 0.0;     ///< time 0 to the last end
  double lower_bound = 0.0;  ///< no schedule within the limits has a shorter span
  double ideal = 0.0;        ///< the largest per-stage busy time (zero-bubble span)
  /// Best greedy span (choices only); −1 when no greedy run finished: a seed reached the
  /// lower bound (the choices are then not run and `tried` is empty) or every run was cut
  /// as longer than a seed.
  double greedy_span = -1.0;
  double seeded_span = 0.0;  ///< after also trying the hand-crafted seeds, before improving
  double zb_h1_span = -1.0;  ///< ZB-H1's span when it fits the limits and was tried, else −1
  double zb_h2_span = -1.0;  ///< ZB-H2's span likewise
  std::string_view winner = "greedy";    ///< "greedy", "zb-h1" or "zb-h2"
  zb_choices best;                       ///< the winning greedy choice
  std::vector<zb_choice_outcome> tried;  ///< every choice tried, in index order
  std::vector<double> limits;            ///< per stage, including static memory
  std::vector<double> peak;              ///< per stage peak of the result, including static

  /// How far the span can be from optimal.
  double gap_to_bound() const noexcept { return span - lower_bound; }
  /// The paper's bubble rate against the per-stage ideal: (span − ideal) / span.
  double bubble_rate() const noexcept { return span > 0.0 ? (span - ideal) / span : 0.0; }
};

namespace detail {

/// Per-stage peak activation memory (plus static) of an order, background §3 semantics.
inline std::vector<double> order_peak(const schedule& sched, const memory_model& memory) {
  std::vector<double> out(sched.stages(), 0.0);
  for (stage_index s = 0; s < sched.stages(); ++s) {
    double cur = memory.static_memory(s);
    double peak = cur;
    for (const op& o : sched.ops(s)) {
      const chunk_memory& cm = memory.at(s, o.chunk);
      if (o.kind == op_kind::forward) {
        cur += cm.activation;
      } else if (o.kind == op_kind::backward_input) {
        cur -= cm.activation - cm.weight_grad_input;
      } else if (o.kind == op_kind::backward_weight) {
        cur -= cm.weight_grad_input;
      } else if (o.kind == op_kind::backward_full) {
        cur -= cm.activation;
      }
      peak = std::max(peak, cur);
    }
    out[s] = peak;
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
    auto dur = [&](const op& o) {
      const std::size_t i = std::size_t{s} * v + o.chunk;
      return o.kind == op_kind::forward ? pr.tf[i]
                                        : (o.kind == op_kind::backward_input ? pr.tb[i] : pr.tw[i]);
    };
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
  schedule out(std::string(name), m, pl);
  for (stage_index s = 0; s < pl.stages(); ++s) {
    out.stage_ops(s) = std::move(ops[s]);
  }
  return out;
}

/// Checks the limits against the minimum any schedule needs: one micro-batch's activations
/// of every chunk on the stage at once (its chunks' forwards all precede their backwards),
/// plus static memory. A schedule that runs one micro-batch at a time reaches that minimum.
inline void check_limits(std::string_view who,
                         const placement& pl,
                         const memory_model& memory,
                         const std::vector<double>& limits) {
  for (stage_index s = 0; s < pl.stages(); ++s) {
    double act = 0.0;
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      act += memory.at(s, c).activation;
    }
    const double need = memory.static_memory(s) + act;
    if (!(limits[s] >= need - 1e-9 * std::max(1.0, need))) {
      fail(who, ": memory_limit (", limits[s],
           ") is below the minimum any schedule needs on stage ", s, " (", need,
           " = static memory ", memory.static_memory(s),
           " + one micro-batch's activations M_B of its ", pl.chunks(), " chunk(s) ", act, ")");
    }
  }
}

/// The greedy flags of a choice.
inline greedy_flags flags_of(const zb_choices& c) {
  return greedy_flags{c.b_first_when_ahead, c.wait_for_b, c.fill_small_gaps, c.bubble_rule,
                      c.later_chunk_first};
}

/// Greedy runs made ahead of their turn, each with the cut it was given.
struct speculative_runs {
  std::vector<greedy_run> runs;
  std::vector<double> cut;
  std::vector<char> done;

  /// Whether run i is exactly what a run with `real_cut` would return: a pruned run only
  /// under the same cut, a finished one when the real cut would never have stopped it.
  bool valid(unsigned i, double real_cut, double eps) const {
    if (i >= done.size() || !done[i]) {
      return false;
    }
    const greedy_run& r = runs[i];
    return r.pruned ? cut[i] == real_cut : !(r.max_bound > real_cut + eps);
  }
};

/// Runs the choices on two threads ahead of the in-order search in zb_search, guessing each
/// run's cut and which choices are duplicates from the runs finished so far. Guesses only
/// decide which work is wasted: zb_search keeps a run only when speculative_runs::valid.
inline speculative_runs speculate(const greedy_problem& pr,
                                  unsigned n_choices,
                                  const zb_auto_options& opts,
                                  double seed_cut) {
  speculative_runs out;
  const std::size_t size = std::size_t{pr.pl.stages()} * pr.m * pr.pl.chunks();
  const unsigned threads =
      opts.threads != 0 ? opts.threads
                        : (std::thread::hardware_concurrency() >= 2 && size >= 2048 ? 2u : 1u);
  if (threads < 2) {
    return out;
  }
  out.runs.resize(n_choices);
  out.cut.assign(n_choices, seed_cut);
  out.done.assign(n_choices, 0);
  std::vector<char> taken(n_choices, 0);
  std::mutex mu;
  // The in-order search's cut and duplicate test, applied to the finished runs before i.
  auto next_job = [&](unsigned& job, double& cut) {
    for (unsigned i = 0; i < n_choices; ++i) {
      if (taken[i]) {
        continue;
      }
      bool dup = false;
      bool have = false;
      double best = 0.0;
      double best_mk = 0.0;
      for (unsigned j = 0; j < i; ++j) {
        if (!out.done[j]) {
          continue;
        }
        const greedy_run& r = out.runs[j];
        dup = dup || (opts.prune && ((i ^ j) & r.used) == 0);
        if (r.ok && (!have || r.max_span < best - pr.eps ||
                     (r.max_span <= best + pr.eps && r.makespan < best_mk - pr.eps))) {
          have = true;
          best = r.max_span;
          best_mk = r.makespan;
        }
      }
      taken[i] = 1;
      if (dup) {
        continue;
      }
      job = i;
      cut = opts.prune && have ? std::min(best, seed_cut) : seed_cut;
      return true;
    }
    return false;
  };
  auto work = [&]() noexcept {
    try {
      greedy_scheduler gs(pr);
      for (;;) {
        unsigned i = 0;
        double cut = greedy_scheduler::never;
        {
          const std::lock_guard<std::mutex> lock(mu);
          if (!next_job(i, cut)) {
            return;
          }
        }
        greedy_run r = gs.run(flags_of(zb_choices::from_index(i)), cut);
        const std::lock_guard<std::mutex> lock(mu);
        out.runs[i] = std::move(r);
        out.cut[i] = cut;
        out.done[i] = 1;
      }
    } catch (...) {
      // Out of memory in a helper: the search redoes whatever is missing.
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) {
      pool.emplace_back(work);
    }
    work();
  }
  return out;
}

/// A candidate order with its exact timing.
struct timed_order {
  std::vector<std::vector<op>> ops;
  std::vector<std::vector<double>> start;
  double span = 0.0;
  double makespan = 0.0;
  bool empty() const noexcept { return ops.empty(); }
  /// Shorter span wins; equal spans (within eps): the shorter makespan.
  bool beats(double span2, double makespan2, double eps) const noexcept {
    return span < span2 - eps || (span <= span2 + eps && makespan < makespan2 - eps);
  }
};

/// The search shared by zb-auto and zb-v. Order of work, cheapest first: the lower bound,
/// the hand-crafted seeds that fit the limits (a seed at the bound ends the search: nothing
/// can be shorter), then every greedy choice with the best span so far as its cut, then the
/// improvement pass on the winner.
inline zb_auto_result zb_search(std::string_view who,
                                const generator_params& params,
                                const placement& pl,
                                std::vector<double> limits,
                                const zb_auto_options& opts) {
  check_limits(who, pl, params.memory, limits);
  const std::uint32_t p = pl.stages();
  const std::uint32_t m = params.microbatches;
  std::vector<double> avail(p);
  for (stage_index s = 0; s < p; ++s) {
    avail[s] = limits[s] - params.memory.static_memory(s);
  }
  const greedy_problem pr(pl, m, params.costs, params.memory, avail);
  zb_auto_result res;
  const double bound = span_lower_bound(pl, m, params.costs, params.memory, avail);
  // Seeds: the hand-crafted ZB-H1 / ZB-H2 orders, when they fit the limits. The greedy's
  // list scheduling can lose to them with T_comm or uneven per-stage costs.
  timed_order seed;
  if (opts.seed_handcrafted && pl.chunks() == 1) {
    for (int h = 0; h < 2; ++h) {
      schedule cand = zero_bubble_family(h == 0 ? "zb-h1" : "zb-h2", params, h == 1);
      const std::vector<double> pk = order_peak(cand, params.memory);
      bool fits = true;
      for (stage_index s = 0; s < p; ++s) {
        fits = fits && pk[s] <= limits[s] + pr.eps;
      }
      if (!fits) {
        continue;
      }
      timed_order t;
      t.ops.resize(p);
      for (stage_index s = 0; s < p; ++s) {
        t.ops[s].assign(cand.ops(s).begin(), cand.ops(s).end());
      }
      const order_times ot = time_order(pr, t.ops, t.start);
      PIPESCHED_ASSERT(ot.complete, "zb_search: a hand-crafted seed deadlocks");
      if (!ot.complete) {
        continue;
      }
      t.span = ot.max_span;
      t.makespan = ot.makespan;
      (h == 0 ? res.zb_h1_span : res.zb_h2_span) = t.span;
      if (seed.empty() || t.beats(seed.span, seed.makespan, pr.eps)) {
        seed = std::move(t);
        res.winner = h == 0 ? "zb-h1" : "zb-h2";
      }
    }
  }
  // The greedy choices, unless a seed already reaches the bound.
  const bool seed_optimal = opts.prune && !seed.empty() && seed.span <= bound + pr.eps;
  const unsigned n_choices = seed_optimal              ? 0u
                             : opts.paper_choices_only ? 8u
                                                       : (pl.chunks() > 1 ? 32u : 16u);
  const double seed_cut = opts.prune && !seed.empty() ? seed.span : greedy_scheduler::never;
  speculative_runs spec = speculate(pr, n_choices, opts, seed_cut);
  greedy_scheduler gs(pr);
  greedy_run best_run;
  double best_span = 0.0;
  double best_makespan = 0.0;
  std::vector<unsigned> used(n_choices, 0);
  for (unsigned i = 0; i < n_choices; ++i) {
    const zb_choices c = zb_choices::from_index(i);
    if (opts.prune) {
      bool dup = false;
      for (unsigned j = 0; j < i && !dup; ++j) {
        if (((i ^ j) & used[j]) == 0 && res.tried[j].same_as < 0) {
          zb_choice_outcome o = res.tried[j];
          o.choices = c;
          o.same_as = int(j);
          res.tried.push_back(o);
          dup = true;
        }
      }
      if (dup) {
        continue;
      }
    }
    const double cut =
        opts.prune && !best_run.ops.empty() ? std::min(best_span, seed_cut) : seed_cut;
    greedy_run run =
        spec.valid(i, cut, pr.eps) ? std::move(spec.runs[i]) : gs.run(flags_of(c), cut);
    used[i] = run.used;
    res.tried.push_back(
        {c, run.ok, run.pruned, -1, run.ok ? run.max_span : 0.0, run.ok ? run.makespan : 0.0});
    if (!run.ok) {
      continue;
    }
    const bool better =
        best_run.ops.empty() || run.max_span < best_span - pr.eps ||
        (run.max_span <= best_span + pr.eps && run.makespan < best_makespan - pr.eps);
    if (better) {
      best_span = run.max_span;
      best_makespan = run.makespan;
      res.best = c;
      best_run = std::move(run);
    }
  }
  timed_order cur;
  if (!best_run.ops.empty()) {
    res.greedy_span = best_span;
    cur.ops = std::move(best_run.ops);
    cur.start = std::move(best_run.start);
    cur.span = best_span;
    cur.makespan = best_makespan;
  }
  // A seed replaces the greedy's order only when strictly better.
  if (!seed.empty() && (cur.empty() || seed.beats(cur.span, cur.makespan, pr.eps))) {
    cur = std::move(seed);
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
    std::vector<std::vector<double>> start2;
    for (int round = 0; round < 4; ++round) {
      auto trial = cur.ops;
      if (!fill_gaps_with_w(pr, trial, cur.start)) {
        break;
      }
      const order_times t = time_order(pr, trial, start2);
      if (!t.complete || t.max_span > res.span + pr.eps) {
        break;  // cannot happen (monotone), but never accept a worse order
      }
      res.span = t.max_span;
      res.makespan = t.makespan;
      cur.ops = std::move(trial);
      std::swap(cur.start, start2);
    }
  }
  res.sched = to_schedule(who, m, pl, std::move(cur.ops));
  res.limits = std::move(limits);
  res.peak = order_peak(res.sched, params.memory);
  res.lower_bound = std::min(res.span, bound);
  for (stage_index s = 0; s < p; ++s) {
    double busy = 0.0;
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      const op_costs& t = params.costs.at(s, c);
      busy += double(m) * (t.forward + t.backward_input + t.backward_weight);
    }
    res.ideal = std::max(res.ideal, busy);
  }
  return res;
}

/// Per-stage limits: the given memory_limit for every stage, or `factor`·(activations of all
/// chunks of one micro-batch)·p + static memory when none is given.
inline std::vector<double> stage_limits(std::string_view who,
                                        const generator_params& params,
                                        const placement& pl,
                                        double factor) {
  std::vector<double> out(pl.stages());
  if (params.memory_limit) {
    const double lim = *params.memory_limit;
    if (!std::isfinite(lim) || lim < 0.0) {
      fail(who, ": memory_limit (", lim, ") must be finite and >= 0");
    }
    std::fill(out.begin(), out.end(), lim);
    return out;
  }
  for (stage_index s = 0; s < pl.stages(); ++s) {
    double act = 0.0;
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      act += params.memory.at(s, c).activation;
    }
    out[s] = params.memory.static_memory(s) + factor * double(pl.stages()) * act;
  }
  return out;
}

}  // namespace detail

/// Which memory limit zb_auto uses.
enum class zb_memory_preset : std::uint8_t {
  given,  ///< "zb-auto": generator_params::memory_limit, or p·M_B per stage (1F1B's peak)
  one_p,  ///< "zb-1p": p·M_B per stage (+ static memory)
  two_p,  ///< "zb-2p": 2p·M_B per stage (+ static memory)
};

/// The memory-bounded automatic zero-bubble scheduler (background §5), one chunk per stage,
/// split B/W. Honours per-stage costs, T_comm (uniform or per link), M_B / M_W, static memory
/// and a per-stage memory limit (in the units of generator_params::memory, static included).
/// The paper's greedy is run for every choice combination (16 here: the paper's 8 and the
/// bubble rule off; runs proven identical are skipped and runs already longer than the best
/// are cut), the hand-crafted ZB-H1 / ZB-H2 orders are tried when they fit the limits, the
/// shortest longest-stage span is kept (ties: shorter makespan), then W ops are moved into
/// earlier gaps. The result carries a lower bound (detail/zb_bound.hpp) on any schedule's
/// span within the same limits. Never exceeds the limit; throws invalid_argument when the
/// limit is below one micro-batch's activations plus static memory on some stage (the true
/// minimum: a one-micro-batch-at-a-time order needs exactly that). With unit costs it reaches
/// ZB-H1's span at p·M_B and zero bubble at 2p·M_B. Each run is O(p·m·log p).
inline zb_auto_result zb_auto_search(const generator_params& params,
                                     const zb_auto_options& opts = {},
                                     zb_memory_preset preset = zb_memory_preset::given,
                                     std::string_view who = "zb-auto") {
  detail::check_shape(who, params, 1, 3);
  if (preset != zb_memory_preset::given && params.memory_limit) {
    detail::fail(who, ": memory_limit must not be given: this preset fixes it to ",
                 preset == zb_memory_preset::one_p ? "p" : "2p", "*M_B (use zb-auto)");
  }
  const placement pl = placement::sequential(params.stages);
  const double factor = preset == zb_memory_preset::two_p ? 2.0 : 1.0;
  return detail::zb_search(who, params, pl, detail::stage_limits(who, params, pl, factor), opts);
}

/// schedule_generator for zb_auto_search: "zb-auto", "zb-1p" or "zb-2p".
struct zb_auto {
  zb_memory_preset preset = zb_memory_preset::given;

  std::string_view name() const noexcept {
    switch (preset) {
      case zb_memory_preset::one_p:
        return "zb-1p";
      case zb_memory_preset::two_p:
        return "zb-2p";
      default:
        return "zb-auto";
    }
  }
  schedule generate(const generator_params& params) const {
    return zb_auto_search(params, {}, preset, name()).sched;
  }
};

}  // namespace pipesched
