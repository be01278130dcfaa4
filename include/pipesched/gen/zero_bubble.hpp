#pragma once

#include <algorithm>
#include <string_view>

#include "pipesched/gen/generator.hpp"

namespace pipesched {

namespace detail {

/// The hand-crafted zero-bubble family (docs/model.md §6): stage s runs `warmup` forwards, then
/// steady steps k = 0..m-1 of B_k, W_{k−delay} (if >= 0), F_{k+warmup} (if < m), then the
/// remaining W. ZB-H1: warmup p−s, delay s. ZB-H2: warmup 2(p−s)−1, delay 2s.
inline schedule zero_bubble_family(std::string_view name, const generator_params& params, bool h2) {
  check_shape(name, params, 1, 3);
  const std::uint32_t p = params.stages;
  const std::uint32_t m = params.microbatches;
  schedule out = schedule::sequential(std::string(name), p, m);
  for (stage_index s = 0; s < p; ++s) {
    auto& ops = out.stage_ops(s);
    ops.reserve(std::size_t{m} * 3);
    const std::uint64_t nominal = h2 ? 2 * std::uint64_t{p - s} - 1 : std::uint64_t{p - s};
    const auto warmup = static_cast<std::uint32_t>(std::min<std::uint64_t>(nominal, m));
    const std::uint64_t delay = h2 ? 2 * std::uint64_t{s} : std::uint64_t{s};
    for (microbatch_index f = 0; f < warmup; ++f) {
      ops.push_back(make_op(op_kind::forward, f));
    }
    microbatch_index next_w = 0;
    for (std::uint64_t k = 0; k < m; ++k) {
      ops.push_back(make_op(op_kind::backward_input, static_cast<microbatch_index>(k)));
      if (k >= delay) {
        ops.push_back(make_op(op_kind::backward_weight, next_w++));
      }
      if (k + warmup < m) {
        ops.push_back(make_op(op_kind::forward, static_cast<microbatch_index>(k + warmup)));
      }
    }
    for (; next_w < m; ++next_w) {
      ops.push_back(make_op(op_kind::backward_weight, next_w));
    }
  }
  return out;
}

}  // namespace detail

/// ZB-H1: 1F1B's peak activation memory, p·M_B, with bubble (p−1)(T_F+T_B−T_W). Stage s
/// (0-based) runs min(p−s, m) forwards before its first B and delays each W by s steps.
struct zb_h1 {
  std::string_view name() const noexcept { return "zb-h1"; }
  static std::uint32_t warmup(std::uint32_t p, std::uint32_t m, stage_index s) noexcept {
    return std::min(p - s, m);
  }
  schedule generate(const generator_params& params) const {
    return detail::zero_bubble_family(name(), params, false);
  }
};

/// ZB-H2: about twice 1F1B's activation memory, (2p−1)·M_B, with bubble (p−1)(T_F+T_B−2T_W),
/// zero when the three costs are equal. Stage s runs min(2(p−s)−1, m) warm-up forwards and
/// delays each W by 2s steps.
struct zb_h2 {
  std::string_view name() const noexcept { return "zb-h2"; }
  static std::uint32_t warmup(std::uint32_t p, std::uint32_t m, stage_index s) noexcept {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(2 * std::uint64_t{p - s} - 1, m));
  }
  schedule generate(const generator_params& params) const {
    return detail::zero_bubble_family(name(), params, true);
  }
};

}  // namespace pipesched
