#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/analysis/data_parallel_timing.hpp"
#include "pipesched/analysis/link_timing.hpp"
#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/analysis/robustness.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/data_parallel.hpp"
#include "pipesched/model/link.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/perturbation.hpp"

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_WHATIF)
#include "pipesched/analysis/dynamic_policy.hpp"
#endif

// The what-if front end (`pipesched whatif`, Python's whatif()): one request, one of the three
// Monte-Carlo runs (a static order, the dynamic policy on its placement, D data-parallel
// replicas), and the result the io/whatif_io.hpp writers print. The rules on which options go
// together live here, once.

namespace pipesched {

/// One what-if question about a schedule, in the front ends' terms (the CLI's whatif options,
/// Python's whatif() keywords, field for field).
struct whatif_request {
  cost_model costs{};
  memory_model memory{};       ///< for the dynamic policy's memory limit
  memory_limits memory_limit;  ///< per stage: the dynamic policy keeps within it
  double cv = 0.0;             ///< per-op log-normal noise (perturbation::set_cv)
  double link_cv = 0.0;        ///< noise of every cross-stage latency
  /// (stage, factor): that stage runs `factor` times slower; each stage at most once.
  std::vector<std::pair<stage_index, double>> stragglers;
  std::optional<stall_model> stalls;  ///< each op stalls with a probability for a duration
  /// The noise's seed (unset: 1); only with noise (cv, link_cv or stalls): without it every
  /// sample is the same and a seed changes nothing.
  std::optional<std::uint64_t> seed;
  std::uint32_t samples = 100;  ///< N sampled iterations, >= 1
  bool sensitivity = false;     ///< also each stage's sensitivity (not with data parallelism)
  bool dynamic = false;  ///< the dynamic policy on the schedule's placement instead of its order
  /// D >= 2 data-parallel replicas, each its own sample, then a ring all-reduce per stage
  /// (data_parallel_model); gradient_bytes is then required, the other two optional.
  std::optional<std::uint32_t> replicas;
  std::optional<double> gradient_bytes;     ///< per stage, with replicas
  std::optional<double> bandwidth;          ///< ring link bytes per time unit, with replicas
  std::optional<double> allreduce_latency;  ///< per ring step, with replicas
  /// Links with bandwidth (model/link.hpp, docs/robustness.md §8): each stage's link, bytes per
  /// time unit (one value, or one per stage), carries its pipeline sends and, with replicas,
  /// the gradient all-reduce in buckets; every sample is timed by simulate_links. Not with
  /// dynamic, sensitivity or bandwidth (the all-reduce shares the links).
  std::optional<std::vector<double>> link_bandwidth;
  /// With link_bandwidth: bytes of an activation message and of an input-gradient message
  /// (one value: both).
  std::optional<std::vector<double>> message_bytes;
  /// With link_bandwidth: "fifo" (one queue) or "priority" (pipeline sends before all-reduce
  /// traffic); default fifo.
  std::optional<std::string> traffic;
  /// With link_bandwidth and replicas: gradient buckets per chunk (default 1).
  std::optional<std::uint32_t> buckets;
  bool keep_samples = false;     ///< keep every sample (a histogram needs them)
  unsigned threads = 0;          ///< data-parallel runs: 0 = one per hardware thread
  progress_observer progress{};  ///< told (done, total) samples
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
  /// With links: the traffic policy and the mean over samples of the time pipeline messages
  /// waited while their link sent all-reduce bytes (link_timing_result::stall_behind_bulk).
  std::optional<link_discipline> traffic;
  double stall_behind_bulk = 0.0;

  /// The sampled iteration times, when kept.
  const std::vector<double>& samples() const {
    return data_parallel ? data_parallel->samples : robustness.samples;
  }
};

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_WHATIF)
namespace detail {

/// The rules on which of `req`'s options go together (one place for whatif and time_links).
inline void check_options(const whatif_request& req) {
  constexpr const char* who = "whatif";
  const bool dp = req.replicas.has_value();
  for (const auto& [given, field] :
       {std::pair{req.gradient_bytes.has_value(), "gradient_bytes"},
        std::pair{req.bandwidth.has_value(), "bandwidth"},
        std::pair{req.allreduce_latency.has_value(), "allreduce_latency"}}) {
    if (given && !dp) {
      fail_field(who, field, "only meaningful with replicas");
    }
  }
  const bool links = req.link_bandwidth.has_value();
  for (const auto& [given, field] : {std::pair{req.message_bytes.has_value(), "message_bytes"},
                                     std::pair{req.traffic.has_value(), "traffic"},
                                     std::pair{req.buckets.has_value(), "buckets"}}) {
    if (given && !links) {
      fail_field(who, field, "only meaningful with link_bandwidth");
    }
  }
  if (links) {
    if (req.dynamic || req.sensitivity) {
      fail_field(who, "link_bandwidth", "not with ", req.dynamic ? "dynamic" : "sensitivity");
    }
    if (req.bandwidth) {
      fail_field(who, "bandwidth", "not with link_bandwidth (the all-reduce shares the links)");
    }
    if (req.buckets && !dp) {
      fail_field(who, "buckets", "only meaningful with replicas");
    }
  }
  if (req.seed && req.cv == 0.0 && req.link_cv == 0.0 && !req.stalls) {
    fail_field(who, "seed",
               "only meaningful with noise (a cv, a link cv or stalls): without it "
               "every sample is the same");
  }
  if (req.memory_limit && !req.dynamic) {
    // A fixed order keeps the memory it has (simulate reports it); only the dynamic policy
    // chooses by the limit.
    fail_field(who, "memory_limit", "only meaningful with dynamic");
  }
  if (dp) {
    if (*req.replicas < 2) {
      fail_field(who, "replicas", "must be at least 2, got ", *req.replicas,
                 " (one replica is the pipeline alone: leave replicas out)");
    }
    if (req.dynamic || req.sensitivity) {
      fail_field(who, "replicas", "not with ", req.dynamic ? "dynamic" : "sensitivity");
    }
    if (!req.gradient_bytes) {
      fail_field(who, "gradient_bytes",
                 "required with replicas (the bytes each stage all-reduces; 0 for none)");
    }
  }
}

/// The link model `req` describes (link_bandwidth given), checked.
inline link_model link_model_of(const schedule& sched, const whatif_request& req) {
  constexpr const char* who = "whatif";
  link_model lm;
  lm.bandwidth = *req.link_bandwidth;
  if (req.message_bytes) {
    const std::vector<double>& b = *req.message_bytes;
    if (b.empty() || b.size() > 2) {
      fail_field(who, "message_bytes", "must be one or two numbers (activation, gradient), got ",
                 b.size());
    }
    lm.activation_bytes = b[0];
    lm.gradient_bytes = b.back();
  }
  try {
    lm.discipline = parse_link_discipline(req.traffic.value_or("fifo"), who);
  } catch (const invalid_argument&) {
    fail_field(who, "traffic", "must be fifo or priority, got \"", *req.traffic, "\"");
  }
  if (req.replicas) {
    lm.bulk.replicas = *req.replicas;
    lm.bulk.gradient_bytes = {*req.gradient_bytes};
    lm.bulk.step_latency = req.allreduce_latency.value_or(0.0);
    lm.bulk.buckets_per_chunk = req.buckets.value_or(1);
  }
  lm.check(sched.stages(), who);
  return lm;
}

/// run_whatif over links: the clean run and N samples of simulate_links.
inline robustness_result whatif_links(const schedule& sched,
                                      const whatif_request& req,
                                      const perturbation& noise,
                                      whatif_result& out) {
  constexpr const char* who = "whatif";
  const link_model lm = link_model_of(sched, req);
  if (req.replicas) {
    out.replicas = *req.replicas;
  }
  require_valid(sched, who);
  out.traffic = lm.discipline;
  link_timing_options lo;
  lo.links = lm;
  lo.record_ops = false;
  robustness_result r;
  r.clean = simulate_links(sched, req.costs, lo).iteration;
  sample_progress progress(req.progress, req.samples);
  std::vector<double> all;
  all.reserve(req.samples);
  std::vector<double> stalls;
  stalls.reserve(req.samples);
  lo.noise = noise;
  for (std::uint32_t i = 0; i < req.samples; ++i) {
    lo.sample = i;
    const link_timing_result t = simulate_links(sched, req.costs, lo);
    all.push_back(t.iteration);
    stalls.push_back(t.stall_behind_bulk);
    progress.step();
  }
  out.stall_behind_bulk = mean_of(stalls);
  r.iteration = stats_of(all);
  if (req.keep_samples) {
    r.samples = std::move(all);
  }
  return r;
}

/// Throws when a number the writers would print does not fit in a double.
inline void require_finite(const whatif_result& r) {
  const sample_stats& s = r.data_parallel ? r.data_parallel->iteration : r.robustness.iteration;
  bool ok = std::isfinite(s.mean) && std::isfinite(s.max) && std::isfinite(s.stddev) &&
            std::isfinite(r.robustness.clean) && std::isfinite(r.stall_behind_bulk);
  for (double x : r.robustness.sensitivity) {
    ok = ok && std::isfinite(x);
  }
  if (!ok) {
    fail(
        "whatif: the iteration times do not fit in a double: the costs, slowdowns, stalls or "
        "bytes are too large");
  }
}

}  // namespace detail
#endif

/// Runs `req` on `sched`: monte_carlo, monte_carlo_dynamic or monte_carlo_data_parallel.
/// The request's rules throw field_error (ir/error.hpp) naming the field: samples 0; a
/// straggler stage out of range or given twice; gradient_bytes, bandwidth or allreduce_latency
/// without replicas; replicas below 2, without gradient_bytes, or with dynamic or sensitivity;
/// and the noise's and the data-parallel model's own (perturbation, data_parallel_model: a cv
/// out of range, a factor <= 0, an all-reduce that overflows, ...). Results are finite: a run
/// whose numbers do not fit in a double throws instead.
PIPESCHED_INLINE whatif_result run_whatif(const schedule& sched, const whatif_request& req);

/// `sched` over the links `req` describes, without noise (`pipesched simulate --link-bandwidth`):
/// every op, each link's traffic and waits, the iteration with the all-reduce. The same rules
/// as run_whatif (req.link_bandwidth must be given); the schedule is validated first.
PIPESCHED_INLINE link_timing_result time_links(const schedule& sched,
                                               const whatif_request& req,
                                               link_discipline* traffic = nullptr);

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_WHATIF)
PIPESCHED_INLINE whatif_result run_whatif(const schedule& sched, const whatif_request& req) {
  constexpr const char* who = "whatif";
  if (req.samples == 0) {
    detail::fail_field(who, "samples", "must be at least 1, got 0");
  }
  try {
    // A memory model for another shape is wrong even where the run does not read it.
    (void)req.memory.for_shape(sched.stages(), sched.chunks(), sched.microbatches(), who);
  } catch (const field_error&) {
    throw;
  } catch (const invalid_argument& e) {
    detail::fail_field(who, "memory", e.what());
  }
  perturbation noise;
  noise.set_cv(req.cv).set_link_cv(req.link_cv).set_seed(req.seed.value_or(1));
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
  detail::check_options(req);
  const bool dp = req.replicas.has_value();
  const bool links = req.link_bandwidth.has_value();
  whatif_result r;
  r.stages = sched.stages();
  r.microbatches = sched.microbatches();
  r.chunks = sched.chunks();
  r.seed = req.seed.value_or(1);
  r.name = req.dynamic ? "dynamic policy on " + sched.name() + "'s placement" : sched.name();
  if (links) {
    r.robustness = detail::whatif_links(sched, req, noise, r);
    detail::require_finite(r);
    return r;
  }
  if (dp) {
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
    data_parallel_monte_carlo_options o;
    o.noise = noise;
    o.samples = req.samples;
    o.keep_samples = req.keep_samples;
    o.progress = req.progress;
    o.data_parallel = m;
    o.threads = req.threads;
    r.data_parallel = monte_carlo_data_parallel(sched, req.costs, o);
    detail::require_finite(r);
    return r;
  }
  dynamic_monte_carlo_options ro;
  ro.noise = noise;
  ro.samples = req.samples;
  ro.keep_samples = req.keep_samples;
  ro.progress = req.progress;
  ro.sensitivity = req.sensitivity;
  if (req.dynamic) {
    ro.memory = req.memory;
    ro.memory_limit = req.memory_limit;
    r.robustness = monte_carlo_dynamic(sched, req.costs, ro);
  } else {
    r.robustness = monte_carlo(sched, req.costs, ro);  // the robustness_options part
  }
  detail::require_finite(r);
  return r;
}

PIPESCHED_INLINE link_timing_result time_links(const schedule& sched,
                                               const whatif_request& req,
                                               link_discipline* traffic) {
  detail::check_options(req);
  if (!req.link_bandwidth) {
    detail::fail_field("whatif", "link_bandwidth", "required to time links");
  }
  const link_model lm = detail::link_model_of(sched, req);
  detail::require_valid(sched, "simulate_links");
  if (traffic != nullptr) {
    *traffic = lm.discipline;
  }
  link_timing_options lo;
  lo.links = lm;
  lo.record_messages = false;
  link_timing_result r = simulate_links(sched, req.costs, lo);
  if (!std::isfinite(r.iteration)) {
    detail::fail(
        "simulate_links: the iteration time does not fit in a double: the costs or "
        "bytes are too large");
  }
  return r;
}
#endif

}  // namespace pipesched
