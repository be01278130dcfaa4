#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Memory limits per stage, in the memory model's units, static memory included: none, one
/// value for every stage, or one value per stage. The one type every option that bounds memory
/// takes (generation, recompute, check_memory, the dynamic policy, what-if, pack), so a limit
/// means the same everywhere and its rules are checked in one place (check()).
///
/// Converts from a number (every stage), a vector (per stage; empty: none), an optional number
/// or nullopt, so `opts.memory_limit = 72e9;` and `opts.memory_limit = {3.0, 4.0};` read as
/// they say.
class memory_limits {
 public:
  memory_limits() = default;
  memory_limits(std::nullopt_t) noexcept {}
  memory_limits(double every_stage) : values_{every_stage} {}
  memory_limits(std::optional<double> every_stage) {
    if (every_stage) {
      values_.push_back(*every_stage);
    }
  }
  memory_limits(std::vector<double> per_stage) : values_(std::move(per_stage)) {}
  memory_limits(std::initializer_list<double> values) : values_(values) {}

  /// True when a limit is set.
  bool has_value() const noexcept { return !values_.empty(); }
  explicit operator bool() const noexcept { return has_value(); }
  /// One value for every stage (false when none is set).
  bool uniform() const noexcept { return values_.size() == 1; }
  void reset() noexcept { values_.clear(); }

  /// Stage s's limit. Requires has_value(); a per-stage table must cover s (check() ensures it).
  double at(stage_index s) const {
    if (values_.empty()) {
      detail::fail("memory_limits::at: no limit is set");
    }
    if (values_.size() == 1) {
      return values_[0];
    }
    if (s >= values_.size()) {
      detail::fail("memory_limits::at: stage ", s, " has no limit (", values_.size(),
                   " values given)");
    }
    return values_[s];
  }
  /// The values as given: empty, one, or one per stage.
  const std::vector<double>& values() const noexcept { return values_; }
  /// One value per stage for p stages (empty when none is set). Call check() first.
  std::vector<double> for_stages(std::uint32_t p) const {
    if (values_.empty()) {
      return {};
    }
    if (values_.size() == 1) {
      return std::vector<double>(p, values_[0]);
    }
    return values_;
  }

  /// The rules, once: one value or one per stage (p), each finite and >= 0 (> 0 when
  /// `positive`). Throws field_error naming `who` and `field`.
  void check(const std::string& who,
             const std::string& field,
             std::uint32_t p,
             bool positive = false) const {
    if (values_.size() > 1 && values_.size() != p) {
      detail::fail_field(who, field, "must hold one value or one per stage (p=", p, "), got ",
                         values_.size());
    }
    for (std::size_t s = 0; s < values_.size(); ++s) {
      const double v = values_[s];
      if (!std::isfinite(v) || v < 0.0 || (positive && v == 0.0)) {
        detail::fail_field(
            who, values_.size() == 1 ? field : field + "[" + std::to_string(s) + "]",
            positive ? "must be finite and > 0, got " : "must be finite and >= 0, got ", v);
      }
    }
  }

  friend bool operator==(const memory_limits&, const memory_limits&) = default;

 private:
  std::vector<double> values_;
};

}  // namespace pipesched
