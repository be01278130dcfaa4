#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/ir/detail/parallel.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/perturbation.hpp"

namespace pipesched {

/// One data-parallel iteration: D replicas of the pipeline, each its own sample of the noise,
/// then per stage the ring all-reduce of its gradients (data_parallel_model).
struct [[nodiscard]] data_parallel_result {
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

namespace detail {

/// What every replica of every iteration shares, built once (read-only, so threads share it):
/// the cost model read for the shape, the plan, the sampler and the plan entries the schedule
/// uses (only those are sampled: the timing engine reads no other).
class data_parallel_run {
 public:
  data_parallel_run(const schedule& sched,
                    const cost_model& costs,
                    const perturbation& noise,
                    const data_parallel_model& dp,
                    const char* who)
      : sched_(sched),
        dp_(dp),
        costs_(costs.for_shape(sched.stages(), sched.layout().chunks(), sched.microbatches(), who)),
        plan_(sched.layout(), sched.has_comm()),
        sampler_(plan_, sched.layout(), costs_, noise) {
    dp.check(sched.stages(), who);
    noise.check_shape(sched.stages(), who);
    require_traversable(sched, who);
    require_valid(sched, who);  // once: the iterations time it without validating again
    std::vector<char> used(plan_.size(), 0);
    const std::uint32_t v = sched.layout().chunks();
    for (stage_index s = 0; s < sched.stages(); ++s) {
      for (const op& o : sched.ops(s)) {
        if (o.chunk < v && o.mb < sched.microbatches()) {
          used[plan_.index(s, o)] = 1;
        }
      }
    }
    for (std::size_t i = 0; i < used.size(); ++i) {
      if (used[i] != 0) {
        used_.push_back(i);
      }
    }
    ring_.resize(sched.stages());
    for (stage_index s = 0; s < sched.stages(); ++s) {
      ring_[s] = ring_allreduce_time(dp.replicas, dp.bytes(s), dp.bandwidth, dp.latency);
    }
  }

  /// One thread's buffers, reused from replica to replica: no allocation per replica beyond
  /// the timing engine's own tables.
  struct workspace {
    std::vector<op_cost> table;
    std::vector<double> stage_end;  // replica-major: D × p
  };

  /// Iteration `sample`: replica r is sample sample·D + r of the noise.
  data_parallel_result iteration(std::uint64_t sample, workspace& w) const {
    const std::uint32_t p = sched_.stages();
    const std::uint32_t d = dp_.replicas;
    const std::uint32_t m = sched_.microbatches();
    const std::size_t n = plan_.size();
    w.table.resize(n * m);
    w.stage_end.resize(std::size_t{d} * p);
    simulate_options so;
    so.record_ops = false;
    so.critical_path = false;
    so.validate = false;
    data_parallel_result r;
    r.reduce_start.assign(p, 0.0);
    r.replica_makespan.reserve(d);
    for (std::uint32_t k = 0; k < d; ++k) {
      const std::uint64_t h = sampler_.sample_hash(sample * d + k);
      op_cost* const t = w.table.data();
      for (microbatch_index mb = 0; mb < m; ++mb) {
        for (std::size_t i : used_) {
          t[std::size_t{mb} * n + i] = sampler_(h, i, mb);
        }
      }
      auto cost_of =
          [t, n](std::size_t i, microbatch_index mb)
              PIPESCHED_HOT_LAMBDA -> const op_cost& { return t[std::size_t{mb} * n + i]; };
      const simulation_result sim = simulate_with(sched_, costs_, plan_, cost_of, so);
      if (!sim.completed()) {
        fail("simulate_data_parallel: the schedule \"", sched_.name(), "\" deadlocks");
      }
      r.replica_makespan.push_back(sim.makespan);
      for (stage_index s = 0; s < p; ++s) {
        w.stage_end[std::size_t{k} * p + s] = sim.stages[s].last_end;
        r.reduce_start[s] = std::max(r.reduce_start[s], sim.stages[s].last_end);
      }
    }
    r.reduce_end.resize(p);
    for (stage_index s = 0; s < p; ++s) {
      r.reduce_end[s] = r.reduce_start[s] + ring_[s];
      r.iteration = std::max(r.iteration, r.reduce_end[s]);
    }
    double sum = 0.0;
    r.replica_alone.reserve(d);
    for (std::uint32_t k = 0; k < d; ++k) {
      double alone = 0.0;
      for (stage_index s = 0; s < p; ++s) {
        alone = std::max(alone, w.stage_end[std::size_t{k} * p + s] + ring_[s]);
      }
      r.replica_alone.push_back(alone);
      sum += alone;
    }
    r.slowest_replica_share = r.iteration > 0.0 ? (r.iteration - sum / d) / r.iteration : 0.0;
    return r;
  }

 private:
  const schedule& sched_;
  data_parallel_model dp_;
  shaped_cost_model costs_;
  traversal_plan plan_;
  cost_sampler sampler_;
  std::vector<std::size_t> used_;
  std::vector<double> ring_;
};

}  // namespace detail

/// simulate_data_parallel's options: the replicas and their all-reduce, and which sample of
/// which noise (the same field names as every simulate_* options struct).
struct data_parallel_options {
  data_parallel_model data_parallel{};  ///< D replicas and the ring all-reduce per stage
  perturbation noise{};                 ///< none by default: every replica is the clean run
  std::uint64_t sample = 0;             ///< the iteration: replica r is sample sample·D + r
};

/// Iteration `o.sample` of D replicas of `sched` under `o.noise`: replica r is sample
/// sample·D + r of the noise (so replicas are independent and iterations reproducible), timed
/// by the one timing engine (the same numbers as simulate_perturbed); the all-reduce of stage s
/// starts when the last replica's stage s has run its last op (its last W or BW) and lasts
/// ring_allreduce_time(D, bytes(s), bandwidth, latency). With D = 1 the iteration is the
/// makespan. Throws invalid_argument for an invalid model or a schedule that deadlocks.
inline data_parallel_result simulate_data_parallel(const schedule& sched,
                                                   const cost_model& costs,
                                                   const data_parallel_options& o = {}) {
  const detail::data_parallel_run run(sched, costs, o.noise, o.data_parallel,
                                      "simulate_data_parallel");
  detail::data_parallel_run::workspace w;
  return run.iteration(o.sample, w);
}

/// N data-parallel iterations (simulate_data_parallel with sample = first_sample .. + N − 1):
/// the common core (the iteration time's distribution, the kept samples) plus the mean share
/// lost to the slowest replica.
struct [[nodiscard]] data_parallel_stats : monte_carlo_stats {
  double slowest_replica_share = 0.0;  ///< mean over the iterations
};

/// monte_carlo_data_parallel's options: the common core (noise, samples, first_sample,
/// keep_samples, progress) plus the replicas and the threads.
struct data_parallel_monte_carlo_options : monte_carlo_options {
  data_parallel_model data_parallel{};  ///< D replicas and the ring all-reduce per stage
  unsigned threads = 0;                 ///< 0: one per hardware thread (at most one per iteration)
};

/// The iterations run on `o.threads` threads, each with its own buffers; every iteration is a
/// pure function of its index, and the results are combined in iteration order, so the result
/// is the same for any thread count. Linear in samples × replicas × ops; memory per thread: one
/// sampled cost table (p·v·9 entries × m) and the timing engine's tables.
inline data_parallel_stats monte_carlo_data_parallel(const schedule& sched,
                                                     const cost_model& costs,
                                                     const data_parallel_monte_carlo_options& o) {
  const std::uint32_t samples = o.samples;
  if (samples == 0) {
    detail::fail("monte_carlo_data_parallel: samples (0) must be at least 1");
  }
  const detail::data_parallel_run run(sched, costs, o.noise, o.data_parallel,
                                      "simulate_data_parallel");
  unsigned threads = o.threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : o.threads;
  threads = std::min(threads, samples);
  std::vector<double> t(samples);
  std::vector<double> share(samples);
  // The observer runs on the calling thread only, which reports the shared count.
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint32_t> cursor{0};
  const std::thread::id caller = std::this_thread::get_id();
  // Each thread takes the next iteration and writes only its entries.
  auto work = [&] {
    detail::data_parallel_run::workspace w;
    const bool reports = std::this_thread::get_id() == caller;
    for (std::uint32_t i = cursor++; i < samples; i = cursor++) {
      const data_parallel_result r = run.iteration(o.first_sample + i, w);
      t[i] = r.iteration;
      share[i] = r.slowest_replica_share;
      const std::uint64_t n = done.fetch_add(1, std::memory_order_relaxed) + 1;
      if (reports && o.progress && n < samples) {
        o.progress(n, samples);
      }
    }
  };
  // The first exception is rethrown; the other threads stop taking iterations.
  detail::run_parallel(threads, work, [&] { cursor = samples; });
  if (o.progress) {
    o.progress(samples, samples);
  }
  double total = 0.0;
  for (double x : share) {  // in iteration order: the same sum for any thread count
    total += x;
  }
  data_parallel_stats out;
  if (o.keep_samples) {
    out.samples = t;
  }
  out.iteration = stats_of(std::move(t));
  out.slowest_replica_share = total / samples;
  return out;
}

}  // namespace pipesched
