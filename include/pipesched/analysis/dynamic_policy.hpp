#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/robustness.hpp"
#include "pipesched/analysis/timing_simulator.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/perturbation.hpp"

// The dynamic policy (docs/robustness.md §3): instead of a fixed order, each stage picks its
// next op when it becomes free, by priority: a B whose input gradient has arrived, else an F
// whose input has arrived and that memory admits, else a pending W. The runtime heuristic the
// zero-bubble scheduler is usually described with; here simulated under a sampled
// perturbation so it compares with static orders under the same noise.

namespace pipesched {

struct dynamic_policy_options {
  /// Sizes for the admission test (docs/model.md §5, through memory_events.hpp).
  memory_model memory{};
  /// Per stage, static memory included; none: F is always admitted. Must leave room for one
  /// micro-batch's activations of every chunk of the stage (else the policy could block).
  std::optional<double> memory_limit;
  perturbation noise{};      ///< none by default: the clean cost model
  std::uint64_t sample = 0;  ///< which sample of `noise`
};

/// What the policy ran: the order each stage chose, and its times.
struct dynamic_result {
  /// The order, per stage in run order (F, B, W ops; name "dynamic"). It validates, fits the
  /// limit (check_memory) and, simulated under the same sample (simulate_perturbed), gives
  /// exactly `decided`'s times.
  schedule order;
  /// The order timed by the timing engine under the same sample: the reported result.
  simulation_result timing;
  /// The start and end the policy saw when it chose each op, per stage in run order.
  std::vector<std::vector<timed_op>> decided;
};

namespace detail {

/// Per (global chunk, micro-batch): the end of each event (event_bit position), or < 0.
class event_ends {
 public:
  event_ends(std::size_t chunks, std::uint32_t m) : chunks_(chunks), ends_(chunks * m * 8, -1.0) {}
  double& at(global_chunk g, microbatch_index mb, event_kind e) {
    return ends_[(std::size_t{mb} * chunks_ + g) * 8 + static_cast<std::size_t>(e)];
  }

 private:
  std::size_t chunks_;
  std::vector<double> ends_;
};

}  // namespace detail

/// Runs the dynamic policy on placement `pl` with `microbatches` micro-batches, `costs` and
/// options: a discrete-event simulation in which each stage, whenever it is free at time t,
/// starts the first of
///   1. a B whose inputs are ready by t (lowest micro-batch, then the chunk latest in the model),
///   2. an F ready by t that memory admits (the chunk latest in the model first; F of each chunk
///      in micro-batch order): live memory + its allocation + one activation of each later
///      chunk of the stage that still has F to run (the room that keeps the V / interleaved
///      placements from blocking) <= the limit,
///   3. the oldest pending W;
/// and when nothing qualifies waits for the next arrival. Times follow docs/model.md §3 with
/// the sampled durations and latencies (perturbed_costs), so the recorded order, simulated by
/// the timing engine under the same sample, gives the same times (dynamic_result::timing).
/// Throws invalid_argument for a memory limit below one activation of every chunk of a stage,
/// and when the policy cannot go on (no stage has an op it may run).
inline dynamic_result simulate_dynamic(const placement& pl,
                                       std::uint32_t microbatches,
                                       const cost_model& costs,
                                       const dynamic_policy_options& o = {}) {
  const char* who = "simulate_dynamic";
  const std::uint32_t p = pl.stages();
  const std::uint32_t v = pl.chunks();
  const std::uint32_t m = microbatches;
  schedule order("dynamic", m, pl);  // checks m
  const memory_model mem = o.memory.for_shape(p, v, who);
  const perturbed_costs pc(pl, m, false, costs, o.noise, o.sample, who);
  const detail::traversal_plan& plan = pc.plan();
  constexpr double inf = std::numeric_limits<double>::infinity();

  // Stage state: when it is free, its live memory, the next F and B of each local chunk, and
  // the W whose B ran, oldest first.
  struct stage_state {
    double free_at = 0.0;
    double live = 0.0;
    std::vector<microbatch_index> next_f, next_b;
    std::deque<op> pending_w;
  };
  std::vector<stage_state> st(p);
  for (stage_index s = 0; s < p; ++s) {
    st[s].live = mem.static_memory(s);
    st[s].next_f.assign(v, 0);
    st[s].next_b.assign(v, 0);
    if (o.memory_limit) {
      double need = mem.static_memory(s);
      for (chunk_index c = 0; c < v; ++c) {
        need += mem.at(s, c).activation;
      }
      if (!(*o.memory_limit >= need)) {
        detail::fail(who, ": memory_limit (", *o.memory_limit, ") must be at least ", need,
                     " on stage ", s,
                     ": static memory plus one micro-batch's activations of each of its chunks");
      }
    }
  }
  detail::event_ends ends(pl.total_chunks(), m);

  // When `x` on stage s may start as far as its inputs go (inf: an input is not produced yet).
  auto ready = [&](stage_index s, const op& x) {
    const detail::op_plan& e = plan.at(s, x);
    const detail::op_cost& c = pc.of(s, x);
    double t = 0.0;
    for (std::uint8_t k = 0; k < e.count; ++k) {
      const double end = ends.at(e.deps[k].chunk, x.mb, e.deps[k].what);
      if (end < 0.0) {
        return inf;
      }
      t = std::max(t, end + (e.deps[k].remote ? c.latency[k] : 0.0));
    }
    return t;
  };
  auto admits = [&](stage_index s, const op& f) {
    if (!o.memory_limit) {
      return true;
    }
    double need = st[s].live + memory_delta(op_kind::forward, mem.at(s, f.chunk));
    for (chunk_index c = static_cast<chunk_index>(f.chunk + 1); c < v; ++c) {
      if (st[s].next_f[c] < m) {
        need += mem.at(s, c).activation;
      }
    }
    return need <= *o.memory_limit;
  };
  // The op stage s runs next and when, by the policy, or nullopt when it has none it may run.
  struct choice {
    op x{};
    double start = inf;
  };
  std::vector<std::pair<op, double>> candidates;
  auto decide = [&](stage_index s) -> std::optional<choice> {
    const stage_state& ss = st[s];
    // The stage acts at the first moment something is eligible (a W is: its B ran here) ...
    std::vector<std::pair<op, double>>& cand = candidates;
    cand.clear();
    double earliest = ss.pending_w.empty() ? inf : ss.free_at;
    for (chunk_index c = 0; c < v; ++c) {
      if (ss.next_b[c] < m) {
        const op b{op_kind::backward_input, ss.next_b[c], c};
        cand.emplace_back(b, ready(s, b));
      }
      if (ss.next_f[c] < m) {
        const op f{op_kind::forward, ss.next_f[c], c};
        if (admits(s, f)) {
          cand.emplace_back(f, ready(s, f));
        }
      }
    }
    for (const auto& [x, r] : cand) {
      earliest = std::min(earliest, r);
    }
    if (earliest == inf) {
      return std::nullopt;
    }
    const double at = std::max(ss.free_at, earliest);
    // ... and takes the highest class ready by then: a B (lowest micro-batch, then the chunk
    // later in the model, whose gradient goes further), else an F (the later chunk), else a W.
    std::optional<op> best;
    auto rank = [&](const op& x) {
      return std::pair{x.kind == op_kind::backward_input ? 0 : 1,
                       x.kind == op_kind::backward_input ? x.mb : 0u};
    };
    for (const auto& [x, r] : cand) {
      if (r > at) {
        continue;
      }
      if (!best || rank(x) < rank(*best) ||
          (rank(x) == rank(*best) && pl.global(s, x.chunk) > pl.global(s, best->chunk))) {
        best = x;
      }
    }
    return choice{best ? *best : ss.pending_w.front(), at};
  };

  dynamic_result out;
  out.decided.resize(p);
  std::size_t remaining = std::size_t{p} * v * m * 3;
  std::vector<std::optional<choice>> next(p);
  while (remaining > 0) {
    // The stage that acts first (ties: the lowest stage) goes; every other stage's choice is
    // recomputed after it, since what it produced may arrive earlier than they assumed.
    stage_index s = p;
    for (stage_index t = 0; t < p; ++t) {
      next[t] = decide(t);
      if (next[t] && (s == p || next[t]->start < next[s]->start)) {
        s = t;
      }
    }
    if (s == p) {
      detail::fail(who, ": no stage can run an op (", remaining,
                   " left): the memory limit blocks every forward while no backward can come");
    }
    const op x = next[s]->x;
    const double start = next[s]->start;
    const double end = start + pc.of(s, x).duration;
    stage_state& ss = st[s];
    ss.free_at = end;
    ss.live += memory_delta(x.kind, mem.at(s, x.chunk));
    const std::uint8_t produced = events_produced(x.kind);
    for (unsigned e = 0; e < 8; ++e) {
      if ((produced & (1u << e)) != 0) {
        ends.at(pl.global(s, x.chunk), x.mb, static_cast<event_kind>(e)) = end;
      }
    }
    switch (x.kind) {
      case op_kind::forward:
        ++ss.next_f[x.chunk];
        break;
      case op_kind::backward_input:
        ++ss.next_b[x.chunk];
        ss.pending_w.push_back(op{op_kind::backward_weight, x.mb, x.chunk});
        break;
      default:
        ss.pending_w.pop_front();
        break;
    }
    order.stage_ops(s).push_back(x);
    out.decided[s].push_back(
        timed_op{s, static_cast<std::uint32_t>(out.decided[s].size()), x, start, end});
    --remaining;
  }
  out.timing = detail::simulate_with(order, pc.shaped_costs(), plan, pc.view(), simulate_options{});
  out.order = std::move(order);
  return out;
}

/// monte_carlo() for the dynamic policy: the policy re-decides its order in each of the N
/// samples of `noise` (o.noise and o.sample are replaced), so its distribution compares with a
/// static order's under the very same samples.
inline robustness_result monte_carlo_dynamic(const placement& pl,
                                             std::uint32_t microbatches,
                                             const cost_model& costs,
                                             const perturbation& noise,
                                             dynamic_policy_options o = {},
                                             const robustness_options& ro = {}) {
  if (ro.samples == 0) {
    detail::fail("monte_carlo_dynamic: samples (0) must be at least 1");
  }
  if (!std::isfinite(ro.sensitivity_step) || ro.sensitivity_step <= 0.0) {
    detail::fail("monte_carlo_dynamic: sensitivity_step (", ro.sensitivity_step,
                 ") must be finite and > 0");
  }
  detail::sample_progress progress(
      ro.progress, std::uint64_t{ro.samples} * (ro.sensitivity ? 1u + pl.stages() : 1u));
  auto run = [&](const perturbation& n) {
    std::vector<double> out;
    out.reserve(ro.samples);
    for (std::uint32_t i = 0; i < ro.samples; ++i) {
      o.noise = n;
      o.sample = ro.first_sample + i;
      out.push_back(simulate_dynamic(pl, microbatches, costs, o).timing.makespan);
      progress.step();
    }
    return out;
  };
  robustness_result r;
  o.noise = perturbation{};
  r.clean = simulate_dynamic(pl, microbatches, costs, o).timing.makespan;
  std::vector<double> all = run(noise);
  r.iteration = stats_of(all);
  if (ro.keep_samples) {
    r.samples = std::move(all);
  }
  if (ro.sensitivity) {
    r.sensitivity.resize(pl.stages());
    for (stage_index k = 0; k < pl.stages(); ++k) {
      std::vector<double> f(pl.stages());
      for (stage_index s = 0; s < pl.stages(); ++s) {
        f[s] = noise.slowdown(s) * (s == k ? 1.0 + ro.sensitivity_step : 1.0);
      }
      perturbation slower = noise;
      slower.set_stage_slowdown(std::move(f));
      r.sensitivity[k] =
          (detail::mean_of(run(slower)) - r.iteration.mean) / (100.0 * ro.sensitivity_step);
    }
  }
  return r;
}

}  // namespace pipesched
