#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"

// The share of a peak rate a kernel achieves as a function of its size (docs/model.md §10.2):
// the GPU's GEMM and attention kernels fill the machine better the more work they carry.

namespace pipesched {

/// Efficiency by size: points (size, efficiency), sizes strictly ascending and > 0,
/// efficiencies non-decreasing in (0, 1]. Between two points the efficiency is linear in
/// log10(size); below the first point it is the first efficiency, above the last the last.
/// For a GEMM the size is its FLOPs (2·M·N·K), as Calculon's system files and GEMM benchmarks
/// plot it. An empty curve is efficiency 1 everywhere.
struct efficiency_curve {
  std::vector<std::pair<double, double>> points;

  /// One efficiency for every size.
  static efficiency_curve constant(double e) { return efficiency_curve{{{1.0, e}}}; }

  /// The efficiency at `size` (> 0; a size of 0 or less takes the first point's).
  double at(double size) const noexcept {
    if (points.empty()) {
      return 1.0;
    }
    if (!(size > points.front().first)) {
      return points.front().second;
    }
    if (size >= points.back().first) {
      return points.back().second;
    }
    std::size_t i = 1;
    while (points[i].first <= size) {
      ++i;
    }
    const auto [x0, e0] = points[i - 1];
    const auto [x1, e1] = points[i];
    const double t = (std::log10(size) - std::log10(x0)) / (std::log10(x1) - std::log10(x0));
    return e0 + t * (e1 - e0);
  }

  /// The largest efficiency (the last point's).
  double ceiling() const noexcept { return points.empty() ? 1.0 : points.back().second; }

  /// Throws field_error(who, field, rule) for a curve that is not of the documented form,
  /// naming the point: sizes finite, > 0 and ascending; efficiencies in (0, 1], never falling.
  void check(std::string_view who, std::string_view field) const {
    const std::string w(who);
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto [x, e] = points[i];
      const std::string at = std::string(field) + "/" + std::to_string(i);
      if (!std::isfinite(x) || x <= 0.0) {
        detail::fail_field(w, at, "the size must be finite and > 0, not ", x);
      }
      if (!std::isfinite(e) || e <= 0.0 || e > 1.0) {
        detail::fail_field(w, at, "the efficiency must be in (0, 1], not ", e);
      }
      if (i > 0 && x <= points[i - 1].first) {
        detail::fail_field(w, at, "sizes must be ascending: ", x, " follows ", points[i - 1].first);
      }
      if (i > 0 && e < points[i - 1].second) {
        detail::fail_field(w, at, "the curve must not fall with size (monotone): ", e, " at ", x,
                           " follows ", points[i - 1].second, " at ", points[i - 1].first);
      }
    }
  }

  friend bool operator==(const efficiency_curve&, const efficiency_curve&) = default;
};

}  // namespace pipesched
