#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
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
  const std::uint32_t G = pl.total_chunks();
  // Prefix sums along the global chunk chain: F costs, B costs, comm on each hop.
  std::vector<double> fpre(G + 1, 0.0);
  std::vector<double> bpre(G + 1, 0.0);
  std::vector<double> hop(G, 0.0);  // hop[g] = comm between chunk g and g+1 (either direction)
  std::vector<double> hpre(G + 1, 0.0);
  for (global_chunk g = 0; g < G; ++g) {
    const stage_index s = pl.stage_of(g);
    const chunk_index c = pl.local_of(g);
    fpre[g + 1] = fpre[g] + costs.at(s, c).forward;
    bpre[g + 1] = bpre[g] + costs.at(s, c).backward_input;
    if (g + 1 < G) {
      const stage_index t = pl.stage_of(g + 1);
      hop[g] = std::min(costs.comm(s, t), costs.comm(t, s));
    }
    hpre[g + 1] = hpre[g] + hop[g];
  }
  const double meps = memory_tolerance(pl, memory, avail);
  // Drain chain (one chunk per stage): chain(s, j) + m·(F_j + B_j) = reach[j] − at(s) with
  // at(j) = fpre[j] + bpre[j] + 2·hpre[j] and reach[j] = at(j) + m·(F_j + B_j), so the best
  // j > s is a suffix maximum of reach: O(p) in all, not O(p²). (Grouped differently from
  // the per-pair sum, so the bound can differ from it in the last bit.)
  std::vector<double> reach_after;  // [s] = max_{j > s} reach[j]
  if (v == 1) {
    reach_after.assign(p, -std::numeric_limits<double>::infinity());
    for (stage_index j = p; j-- > 1;) {
      const op_costs& t = costs.at(j, 0);
      const double reach =
          (fpre[j] + bpre[j] + 2.0 * hpre[j]) + double(m) * (t.forward + t.backward_input);
      reach_after[j - 1] = j + 1 < p ? std::max(reach_after[j], reach) : reach;
    }
  }
  search_bounds out;
  for (stage_index s = 0; s < p; ++s) {
    double best = 0.0;                      // stage s's span bound
    const double budget = avail[s] + meps;  // the most memory an order may hold
    double busy = 0.0;
    global_chunk gmin = G;
    global_chunk gmax = 0;
    for (chunk_index c = 0; c < v; ++c) {
      const op_costs& t = costs.at(s, c);
      busy += double(m) * (t.forward + t.backward_input + t.backward_weight);
      gmin = std::min(gmin, pl.global(s, c));
      gmax = std::max(gmax, pl.global(s, c));
    }
    // Forward gmin..G-1, backward G-1..gmax+1 (B of gmax needs B of gmax+1), hops both ways.
    const double d_head = (fpre[G] - fpre[gmin]) + (bpre[G] - bpre[gmax + 1]) +
                          (hpre[G - 1] - hpre[gmin]) + (hpre[G - 1] - hpre[gmax]);
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
      const double window =
          (fpre[G] - fpre[s + 1]) + (bpre[G] - bpre[s + 1]) + 2.0 * (hpre[G - 1] - hpre[s]);
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
      const double at_s = fpre[s] + bpre[s] + 2.0 * hpre[s];
      best = std::max(best, reach_after[s] - at_s + costs.at(s, 0).backward_weight);
    }
    if (v == 1 && memory.at(s, 0).activation > 0.0) {
      // Throughput: each micro-batch holds M_B from its F's start to its B's end, at least
      // F + the round trip below + B; at most k fit in the budget at once, so some k-th of
      // them run back to back; then at least one W follows the last B.
      const op_costs& t = costs.at(s, 0);
      const double k = std::max(1.0, std::floor(budget / memory.at(s, 0).activation));
      const double hold = t.forward + t.backward_input + (fpre[G] - fpre[s + 1]) +
                          (bpre[G] - bpre[s + 1]) + 2.0 * (hpre[G - 1] - hpre[s]);
      best = std::max(best, std::ceil(double(m) / k - 1e-9) * hold + t.backward_weight);
    }
    out.span = std::max(out.span, best);
    out.makespan = std::max(out.makespan, (fpre[gmin] + hpre[gmin]) + best);
  }
  return out;
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
  const std::uint32_t G = pl.total_chunks();
  // Prefix sums along the global chunk chain of the cheapest F and B, and of the hops.
  std::vector<double> fpre(G + 1, 0.0), bpre(G + 1, 0.0), hpre(G + 1, 0.0);
  for (global_chunk g = 0; g < G; ++g) {
    const stage_index s = pl.stage_of(g);
    const chunk_index c = pl.local_of(g);
    double f = std::numeric_limits<double>::infinity();
    double b = f;
    for (microbatch_index j = 0; j < m; ++j) {
      const op_costs t = costs.at(s, c, j);
      f = std::min(f, t.forward);
      b = std::min(b, t.backward_input);
    }
    fpre[g + 1] = fpre[g] + f;
    bpre[g + 1] = bpre[g] + b;
    const double hop =
        g + 1 < G ? std::min(costs.comm(s, pl.stage_of(g + 1)), costs.comm(pl.stage_of(g + 1), s))
                  : 0.0;
    hpre[g + 1] = hpre[g] + hop;
  }
  const double meps = memory_tolerance(pl, memory, avail);
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
  search_bounds out;
  for (stage_index s = 0; s < p; ++s) {
    const double budget = avail[s] + meps;
    global_chunk gmin = G;
    global_chunk gmax = 0;
    for (chunk_index c = 0; c < v; ++c) {
      gmin = std::min(gmin, pl.global(s, c));
      gmax = std::max(gmax, pl.global(s, c));
    }
    const double d_head = (fpre[G] - fpre[gmin]) + (bpre[G] - bpre[gmax + 1]) +
                          (hpre[G - 1] - hpre[gmin]) + (hpre[G - 1] - hpre[gmax]);
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
        const double chain = (fpre[j] - fpre[s]) + (bpre[j] - bpre[s]) + 2.0 * (hpre[j] - hpre[s]);
        best = std::max(best, chain + fb_work[j] + w_min);
      }
      if (smallest > 0.0) {  // throughput
        const double k = std::max(1.0, std::floor(budget / smallest));
        const double below =
            (fpre[G] - fpre[s + 1]) + (bpre[G] - bpre[s + 1]) + 2.0 * (hpre[G - 1] - hpre[s]);
        best = std::max(best, std::ceil(double(m) / k - 1e-9) * (hold + below) + w_min);
      }
    }
    out.span = std::max(out.span, best);
    out.makespan = std::max(out.makespan, (fpre[gmin] + hpre[gmin]) + best);
  }
  return out;
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
