#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/perturbation.hpp"

namespace pipesched {

/// monte_carlo's options: the common core (noise, samples, first_sample, keep_samples,
/// progress) plus the sensitivity.
struct robustness_options : monte_carlo_options {
  /// Also measure each stage's sensitivity (robustness_result::sensitivity): N more samples per
  /// stage, with that stage `sensitivity_step` slower. `progress` then counts N·(1 + p).
  bool sensitivity = false;
  double sensitivity_step = 0.01;  ///< relative slowdown for the sensitivity, > 0
};

/// What monte_carlo() measures: the common core (iteration, samples) plus the clean run and the
/// sensitivity. Iteration time = the makespan (time 0 to the last end).
struct [[nodiscard]] robustness_result : monte_carlo_stats {
  double clean = 0.0;  ///< the makespan without noise (simulate)
  /// Per stage k: mean iteration-time increase per 1 % extra slowdown of stage k, under the
  /// same samples (common random numbers, so the difference is not noise); empty unless
  /// robustness_options::sensitivity. In cost-model time units per percent.
  std::vector<double> sensitivity;
};

namespace detail {

/// The N sampled makespans of `sched` under `noise`, in sample order.
inline std::vector<double> sample_makespans(const schedule& sched,
                                            const cost_model& costs,
                                            const perturbation& noise,
                                            const robustness_options& o,
                                            sample_progress& progress) {
  perturbed_options po;
  po.record_ops = false;
  po.critical_path = false;
  po.validate = false;  // monte_carlo validated it once
  po.noise = noise;
  std::vector<double> out;
  out.reserve(o.samples);
  for (std::uint32_t i = 0; i < o.samples; ++i) {
    po.sample = o.first_sample + i;
    const simulation_result r = simulate_perturbed(sched, costs, po);
    out.push_back(r.makespan);
    progress.step();
  }
  return out;
}

}  // namespace detail

/// Monte-Carlo robustness of a static order: N sampled iterations of `o.noise`
/// (simulate_perturbed, i.e. the one timing engine), their distribution, and optionally the
/// sensitivity of the mean to each stage's speed. Throws invalid_argument for N = 0, a
/// non-positive step, or a schedule that deadlocks.
inline robustness_result monte_carlo(const schedule& sched,
                                     const cost_model& costs,
                                     const robustness_options& o = {}) {
  const perturbation& noise = o.noise;
  if (o.samples == 0) {
    detail::fail("monte_carlo: samples (0) must be at least 1");
  }
  if (!std::isfinite(o.sensitivity_step) || o.sensitivity_step <= 0.0) {
    detail::fail("monte_carlo: sensitivity_step (", o.sensitivity_step, ") must be finite and > 0");
  }
  noise.check_shape(sched.stages(), "monte_carlo");
  robustness_result r;
  simulate_options so;
  so.record_ops = false;
  so.critical_path = false;
  // Refuses an invalid order once (naming its first violation); the samples need not again.
  r.clean = simulate(sched, costs, so).makespan;
  detail::sample_progress progress(
      o.progress, std::uint64_t{o.samples} * (o.sensitivity ? 1u + sched.stages() : 1u));
  std::vector<double> all = detail::sample_makespans(sched, costs, noise, o, progress);
  r.iteration = stats_of(all);
  if (o.keep_samples) {
    r.samples = std::move(all);
  }
  if (o.sensitivity) {
    const std::uint32_t p = sched.stages();
    r.sensitivity.resize(p);
    for (stage_index k = 0; k < p; ++k) {
      std::vector<double> f(p);
      for (stage_index s = 0; s < p; ++s) {
        f[s] = noise.slowdown(s) * (s == k ? 1.0 + o.sensitivity_step : 1.0);
      }
      perturbation slower = noise;
      slower.set_stage_slowdown(std::move(f));
      // The same mean rule as the distribution's (stats_of), so no noise gives 0 drift.
      const double mean =
          detail::mean_of(detail::sample_makespans(sched, costs, slower, o, progress));
      r.sensitivity[k] = (mean - r.iteration.mean) / (100.0 * o.sensitivity_step);
    }
  }
  return r;
}

}  // namespace pipesched
