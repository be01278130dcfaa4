#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/analysis/data_parallel_timing.hpp"
#include "pipesched/analysis/dynamic_policy.hpp"
#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/robustness.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/perturbation.hpp"

// The what-if front end (`pipesched whatif`, Python's whatif()): one request, one of the three
// Monte-Carlo runs (a static order, the dynamic policy on its placement, D data-parallel
// replicas), and the result the io/whatif_io.hpp writers print. The rules on which options go
// together live here, once.

namespace pipesched {

/// One what-if question about a schedule, in the front ends' terms (the CLI's whatif options,
/// Python's whatif() keywords, field for field).
struct whatif_request {
  cost_model costs{};
  memory_model memory{};               ///< for the dynamic policy's memory limit
  std::optional<double> memory_limit;  ///< per stage: the dynamic policy keeps within it
  double cv = 0.0;                     ///< per-op log-normal noise (perturbation::set_cv)
  double link_cv = 0.0;                ///< noise of every cross-stage latency
  /// (stage, factor): that stage runs `factor` times slower; each stage at most once.
  std::vector<std::pair<stage_index, double>> stragglers;
  std::optional<stall_model> stalls;  ///< each op stalls with a probability for a duration
  std::uint64_t seed = 1;
  std::uint32_t samples = 100;  ///< N sampled iterations, >= 1
  bool sensitivity = false;     ///< also each stage's sensitivity (not with data parallelism)
  bool dynamic = false;  ///< the dynamic policy on the schedule's placement instead of its order
  /// D >= 2 data-parallel replicas, each its own sample, then a ring all-reduce per stage
  /// (data_parallel_model); gradient_bytes is then required, the other two optional.
  std::optional<std::uint32_t> replicas;
  std::optional<double> gradient_bytes;     ///< per stage, with replicas
  std::optional<double> bandwidth;          ///< ring link bytes per time unit, with replicas
  std::optional<double> allreduce_latency;  ///< per ring step, with replicas
  bool keep_samples = false;                ///< keep every sample (a histogram needs them)
  unsigned threads = 0;                     ///< data-parallel runs: 0 = one per hardware thread
  progress_observer progress{};             ///< told (done, total) samples
};

/// What a what-if run found, with what its writers print about the question.
struct whatif_result {
  /// The schedule's name, or "dynamic policy on NAME's placement".
  std::string name;
  std::uint32_t stages = 0, microbatches = 0, chunks = 1;
  std::uint64_t seed = 0;
  std::uint32_t replicas = 1;
  /// A static order's or the dynamic policy's distribution (no data_parallel).
  robustness_result robustness;
  /// D replicas' iteration times (data_parallel asked).
  std::optional<data_parallel_stats> data_parallel;

  /// The sampled iteration times, when kept.
  const std::vector<double>& samples() const {
    return data_parallel ? data_parallel->samples : robustness.samples;
  }
};

/// Runs `req` on `sched`: monte_carlo, monte_carlo_dynamic or monte_carlo_data_parallel.
/// The request's rules throw field_error (ir/error.hpp) naming the field: samples 0; a
/// straggler stage out of range or given twice; gradient_bytes, bandwidth or allreduce_latency
/// without replicas; replicas below 2, without gradient_bytes, or with dynamic or sensitivity;
/// and the noise's and the data-parallel model's own (perturbation, data_parallel_model: a cv
/// out of range, a factor <= 0, an all-reduce that overflows, ...). Results are finite: a run
/// whose numbers do not fit in a double throws instead.
inline whatif_result run_whatif(const schedule& sched, const whatif_request& req) {
  constexpr const char* who = "whatif";
  if (req.samples == 0) {
    detail::fail_field(who, "samples", "must be at least 1, got 0");
  }
  perturbation noise;
  noise.set_cv(req.cv).set_link_cv(req.link_cv).set_seed(req.seed);
  if (!req.stragglers.empty()) {
    std::vector<double> slow(sched.stages(), 1.0);
    std::vector<char> seen(sched.stages(), 0);
    for (const auto& [stage, factor] : req.stragglers) {
      if (stage >= sched.stages()) {
        detail::fail_field(who, "stragglers", "stage ", stage,
                           " must be < stages (p=", sched.stages(), ")");
      }
      if (seen[stage] != 0) {
        detail::fail_field(who, "stragglers", "stage ", stage, " is given twice (", slow[stage],
                           " and ", factor, ")");
      }
      seen[stage] = 1;
      slow[stage] = factor;
    }
    noise.set_stage_slowdown(std::move(slow));
  }
  if (req.stalls) {
    noise.set_stalls(*req.stalls);
  }
  const bool dp = req.replicas.has_value();
  for (const auto& [given, field] :
       {std::pair{req.gradient_bytes.has_value(), "gradient_bytes"},
        std::pair{req.bandwidth.has_value(), "bandwidth"},
        std::pair{req.allreduce_latency.has_value(), "allreduce_latency"}}) {
    if (given && !dp) {
      detail::fail_field(who, field, "only meaningful with replicas");
    }
  }
  whatif_result r;
  r.stages = sched.stages();
  r.microbatches = sched.microbatches();
  r.chunks = sched.chunks();
  r.seed = req.seed;
  r.name = req.dynamic ? "dynamic policy on " + sched.name() + "'s placement" : sched.name();
  if (dp) {
    if (*req.replicas < 2) {
      detail::fail_field(who, "replicas", "must be at least 2, got ", *req.replicas,
                         " (one replica is the pipeline alone: leave replicas out)");
    }
    if (req.dynamic || req.sensitivity) {
      detail::fail_field(who, "replicas", "not with ", req.dynamic ? "dynamic" : "sensitivity");
    }
    if (!req.gradient_bytes) {
      detail::fail_field(who, "gradient_bytes",
                         "required with replicas (the bytes each stage all-reduces; 0 for none)");
    }
    data_parallel_model m;
    m.replicas = *req.replicas;
    m.gradient_bytes = {*req.gradient_bytes};
    m.bandwidth = req.bandwidth.value_or(m.bandwidth);
    m.latency = req.allreduce_latency.value_or(m.latency);
    try {
      m.check(sched.stages(), who);
    } catch (const field_error& e) {
      // The model calls it latency; the request, as the front ends, allreduce_latency.
      if (e.field() == "latency") {
        detail::fail_field(who, "allreduce_latency", e.rule());
      }
      throw;
    }
    r.replicas = m.replicas;
    data_parallel_options o;
    o.samples = req.samples;
    o.threads = req.threads;
    o.keep_samples = req.keep_samples;
    o.progress = req.progress;
    r.data_parallel = monte_carlo_data_parallel(sched, req.costs, noise, m, o);
    return r;
  }
  robustness_options ro;
  ro.samples = req.samples;
  ro.sensitivity = req.sensitivity;
  ro.keep_samples = req.keep_samples;
  ro.progress = req.progress;
  if (req.dynamic) {
    dynamic_policy_options dyn;
    dyn.memory = req.memory;
    dyn.memory_limit = req.memory_limit;
    r.robustness =
        monte_carlo_dynamic(sched.layout(), sched.microbatches(), req.costs, noise, dyn, ro);
  } else {
    r.robustness = monte_carlo(sched, req.costs, noise, ro);
  }
  return r;
}

}  // namespace pipesched
