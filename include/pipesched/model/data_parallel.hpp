#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/model/transformer_costs.hpp"

namespace pipesched {

/// Ring all-reduce of `bytes` among D peers: 2(D−1) steps (reduce-scatter, then all-gather),
/// each moving bytes/D over one link: 2(D−1)·latency + 2(D−1)/D · bytes / bandwidth. 0 for D = 1.
constexpr double ring_allreduce_time(std::uint32_t replicas,
                                     double bytes,
                                     double bandwidth,
                                     double latency) noexcept {
  if (replicas <= 1) {
    return 0.0;
  }
  const double steps = 2.0 * (replicas - 1);
  return steps * latency + steps / replicas * bytes / bandwidth;
}

/// D data-parallel replicas of a pipeline and the gradient all-reduce that ends an iteration
/// (docs/robustness.md §4): per stage, a ring all-reduce of that stage's gradients among its D
/// peers, which can start only when every replica's stage has finished its last W (or BW).
/// Times are in cost-model units: `bandwidth` in bytes per unit, `latency` in units.
struct data_parallel_model {
  std::uint32_t replicas = 1;  ///< D >= 1
  /// Gradient bytes of each stage's slice (size p), or one value for every stage (size 1).
  std::vector<double> gradient_bytes{0.0};
  double bandwidth = 1.0;  ///< bytes per time unit of one ring link, > 0
  double latency = 0.0;    ///< per ring step, >= 0

  /// Gradient bytes of stage s.
  double bytes(stage_index s) const noexcept {
    return gradient_bytes.size() == 1 ? gradient_bytes[0]
                                      : (s < gradient_bytes.size() ? gradient_bytes[s] : 0.0);
  }

  /// Throws invalid_argument (prefixed with `who`) for a value out of range or a per-stage
  /// table of the wrong size.
  void check(std::uint32_t stages, std::string_view who) const {
    const std::string w(who);
    if (replicas == 0) {
      detail::fail_field(w, "replicas", "must be at least 1, got 0");
    }
    if (gradient_bytes.size() != 1 && gradient_bytes.size() != stages) {
      detail::fail_field(w, "gradient_bytes", "must hold one value or one per stage (p=", stages,
                         "), got ", gradient_bytes.size(), " entries");
    }
    for (double b : gradient_bytes) {
      if (!std::isfinite(b) || b < 0.0) {
        detail::fail_field(w, "gradient_bytes", "must be finite and >= 0, got ", b);
      }
    }
    if (!std::isfinite(bandwidth) || bandwidth <= 0.0) {
      detail::fail_field(w, "bandwidth", "must be finite and > 0, got ", bandwidth);
    }
    if (!std::isfinite(latency) || latency < 0.0) {
      detail::fail_field(w, "latency", "must be finite and >= 0, got ", latency);
    }
    // An all-reduce that does not fit in a double would print as inf: refused here instead.
    for (stage_index s = 0; s < stages; ++s) {
      const double t = ring_allreduce_time(replicas, bytes(s), bandwidth, latency);
      if (!std::isfinite(t) || t > max_allreduce_time) {
        detail::fail_field(w, "gradient_bytes", "stage ", s, "'s all-reduce (", bytes(s),
                           " bytes at bandwidth ", bandwidth,
                           ") takes longer than a double can add up (> 1e300 time units)");
      }
    }
  }

  /// Longer all-reduces are refused: the iteration time adds them to the pipeline's.
  static constexpr double max_allreduce_time = 1e300;
};

/// Ring reduce-scatter (or all-gather) of `bytes` among D peers: half an all-reduce, (D−1)
/// steps of bytes/D: (D−1)·latency + (D−1)/D · bytes / bandwidth. 0 for D = 1.
constexpr double ring_reduce_scatter_time(std::uint32_t replicas,
                                          double bytes,
                                          double bandwidth,
                                          double latency) noexcept {
  return ring_allreduce_time(replicas, bytes, bandwidth, latency) / 2.0;
}

/// Gradient bytes of a slice of `dims.layers` transformer layers: 12h² + 13h parameters per
/// layer (attention 4h² + 4h, MLP 8h² + 5h, two layer norms 4h), `bytes_per_param` each (2 for
/// bf16 gradients, 4 for fp32).
inline double transformer_gradient_bytes(const transformer_dims& dims,
                                         double bytes_per_param = 2.0) {
  if (dims.hidden == 0 || dims.layers == 0) {
    detail::fail("transformer_gradient_bytes: hidden (", dims.hidden, ") and layers (", dims.layers,
                 ") must be >= 1");
  }
  const auto h = static_cast<double>(dims.hidden);
  return static_cast<double>(dims.layers) * (12.0 * h * h + 13.0 * h) * bytes_per_param;
}

}  // namespace pipesched
