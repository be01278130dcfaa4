#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Rare transient stalls (a GC pause, a throttling GPU, a page fault storm): each compute op
/// independently, with `probability`, takes `duration` longer.
struct stall_model {
  double probability = 0.0;  ///< per op, in [0, 1]
  double duration = 0.0;     ///< added to a stalled op, in cost-model units, >= 0

  friend bool operator==(const stall_model&, const stall_model&) = default;
};

/// How a real cluster departs from the clean cost model (docs/robustness.md): the description
/// only; analysis/perturbed_timing.hpp samples it and times schedules under the samples.
///
/// A sampled compute op of kind k on stage s lasts
///   T · slowdown(s) · X + (stall ? stall.duration : 0),
/// X log-normal with mean 1 and coefficient of variation cv(k) (X = 1 exactly when cv = 0).
/// A cross-stage latency T_comm is multiplied by its own log-normal factor with cv link_cv.
/// With every cv 0, no slowdown and no stalls, every sample equals simulate()'s result exactly.
///
/// Deterministic: a sample is a pure function of (seed, sample index, the op's stage, kind,
/// chunk and micro-batch), so the same op gets the same duration wherever an order puts it
/// (what lets a static order and the dynamic policy be compared under the same sample) and on
/// every platform with the same libm.
class perturbation {
 public:
  /// The largest coefficient of variation a sample can mean something with (check_cv).
  static constexpr double max_cv = 10.0;

  perturbation() { cv_.fill(0.0); }

  /// The same coefficient of variation for every compute kind.
  perturbation& set_cv(double cv) {
    check_cv(cv, "cv");
    cv_.fill(cv);
    return *this;
  }
  /// The coefficient of variation of one compute kind (e.g. a noisier W).
  perturbation& set_cv(op_kind k, double cv) {
    if (!is_compute(k)) {
      detail::fail("perturbation: cv of ", to_string(k),
                   " must not be set: only compute ops take time (communication latency: "
                   "set_link_cv)");
    }
    check_cv(cv, "cv");
    cv_[static_cast<std::size_t>(k)] = cv;
    return *this;
  }
  /// Per-stage slowdown factors (size p; 1 = nominal speed, 1.05 = a 5 % straggler).
  perturbation& set_stage_slowdown(std::vector<double> factors) {
    for (std::size_t s = 0; s < factors.size(); ++s) {
      check_factor(factors[s], s);
    }
    slowdown_ = std::move(factors);
    return *this;
  }
  /// One slow stage: stage `s` at `factor` (others nominal); needs the stage count p.
  perturbation& set_straggler(std::uint32_t stages, stage_index s, double factor) {
    if (s >= stages) {
      detail::fail_field("perturbation", "straggler", "stage ", s, " must be < stages (p=", stages,
                         ")");
    }
    std::vector<double> f(stages, 1.0);
    f[s] = factor;
    return set_stage_slowdown(std::move(f));
  }
  perturbation& set_stalls(stall_model stalls) {
    if (!std::isfinite(stalls.probability) || stalls.probability < 0.0 ||
        stalls.probability > 1.0) {
      detail::fail_field("perturbation", "stalls.probability", "must be in [0, 1], got ",
                         stalls.probability);
    }
    if (!std::isfinite(stalls.duration) || stalls.duration < 0.0) {
      detail::fail_field("perturbation", "stalls.duration", "must be finite and >= 0, got ",
                         stalls.duration);
    }
    stalls_ = stalls;
    return *this;
  }
  /// Coefficient of variation of every cross-stage latency (T_comm).
  perturbation& set_link_cv(double cv) {
    check_cv(cv, "link_cv");
    link_cv_ = cv;
    return *this;
  }
  perturbation& set_seed(std::uint64_t seed) noexcept {
    seed_ = seed;
    return *this;
  }

  double cv(op_kind k) const noexcept {
    return is_compute(k) ? cv_[static_cast<std::size_t>(k)] : 0.0;
  }
  /// The slowdown of stage s (1 when no table or s beyond it).
  double slowdown(stage_index s) const noexcept {
    return s < slowdown_.size() ? slowdown_[s] : 1.0;
  }
  const std::vector<double>& stage_slowdown() const noexcept { return slowdown_; }
  const stall_model& stalls() const noexcept { return stalls_; }
  double link_cv() const noexcept { return link_cv_; }
  std::uint64_t seed() const noexcept { return seed_; }

  /// True when no sample differs from the clean model (the cvs 0, factors 1, no stalls).
  bool is_none() const noexcept {
    for (double c : cv_) {
      if (c != 0.0) {
        return false;
      }
    }
    for (double f : slowdown_) {
      if (f != 1.0) {
        return false;
      }
    }
    return link_cv_ == 0.0 && (stalls_.probability == 0.0 || stalls_.duration == 0.0);
  }

  /// Checks the slowdown table against p stages (`who` prefixes the message).
  void check_shape(std::uint32_t stages, std::string_view who) const {
    if (!slowdown_.empty() && slowdown_.size() != stages) {
      detail::fail(who, ": perturbation stage_slowdown (", slowdown_.size(),
                   " entries) must hold one entry per stage (p=", stages, ")");
    }
  }

 private:
  static void check_cv(double cv, const char* field) {
    // Above max_cv a log-normal sample of mean 1 is almost always near 0 and rarely huge: N
    // samples' mean then says nothing about the mean (cv 1e10 gave a mean makespan of 1e-71).
    if (!std::isfinite(cv) || cv < 0.0 || cv > max_cv) {
      detail::fail_field("perturbation", field, "must be a finite number >= 0 and <= ", max_cv,
                         ", got ", cv);
    }
  }
  static void check_factor(double f, std::size_t s) {
    if (!std::isfinite(f) || f <= 0.0) {
      detail::fail_field("perturbation", "stage_slowdown", "stage ", s,
                         "'s factor must be finite and > 0, got ", f);
    }
  }

  std::array<double, op_kind_count> cv_{};
  std::vector<double> slowdown_;
  stall_model stalls_{};
  double link_cv_ = 0.0;
  std::uint64_t seed_ = 0;
};

}  // namespace pipesched
