#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched::detail {

/// Lower bounds on the two objectives of the zero-bubble search (docs/model.md §7).
struct search_bounds {
  double span = 0.0;      ///< on the longest stage span of any order within the budgets
  double makespan = 0.0;  ///< on the makespan (time 0 to the last end) of any such order
};

/// Prefix sums along the global chunk chain: F costs, B costs and the comm of each hop (the
/// cheaper direction; none after the last chunk), and the chain lengths the bounds read off
/// them. `fb(s, c)` gives chunk (s, c)'s F and B cost.
struct chunk_chain {
  std::vector<double> f, b, h;  ///< [g]: the sum over the chunks (hops) before g

  template <class FB>
  chunk_chain(const placement& pl, const shaped_cost_model& costs, FB fb)
      : f(pl.total_chunks() + 1, 0.0), b(f), h(f) {
    const std::uint32_t G = pl.total_chunks();
    for (global_chunk g = 0; g < G; ++g) {
      const stage_index s = pl.stage_of(g);
      const auto [fg, bg] = fb(s, pl.local_of(g));
      f[g + 1] = f[g] + fg;
      b[g + 1] = b[g] + bg;
      const double hop =
          g + 1 < G ? std::min(costs.comm(s, pl.stage_of(g + 1)), costs.comm(pl.stage_of(g + 1), s))
                    : 0.0;
      h[g + 1] = h[g] + hop;
    }
  }

  std::uint32_t chunks() const noexcept { return static_cast<std::uint32_t>(f.size() - 1); }
  /// Forward from `lo` to the last chunk, backward from it back to `hi` + 1, hops both ways:
  /// how long before a stage with chunks lo..hi can run its first B.
  double head(global_chunk lo, global_chunk hi) const {
    const std::uint32_t G = chunks();
    return (f[G] - f[lo]) + (b[G] - b[hi + 1]) + (h[G - 1] - h[lo]) + (h[G - 1] - h[hi]);
  }
  /// The round trip below stage s of a one-chunk placement: F and B of every later chunk
  /// and each hop twice.
  double below(std::size_t s) const {
    const std::uint32_t G = chunks();
    return (f[G] - f[s + 1]) + (b[G] - b[s + 1]) + 2.0 * (h[G - 1] - h[s]);
  }
  /// F and B of every chunk before g and each hop twice: where the drain chain stands at g.
  double at(std::size_t g) const { return f[g] + b[g] + 2.0 * h[g]; }
  /// The same between chunks s and j (summed per term, as the per-pair drain bound does).
  double between(std::size_t s, std::size_t j) const {
    return (f[j] - f[s]) + (b[j] - b[s]) + 2.0 * (h[j] - h[s]);
  }
  /// The forward chain from chunk 0 to chunk g (F costs and hops).
  double forward_to(global_chunk g) const { return f[g] + h[g]; }
};

/// A stage's lowest and highest global chunk.
struct chunk_range {
  global_chunk lo;
  global_chunk hi;
};

inline chunk_range chunks_of(const placement& pl, stage_index s) {
  chunk_range r{pl.total_chunks(), 0};
  for (chunk_index c = 0; c < pl.chunks(); ++c) {
    r.lo = std::min(r.lo, pl.global(s, c));
    r.hi = std::max(r.hi, pl.global(s, c));
  }
  return r;
}

/// What both bounds below share: per stage s, `stage_bound(s, budget, d_head)` gives its span
/// bound from the most memory an order may hold there (avail[s] + memory_tolerance) and the
/// head window (chain.head over its chunks); the makespan bound adds the forward chain to the
/// stage's lowest chunk, which its first op waits for.
template <class StageBound>
search_bounds bounds_by_stage(const placement& pl,
                              const chunk_chain& chain,
                              const shaped_memory_model& memory,
                              const std::vector<double>& avail,
                              StageBound stage_bound) {
  const double meps = memory_tolerance(pl, memory, avail);
  search_bounds out;
  for (stage_index s = 0; s < pl.stages(); ++s) {
    const chunk_range own = chunks_of(pl, s);
    const double best = stage_bound(s, avail[s] + meps, chain.head(own.lo, own.hi));
    out.span = std::max(out.span, best);
    out.makespan = std::max(out.makespan, chain.forward_to(own.lo) + best);
  }
  return out;
}

/// The throughput bound (one chunk per stage): each micro-batch holds `activation` from its F's
/// start to its B's end, at least `hold` (F + the round trip below + B); at most k = budget /
/// activation fit at once, so some k-th of the m run back to back; then at least one W (`w`)
/// follows the last B.
inline double throughput_bound(
    std::uint32_t m, double budget, double activation, double hold, double w) {
  const double k = std::max(1.0, std::floor(budget / activation));
  return std::ceil(double(m) / k - 1e-9) * hold + w;
}

/// Lower bounds on the longest stage span and on the makespan of any compute schedule (split
/// B/W) for this placement, costs and per-stage activation budget (`avail[s]` = limit − static
/// memory).
///
/// span, per stage s: busy_s = m·Σ_c (T_F+T_B+T_W), plus unavoidable idle:
/// - head: the stage's first B can start no earlier than D_s after its first op, where D_s is
///   the forward path from the stage's lowest global chunk to the last chunk and the backward
///   path back to its highest one (with T_comm on every stage change). Before that B only
///   forwards can run, at most what the budget holds (a fractional knapsack bound), so
///   idle ≥ D_s − that work.
/// - tail (one chunk per stage): after the stage's last F, its last B waits for the
///   round trip below it; the stage can fill that window only with B/W of micro-batches still
///   held (≤ budget/M_B of them) and deferred W (each holding M_W), so idle ≥ window − work.
/// The two idle windows are disjoint when more forwards exist than fit before the first B,
/// so they add; otherwise the larger counts.
/// - throughput (one chunk per stage): at most k = budget/M_B micro-batches are held at once,
///   each for at least F + round trip + B, so span ≥ ⌈m/k⌉·(that) + T_W.
/// - drain chain (one chunk per stage): a later stage j starts its first F no earlier than
///   the forward chain from stage s allows, runs all its m F and m B before its last B ends,
///   and that B's gradient then travels back to s, where one W still follows:
///   span_s ≥ Σ_{t=s}^{j−1} (F_t + B_t + 2·T_comm) + m·(F_j + B_j) + W_s.
/// Memory counts use the memory engine's closed form (held_after: k activations and b pending
/// W hold k·M_B + b·M_W) and the schedulers' own admission: an amount fits when it is at most
/// avail[s] + memory_tolerance, so the bound never excludes an order they can produce.
///
/// makespan: every stage's first op is an F (a B follows its own F, a W its B) of one of its
/// chunks, which waits for the forward chain from global chunk 0 to the stage's lowest chunk
/// (F costs and T_comm on every stage change): r_s. The stage's span bound b_s (the largest of
/// the terms above for s) then starts no earlier, so makespan ≥ max over s of r_s + b_s; it is
/// what lets a heavy last stage of a one-chunk placement show, which starts r_{p−1} late.
inline search_bounds lower_bounds(const placement& pl,
                                  std::uint32_t m,
                                  const shaped_cost_model& costs,
                                  const shaped_memory_model& memory,
                                  const std::vector<double>& avail) {
  const std::uint32_t p = pl.stages();
  const std::uint32_t v = pl.chunks();
  const chunk_chain chain(pl, costs, [&](stage_index s, chunk_index c) {
    return std::pair{costs.at(s, c).forward, costs.at(s, c).backward_input};
  });
  // Drain chain (one chunk per stage): chain.between(s, j) + m·(F_j + B_j) = reach[j] −
  // chain.at(s) with reach[j] = chain.at(j) + m·(F_j + B_j), so the best j > s is a suffix
  // maximum of reach: O(p) in all, not O(p²). (Grouped differently from
  // the per-pair sum, so the bound can differ from it in the last bit.)
  std::vector<double> reach_after;  // [s] = max_{j > s} reach[j]
  if (v == 1) {
    reach_after.assign(p, -std::numeric_limits<double>::infinity());
    for (stage_index j = p; j-- > 1;) {
      const op_costs& t = costs.at(j, 0);
      const double reach = chain.at(j) + double(m) * (t.forward + t.backward_input);
      reach_after[j - 1] = j + 1 < p ? std::max(reach_after[j], reach) : reach;
    }
  }
  auto stage_bound = [&](stage_index s, double budget, double d_head) {
    double best = 0.0;  // stage s's span bound
    double busy = 0.0;
    for (chunk_index c = 0; c < v; ++c) {
      const op_costs& t = costs.at(s, c);
      busy += double(m) * (t.forward + t.backward_input + t.backward_weight);
    }
    // Fractional knapsack: most forward time per unit of activation memory first.
    std::vector<chunk_index> order(v);
    for (chunk_index c = 0; c < v; ++c) {
      order[c] = c;
    }
    auto ratio = [&](chunk_index c) {
      const double mb = memory.at(s, c).activation;
      return mb <= 0.0 ? 1e300 : costs.at(s, c).forward / mb;
    };
    std::sort(order.begin(), order.end(),
              [&](chunk_index a, chunk_index b) { return ratio(a) > ratio(b); });
    double room = std::max(0.0, budget);
    double fwork = 0.0;
    double fcount = 0.0;
    for (chunk_index c : order) {
      const double mb = memory.at(s, c).activation;
      double n = double(m);
      if (mb > 0.0) {
        n = std::min(n, v == 1 ? std::floor(room / mb) : room / mb);
      }
      fwork += n * costs.at(s, c).forward;
      fcount += n;
      room -= n * mb;
    }
    const double head = std::max(0.0, d_head - fwork);
    double tail = 0.0;
    if (v == 1 && s + 1 < p) {
      const op_costs& t = costs.at(s, 0);
      const chunk_memory& mm = memory.at(s, 0);
      const double window = chain.below(s);
      // a other micro-batches held (each can do B+W in the window), b deferred W.
      const double held = mm.activation > 0.0 ? std::floor(budget / mm.activation) : double(m);
      const double a_max = std::max(0.0, std::min(double(m) - 1.0, held - 1.0));
      double work = 0.0;
      for (double a = 0.0; a <= a_max; a += 1.0) {
        double b = double(m) - 1.0 - a;
        if (mm.weight_grad_input > 0.0) {
          b = std::min(
              b, std::floor((budget - held_after(a + 1.0, 0.0, 0.0, mm)) / mm.weight_grad_input));
        }
        b = std::max(0.0, b);
        work = std::max(work, a * (t.backward_input + t.backward_weight) + b * t.backward_weight);
      }
      tail = std::max(0.0, window - work);
    }
    const bool disjoint = double(m) > fcount + 1e-9;
    const double idle = disjoint ? head + tail : std::max(head, tail);
    best = std::max(best, busy + idle);
    if (v == 1 && s + 1 < p) {
      const double at_s = chain.at(s);
      best = std::max(best, reach_after[s] - at_s + costs.at(s, 0).backward_weight);
    }
    if (v == 1 && memory.at(s, 0).activation > 0.0) {
      const op_costs& t = costs.at(s, 0);
      best = std::max(
          best, throughput_bound(m, budget, memory.at(s, 0).activation,
                                 t.forward + t.backward_input + chain.below(s), t.backward_weight));
    }
    return best;
  };
  return bounds_by_stage(pl, chain, memory, avail, stage_bound);
}

/// lower_bounds when micro-batches differ (per-micro-batch factors, docs/model.md §3.1, §5.1):
/// the terms above that stay valid whichever micro-batch runs where, in a simpler form (weaker,
/// never wrong): every chain is timed with each chunk's cheapest F and B over the micro-batches.
/// Per stage s: busy_s = Σ_j Σ_c (F+B+W)(j); the head window less the most forward work the
/// budget holds (a fractional knapsack over every (micro-batch, chunk)); with one chunk per
/// stage the drain chain (a forward to stage j, all of j's F and B, a backward back to s and a
/// W on s) and throughput (at most budget / the smallest M_B held at once, each for at least
/// its F + B + the backward below). The makespan: the forward chain to the stage's lowest chunk
/// plus its span bound.
inline search_bounds lower_bounds_per_microbatch(const placement& pl,
                                                 std::uint32_t m,
                                                 const shaped_cost_model& costs,
                                                 const shaped_memory_model& memory,
                                                 const std::vector<double>& avail) {
  const std::uint32_t p = pl.stages();
  const std::uint32_t v = pl.chunks();
  // The chain of each chunk's cheapest F and B over the micro-batches.
  const chunk_chain chain(pl, costs, [&](stage_index s, chunk_index c) {
    double f = std::numeric_limits<double>::infinity();
    double b = f;
    for (microbatch_index j = 0; j < m; ++j) {
      const op_costs t = costs.at(s, c, j);
      f = std::min(f, t.forward);
      b = std::min(b, t.backward_input);
    }
    return std::pair{f, b};
  });
  std::vector<double> fb_work(p, 0.0);  // Σ_j Σ_c (F + B)(j) per stage
  std::vector<double> busy(p, 0.0);
  for (stage_index s = 0; s < p; ++s) {
    for (chunk_index c = 0; c < v; ++c) {
      for (microbatch_index j = 0; j < m; ++j) {
        const op_costs t = costs.at(s, c, j);
        fb_work[s] += t.forward + t.backward_input;
        busy[s] += t.forward + t.backward_input + t.backward_weight;
      }
    }
  }
  auto stage_bound = [&](stage_index s, double budget, double d_head) {
    // The most forward work that fits before the first B: most work per unit of memory first.
    struct item {
      double work, size;
    };
    std::vector<item> items;
    items.reserve(std::size_t{m} * v);
    for (chunk_index c = 0; c < v; ++c) {
      for (microbatch_index j = 0; j < m; ++j) {
        items.push_back({costs.at(s, c, j).forward, memory.at(s, c, j).activation});
      }
    }
    std::sort(items.begin(), items.end(),
              [](const item& a, const item& b) { return a.work * b.size > b.work * a.size; });
    double room = std::max(0.0, budget);
    double fwork = 0.0;
    for (const item& it : items) {
      const double n = it.size <= 0.0 ? 1.0 : std::min(1.0, room / it.size);
      if (n <= 0.0) {
        break;
      }
      fwork += n * it.work;
      room -= n * it.size;
    }
    double best = busy[s] + std::max(0.0, d_head - fwork);
    if (v == 1) {
      double smallest = std::numeric_limits<double>::infinity();
      double hold = smallest;
      double w_min = smallest;
      for (microbatch_index j = 0; j < m; ++j) {
        const op_costs t = costs.at(s, 0, j);
        smallest = std::min(smallest, memory.at(s, 0, j).activation);
        hold = std::min(hold, t.forward + t.backward_input);
        w_min = std::min(w_min, t.backward_weight);
      }
      for (stage_index j = s + 1; j < p; ++j) {  // drain chain
        best = std::max(best, chain.between(s, j) + fb_work[j] + w_min);
      }
      if (smallest > 0.0) {
        best = std::max(best, throughput_bound(m, budget, smallest, hold + chain.below(s), w_min));
      }
    }
    return best;
  };
  return bounds_by_stage(pl, chain, memory, avail, stage_bound);
}

/// lower_bounds(...).span: no order within the budgets has a shorter longest stage span.
inline double span_lower_bound(const placement& pl,
                               std::uint32_t m,
                               const shaped_cost_model& costs,
                               const shaped_memory_model& memory,
                               const std::vector<double>& avail) {
  return lower_bounds(pl, m, costs, memory, avail).span;
}

}  // namespace pipesched::detail
