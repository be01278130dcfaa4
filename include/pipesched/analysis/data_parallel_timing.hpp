#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/timing_simulator.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/perturbation.hpp"

namespace pipesched {

/// One data-parallel iteration: D replicas of the pipeline, each its own sample of the noise,
/// then per stage the ring all-reduce of its gradients (data_parallel_model).
struct data_parallel_result {
  /// The iteration: the latest end of any stage's all-reduce.
  double iteration = 0.0;
  /// Each replica's pipeline makespan (its own sample), without the all-reduce.
  std::vector<double> replica_makespan;
  /// Per stage: when its all-reduce starts (the slowest replica's last op on the stage) and ends.
  std::vector<double> reduce_start, reduce_end;
  /// What each replica's iteration would be if the others were as fast: max over stages of
  /// (its own stage end + the all-reduce); the mean of these against `iteration` is the share
  /// lost to the slowest replica.
  std::vector<double> replica_alone;
  double slowest_replica_share = 0.0;  ///< (iteration − mean replica_alone) / iteration
};

/// Iteration `sample` of D replicas of `sched` under `noise`: replica r is sample
/// sample·D + r of the noise (so replicas are independent and iterations reproducible), timed
/// by the one timing engine (simulate_perturbed); the all-reduce of stage s starts when the
/// last replica's stage s has run its last op (its last W or BW) and lasts
/// ring_allreduce_time(D, bytes(s), bandwidth, latency). With D = 1 the iteration is the
/// makespan. Throws invalid_argument for an invalid model or a schedule that deadlocks.
inline data_parallel_result simulate_data_parallel(const schedule& sched,
                                                   const cost_model& costs,
                                                   const perturbation& noise,
                                                   const data_parallel_model& dp,
                                                   std::uint64_t sample = 0) {
  const std::uint32_t p = sched.stages();
  dp.check(p, "simulate_data_parallel");
  simulate_options so;
  so.record_ops = false;
  so.critical_path = false;
  data_parallel_result r;
  r.reduce_start.assign(p, 0.0);
  std::vector<std::vector<double>> stage_end(dp.replicas);
  for (std::uint32_t k = 0; k < dp.replicas; ++k) {
    const simulation_result sim =
        simulate_perturbed(sched, costs, noise, sample * dp.replicas + k, so);
    if (!sim.completed()) {
      detail::fail("simulate_data_parallel: the schedule \"", sched.name(), "\" deadlocks");
    }
    r.replica_makespan.push_back(sim.makespan);
    for (stage_index s = 0; s < p; ++s) {
      stage_end[k].push_back(sim.stages[s].last_end);
      r.reduce_start[s] = std::max(r.reduce_start[s], sim.stages[s].last_end);
    }
  }
  std::vector<double> ring(p);
  r.reduce_end.resize(p);
  for (stage_index s = 0; s < p; ++s) {
    ring[s] = ring_allreduce_time(dp.replicas, dp.bytes(s), dp.bandwidth, dp.latency);
    r.reduce_end[s] = r.reduce_start[s] + ring[s];
    r.iteration = std::max(r.iteration, r.reduce_end[s]);
  }
  double sum = 0.0;
  for (std::uint32_t k = 0; k < dp.replicas; ++k) {
    double alone = 0.0;
    for (stage_index s = 0; s < p; ++s) {
      alone = std::max(alone, stage_end[k][s] + ring[s]);
    }
    r.replica_alone.push_back(alone);
    sum += alone;
  }
  r.slowest_replica_share =
      r.iteration > 0.0 ? (r.iteration - sum / dp.replicas) / r.iteration : 0.0;
  return r;
}

/// N data-parallel iterations (simulate_data_parallel with iteration = first_sample .. + N − 1):
/// the distribution of the iteration time and the mean share lost to the slowest replica.
struct data_parallel_stats {
  sample_stats iteration;
  double slowest_replica_share = 0.0;  ///< mean over the iterations
};

inline data_parallel_stats monte_carlo_data_parallel(const schedule& sched,
                                                     const cost_model& costs,
                                                     const perturbation& noise,
                                                     const data_parallel_model& dp,
                                                     std::uint32_t samples,
                                                     std::uint64_t first_sample = 0) {
  if (samples == 0) {
    detail::fail("monte_carlo_data_parallel: samples (0) must be at least 1");
  }
  std::vector<double> t;
  double share = 0.0;
  for (std::uint32_t i = 0; i < samples; ++i) {
    const data_parallel_result r =
        simulate_data_parallel(sched, costs, noise, dp, first_sample + i);
    t.push_back(r.iteration);
    share += r.slowest_replica_share;
  }
  data_parallel_stats out;
  out.iteration = stats_of(std::move(t));
  out.slowest_replica_share = share / samples;
  return out;
}

}  // namespace pipesched
