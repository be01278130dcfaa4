#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/dynamic_stage.hpp"
#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/robustness.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/stage_table.hpp"
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
  /// Per stage (one for every stage or one per stage), static memory included; none: F is
  /// always admitted. Must leave room for one
  /// micro-batch's activations of every chunk of the stage (else the policy could block).
  memory_limits memory_limit;
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
  stage_table<timed_op> decided;
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

/// Runs the dynamic policy on the shape of `shape` (its placement and micro-batch count; its
/// ops are not read: pass the static order the policy is compared with, or an empty
/// schedule::on(...)) with `costs` and options: a discrete-event simulation in which each stage,
/// whenever it is free at time t, starts the first of
///   1. a B whose inputs are ready by t (lowest micro-batch, then the chunk latest in the model),
///   2. an F ready by t that memory admits (the chunk latest in the model first; F of each chunk
///      in micro-batch order): live memory + its allocation + one activation of each chunk of
///      the stage later in the model (the room that keeps the V / interleaved placements from
///      blocking) within the limit, up to the memory engine's tolerance,
///   3. the oldest pending W;
/// and when nothing qualifies waits for the next arrival. The rule is
/// detail::dynamic_policy_stage, the one the dynamic drivers run too. Times follow docs/model.md §3
/// with the sampled durations and latencies (perturbed_costs), so the recorded order, simulated by
/// the timing engine under the same sample, gives the same times (dynamic_result::timing).
/// Throws invalid_argument for a memory limit below static memory plus one activation of every
/// chunk of a stage (require_minimum_memory), and when the policy cannot go on (no stage has
/// an op it may run).
inline dynamic_result simulate_dynamic(const schedule& shape,
                                       const cost_model& costs,
                                       const dynamic_policy_options& o = {}) {
  const char* who = "simulate_dynamic";
  const placement& pl = shape.layout();
  const std::uint32_t p = pl.stages();
  const std::uint32_t v = pl.chunks();
  const std::uint32_t m = shape.microbatches();
  schedule order = schedule::on("dynamic", pl, m);  // checks m
  const shaped_memory_model mem = o.memory.for_shape(p, v, m, who);
  const std::vector<double> cap = detail::dynamic_cap(who, pl, mem, o.memory_limit);
  const perturbed_costs pc(pl, m, false, costs, o.noise, o.sample, who);
  const detail::traversal_plan& plan = pc.plan();
  constexpr double inf = std::numeric_limits<double>::infinity();

  // Each stage decides by the policy (detail::dynamic_policy_stage); this event loop is its
  // clock: when each stage is free, and when each event happened.
  std::vector<detail::dynamic_policy_stage> st;
  st.reserve(p);
  for (stage_index s = 0; s < p; ++s) {
    st.emplace_back(pl, s, m, mem, detail::stage_cap(cap, s));
  }
  std::vector<double> free_at(p, 0.0);
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
      t = detail::ready_time(t, end, e.deps[k].remote ? c.latency[k] : 0.0);
    }
    return t;
  };
  // The op stage s runs next and when, or nullopt when it has none it may run: the stage acts
  // at the first moment something is eligible (a W is: its B ran here), and takes what the
  // policy picks among the candidates whose inputs are here by then.
  struct choice {
    op x{};
    double start = inf;
  };
  std::vector<double> ready_f(v), ready_b(v);  // per chunk, of the current candidates
  auto decide = [&](stage_index s) -> std::optional<choice> {
    const detail::dynamic_policy_stage& ds = st[s];
    double earliest = ds.w_pending() ? free_at[s] : inf;
    ds.for_each_candidate([&](const op& x) {
      const double r = ready(s, x);
      (x.kind == op_kind::forward ? ready_f : ready_b)[x.chunk] = r;
      earliest = std::min(earliest, r);
    });
    if (earliest == inf) {
      return std::nullopt;
    }
    const double at = std::max(free_at[s], earliest);
    const std::optional<op> x = ds.pick([&](const op& y) {
      return (y.kind == op_kind::forward ? ready_f : ready_b)[y.chunk] <= at;
    });
    return choice{*x, at};
  };

  dynamic_result out;
  // Every stage runs F, B and W of each of its chunks' micro-batches (those of the chunk's
  // route), written in place at (stage, position).
  std::vector<std::size_t> per_stage(p);
  std::size_t remaining = 0;
  for (stage_index s = 0; s < p; ++s) {
    per_stage[s] = st[s].total();
    remaining += per_stage[s];
  }
  out.decided.reset(per_stage);
  std::vector<std::uint32_t> decided_count(p, 0);
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
    free_at[s] = end;
    st[s].commit(x);
    const std::uint8_t produced = events_produced(x.kind);
    for (unsigned e = 0; e < 8; ++e) {
      if ((produced & (1u << e)) != 0) {
        ends.at(pl.global(s, x.chunk), x.mb, static_cast<event_kind>(e)) = end;
      }
    }
    order.stage_ops(s).push_back(x);
    PIPESCHED_ASSERT(decided_count[s] < out.decided[s].size(),
                     "simulate_dynamic: a stage runs each F, B and W of its chunks once");
    out.decided[s][decided_count[s]] = timed_op{s, decided_count[s], x, start, end};
    ++decided_count[s];
    --remaining;
  }
  out.timing = detail::simulate_with(order, pc.shaped_costs(), plan, pc.view(), simulate_options{});
  out.order = std::move(order);
  return out;
}

/// monte_carlo_dynamic's options: monte_carlo's (noise, samples, sensitivity, ...) plus the
/// policy's memory sizes and limit (dynamic_policy_options without the one sample).
struct dynamic_monte_carlo_options : robustness_options {
  memory_model memory{};       ///< as dynamic_policy_options::memory
  memory_limits memory_limit;  ///< as dynamic_policy_options::memory_limit
};

/// monte_carlo() for the dynamic policy on the shape of `shape` (simulate_dynamic): the policy
/// re-decides its order in each of the N samples of `o.noise`, so its distribution compares
/// with a static order's under the very same samples.
inline robustness_result monte_carlo_dynamic(const schedule& shape,
                                             const cost_model& costs,
                                             const dynamic_monte_carlo_options& o = {}) {
  if (o.samples == 0) {
    detail::fail("monte_carlo_dynamic: samples (0) must be at least 1");
  }
  if (!std::isfinite(o.sensitivity_step) || o.sensitivity_step <= 0.0) {
    detail::fail("monte_carlo_dynamic: sensitivity_step (", o.sensitivity_step,
                 ") must be finite and > 0");
  }
  const std::uint32_t p = shape.stages();
  detail::sample_progress progress(o.progress,
                                   std::uint64_t{o.samples} * (o.sensitivity ? 1u + p : 1u));
  dynamic_policy_options one;
  one.memory = o.memory;
  one.memory_limit = o.memory_limit;
  auto run = [&](const perturbation& n) {
    std::vector<double> out;
    out.reserve(o.samples);
    for (std::uint32_t i = 0; i < o.samples; ++i) {
      one.noise = n;
      one.sample = o.first_sample + i;
      out.push_back(simulate_dynamic(shape, costs, one).timing.makespan);
      progress.step();
    }
    return out;
  };
  robustness_result r;
  r.clean = simulate_dynamic(shape, costs, one).timing.makespan;
  std::vector<double> all = run(o.noise);
  r.iteration = stats_of(all);
  if (o.keep_samples) {
    r.samples = std::move(all);
  }
  if (o.sensitivity) {
    r.sensitivity.resize(p);
    for (stage_index k = 0; k < p; ++k) {
      std::vector<double> f(p);
      for (stage_index s = 0; s < p; ++s) {
        f[s] = o.noise.slowdown(s) * (s == k ? 1.0 + o.sensitivity_step : 1.0);
      }
      perturbation slower = o.noise;
      slower.set_stage_slowdown(std::move(f));
      r.sensitivity[k] =
          (detail::mean_of(run(slower)) - r.iteration.mean) / (100.0 * o.sensitivity_step);
    }
  }
  return r;
}

}  // namespace pipesched
