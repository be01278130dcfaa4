#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numbers>
#include <optional>
#include <vector>

#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/ir/detail/splitmix.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/perturbation.hpp"

// Sampling a perturbation (model/perturbation.hpp) and timing schedules under the samples.
// The timing itself is the one engine's (detail::timed_traverse through detail::simulate_with):
// a sample only supplies per-op durations and latencies.

namespace pipesched {

namespace detail {

/// Uniform in (0, 1]: the top 53 bits, shifted off zero (the log-normal takes its log).
constexpr double unit_open(std::uint64_t h) noexcept {
  return (static_cast<double>(h >> 11) + 1.0) * 0x1.0p-53;
}

/// A noise stream for one (seed, sample, plan entry, micro-batch): stream 0 the duration,
/// 1 the stall, 2 + k the latency of requirement k.
struct noise_key {
  std::uint64_t base;
  noise_key(std::uint64_t seed, std::uint64_t sample, std::size_t plan_index, microbatch_index mb)
      : noise_key(from_sample(sample_hash(seed, sample), plan_index, mb)) {}
  /// The part of a key that every op of one sample shares (computed once per sample).
  static constexpr std::uint64_t sample_hash(std::uint64_t seed, std::uint64_t sample) noexcept {
    return mix64(mix64(seed) ^ sample);
  }
  /// The key of (plan entry, micro-batch) in the sample whose sample_hash is `h`.
  static constexpr noise_key from_sample(std::uint64_t h,
                                         std::size_t plan_index,
                                         microbatch_index mb) noexcept {
    return noise_key{mix64(h ^ ((std::uint64_t{plan_index} << 32) | mb))};
  }
  std::uint64_t draw(std::uint64_t stream, std::uint64_t k = 0) const noexcept {
    return mix64(base ^ mix64((stream << 8) | k));
  }

 private:
  explicit constexpr noise_key(std::uint64_t b) noexcept : base(b) {}
};

/// Log-normal with mean 1 and coefficient of variation `cv`: exp(σZ − σ²/2), σ² = ln(1+cv²),
/// Z standard normal by Box-Muller from two draws. Exactly 1 for cv = 0. Our own transform:
/// std distributions differ between standard libraries. σ and σ²/2 are computed once.
class lognormal_unit_mean_of {
 public:
  explicit lognormal_unit_mean_of(double cv = 0.0) : cv_(cv) {
    if (cv != 0.0) {
      const double sigma2 = std::log1p(cv * cv);
      sigma_ = std::sqrt(sigma2);
      half_sigma2_ = 0.5 * sigma2;
    }
  }
  double operator()(std::uint64_t h1, std::uint64_t h2) const {
    if (cv_ == 0.0) {
      return 1.0;
    }
    const double z = std::sqrt(-2.0 * std::log(unit_open(h1))) *
                     std::cos(2.0 * std::numbers::pi * unit_open(h2));
    return std::exp(sigma_ * z - half_sigma2_);
  }
  bool is_one() const noexcept { return cv_ == 0.0; }

 private:
  double cv_ = 0.0;
  double sigma_ = 0.0;
  double half_sigma2_ = 0.0;
};

/// lognormal_unit_mean_of(cv)(h1, h2).
inline double lognormal_unit_mean(double cv, std::uint64_t h1, std::uint64_t h2) {
  return lognormal_unit_mean_of(cv)(h1, h2);
}

/// The sampling rule, written once (perturbed_costs and the data-parallel replicas use it): the
/// costs of plan entry i for micro-batch mb in one sample (docs/robustness.md §1). A compute op
/// lasts T · slowdown(s) · X (+ the stall), X log-normal; each cross-stage latency is
/// multiplied by its own log-normal factor. The per-entry constants are computed once.
class cost_sampler {
 public:
  /// `costs` already read for the placement's shape.
  cost_sampler(const traversal_plan& plan,
               const placement& pl,
               const shaped_cost_model& costs,
               const perturbation& noise)
      : base_(cost_table(plan, pl, costs)),
        per_mb_(costs.has_microbatch_factors()
                    ? std::optional<microbatch_costs>(std::in_place, plan, pl, costs)
                    : std::nullopt),
        entries_(plan.size()),
        stalls_(noise.stalls()),
        link_(noise.link_cv()),
        seed_(noise.seed()) {
    for (stage_index s = 0; s < pl.stages(); ++s) {
      for (chunk_index c = 0; c < pl.chunks(); ++c) {
        for (op_kind k : all_op_kinds) {
          const op o = make_op(k, 0, c);
          entry& e = entries_[plan.index(s, o)];
          e.compute = is_compute(k);
          e.latencies = plan.at(s, o).count;
          e.slow = noise.slowdown(s);
          e.noise = lognormal_unit_mean_of(noise.cv(k));
        }
      }
    }
  }

  /// What every op of sample `sample` shares (noise_key::sample_hash).
  std::uint64_t sample_hash(std::uint64_t sample) const noexcept {
    return noise_key::sample_hash(seed_, sample);
  }
  /// The costs of plan entry `i` for micro-batch `mb` in the sample whose hash is `h`.
  op_cost operator()(std::uint64_t h, std::size_t i, microbatch_index mb) const {
    op_cost oc = per_mb_ ? (*per_mb_)(i, mb) : base_[i];
    const entry& e = entries_[i];
    const noise_key key = noise_key::from_sample(h, i, mb);
    if (e.compute) {
      oc.duration *= e.slow * e.noise(key.draw(0, 0), key.draw(0, 1));
      if (stalls_.probability > 0.0 && unit_open(key.draw(1)) <= stalls_.probability) {
        oc.duration += stalls_.duration;
      }
      oc.overlap_gain *= e.slow;
    }
    if (!link_.is_one()) {  // a factor of exactly 1 otherwise
      for (std::uint8_t j = 0; j < e.latencies; ++j) {
        if (oc.latency[j] != 0.0) {  // a same-stage input: 0 times any factor stays 0
          oc.latency[j] *= link_(key.draw(2 + j, 0), key.draw(2 + j, 1));
        }
      }
    }
    return oc;
  }

 private:
  struct entry {
    bool compute = false;
    std::uint8_t latencies = 0;
    double slow = 1.0;
    lognormal_unit_mean_of noise;
  };
  std::vector<op_cost> base_;
  std::optional<microbatch_costs> per_mb_;  // per-micro-batch factors (docs/model.md §3.1)
  std::vector<entry> entries_;
  stall_model stalls_;
  lognormal_unit_mean_of link_;
  std::uint64_t seed_;
};

}  // namespace detail

/// One sample of a perturbation: the duration and latencies of every op of a shape
/// (placement, m), as the timing engine takes them (timed_traverse's per-op `costs`).
/// The same op (stage, kind, chunk, micro-batch) gets the same numbers in every order.
class perturbed_costs {
 public:
  /// `costs` is read for the placement's shape; throws invalid_argument (prefixed with `who`)
  /// for tables of another shape.
  perturbed_costs(const placement& pl,
                  std::uint32_t microbatches,
                  bool lowered,
                  const cost_model& costs,
                  const perturbation& noise,
                  std::uint64_t sample,
                  const char* who = "perturbed_costs")
      : costs_(costs.for_shape(pl.stages(), pl.chunks(), microbatches, who)),
        plan_(pl, lowered),
        m_(microbatches) {
    noise.check_shape(pl.stages(), who);
    const detail::cost_sampler sampler(plan_, pl, costs_, noise);
    const std::uint64_t h = sampler.sample_hash(sample);
    const std::size_t n = plan_.size();
    table_.resize(n * m_);
    for (microbatch_index mb = 0; mb < m_; ++mb) {
      for (std::size_t i = 0; i < n; ++i) {
        table_[std::size_t{mb} * n + i] = sampler(h, i, mb);
      }
    }
  }

  /// Costs of the op at plan entry `plan_index` for micro-batch `mb`.
  const detail::op_cost& operator()(std::size_t plan_index, microbatch_index mb) const noexcept {
    return table_[std::size_t{mb} * plan_.size() + plan_index];
  }
  /// Costs of op `o` on stage `s`.
  const detail::op_cost& of(stage_index s, const op& o) const noexcept {
    return (*this)(plan_.index(s, o), o.mb);
  }
  /// What timed_traverse takes: a cheap copyable view of this table.
  auto view() const noexcept {
    return
        [t = table_.data(), n = plan_.size()](std::size_t i, microbatch_index mb)
            PIPESCHED_HOT_LAMBDA -> const detail::op_cost& { return t[std::size_t{mb} * n + i]; };
  }
  const detail::traversal_plan& plan() const noexcept { return plan_; }
  /// The cost model read for the shape (its T_comm prices lowered rendezvous, unperturbed).
  const shaped_cost_model& shaped_costs() const noexcept { return costs_; }
  std::uint32_t microbatches() const noexcept { return m_; }

 private:
  shaped_cost_model costs_;
  detail::traversal_plan plan_;
  std::uint32_t m_;
  std::vector<detail::op_cost> table_;
};

/// simulate_perturbed's options: simulate()'s (records, critical path, validation, transfers)
/// plus which sample of which noise. Every simulate_* and monte_carlo_* takes (schedule, costs,
/// options) and names these fields `noise` and `sample` (docs/model.md §11).
struct perturbed_options : simulate_options {
  perturbation noise{};      ///< none by default: simulate()'s times exactly
  std::uint64_t sample = 0;  ///< which sample of `noise`
};

/// simulate() under sample `options.sample` of `options.noise`: the same result (per-op times,
/// statistics, critical path), the ops timed by the one timing engine with the sampled
/// durations and latencies. With no noise (perturbation::is_none) it equals simulate(sched,
/// costs) exactly. In a lowered schedule a SEND / RECV rendezvous lasts its unperturbed T_comm.
inline simulation_result simulate_perturbed(const schedule& sched,
                                            const cost_model& costs,
                                            const perturbed_options& options = {}) {
  detail::require_traversable(sched, "simulate_perturbed");
  if (options.validate) {
    detail::require_valid(sched, "simulate_perturbed");
  }
  const perturbed_costs pc(sched.layout(), sched.microbatches(), sched.has_comm(), costs,
                           options.noise, options.sample, "simulate_perturbed");
  return detail::simulate_with(sched, pc.shaped_costs(), pc.plan(), pc.view(), options);
}

/// Told how far a Monte-Carlo run is (monte_carlo, monte_carlo_dynamic,
/// monte_carlo_data_parallel): `done` of `total` samples, on the calling thread, after each
/// sample or group of samples and once more at the end; a front end's progress line hangs here.
/// It only observes: the results are the same with or without it. What it throws propagates.
using progress_observer = std::function<void(std::uint64_t done, std::uint64_t total)>;

namespace detail {

/// Counts samples against a total and tells the observer (none: counts only).
class sample_progress {
 public:
  sample_progress(const progress_observer& observer, std::uint64_t total)
      : observer_(observer), total_(total) {}
  void step(std::uint64_t n = 1) {
    done_ += n;
    if (observer_) {
      observer_(done_, total_);
    }
  }

 private:
  const progress_observer& observer_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
};

}  // namespace detail

/// Distribution of one number over samples. Percentiles by nearest rank: p50 is the
/// ceil(0.5 N)-th smallest, p99 the ceil(0.99 N)-th (the max for N < 100).
struct sample_stats {
  std::size_t count = 0;
  double mean = 0.0;
  double stddev = 0.0;  ///< population standard deviation
  double min = 0.0;
  double p50 = 0.0;
  double p99 = 0.0;
  double max = 0.0;
};

/// The options every monte_carlo_* takes (its common core; robustness_options,
/// dynamic_monte_carlo_options and data_parallel_monte_carlo_options add their own fields):
/// which noise, which samples, whether to keep them, who to tell.
struct monte_carlo_options {
  perturbation noise{};            ///< none by default: every sample is the clean run
  std::uint32_t samples = 100;     ///< N sampled iterations, >= 1
  std::uint64_t first_sample = 0;  ///< sample indices first_sample .. first_sample + N − 1
  bool keep_samples = false;       ///< keep every sample's iteration time (monte_carlo_stats)
  progress_observer progress{};    ///< told (done, total) on the calling thread
};

/// What every monte_carlo_* returns (its common core; robustness_result and
/// data_parallel_stats add their own fields).
struct monte_carlo_stats {
  sample_stats iteration;       ///< the iteration time over the N samples
  std::vector<double> samples;  ///< each sample's iteration time, in order, when keep_samples
};

namespace detail {

/// Neumaier's compensated sum: exact to about one rounding, whatever the order and spread.
class compensated_sum {
 public:
  void add(double x) noexcept {
    const double t = sum_ + x;
    c_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  double value() const noexcept { return sum_ + c_; }

 private:
  double sum_ = 0.0;
  double c_ = 0.0;
};

/// The mean of `values` as base + Σ(x − base)/N with base = the smallest: N equal samples have
/// exactly that mean (a plain sum of 10,000 equal makespans drifts by 1e-11, which a reader takes
/// for noise), and the result lies in [min, max]. Each term is divided by N before it is added,
/// so no sum of finite samples overflows.
inline double mean_of(const std::vector<double>& values) {
  if (values.empty()) {
    return 0.0;
  }
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  compensated_sum sum;
  for (double x : values) {
    sum.add((x - *lo) / n);
  }
  return std::clamp(*lo + sum.value(), *lo, *hi);
}

}  // namespace detail

/// The statistics of `values` (empty: all zero). The one rule for a mean over samples
/// (detail::mean_of): with no noise, mean = min = max and the deviation is 0 exactly; always
/// min <= mean <= max and min <= p50 <= p99 <= max.
inline sample_stats stats_of(std::vector<double> values) {
  sample_stats r;
  r.count = values.size();
  if (values.empty()) {
    return r;
  }
  std::sort(values.begin(), values.end());
  r.mean = detail::mean_of(values);
  const auto n = static_cast<double>(values.size());
  // Deviations in units of the spread: their squares cannot overflow (samples near 1e238).
  const double spread = values.back() - values.front();
  if (spread > 0.0) {
    detail::compensated_sum sq;
    for (double x : values) {
      const double d = (x - r.mean) / spread;
      sq.add(d * d / n);
    }
    r.stddev = spread * std::sqrt(sq.value());
  }
  auto rank = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * n));
    return values[std::clamp<std::size_t>(k, 1, values.size()) - 1];
  };
  r.min = values.front();
  r.p50 = rank(0.5);
  r.p99 = rank(0.99);
  r.max = values.back();
  return r;
}

}  // namespace pipesched
