#pragma once

#include <algorithm>
#include <string_view>

#include "pipesched/gen/generator.hpp"

namespace pipesched {

/// 1F1B (PipeDream-Flush): stage s (0-based) runs min(p−1−s, m) warm-up forwards, then
/// alternates F and BW until the forwards run out, then the remaining BW. Peak activation
/// memory (p−s)·M_B; bubble (p−1)(T_F+T_B+T_W).
/// With split_backward each BW becomes B immediately followed by W.
struct one_f_one_b {
  bool split_backward = false;

  std::string_view name() const noexcept { return split_backward ? "1f1b-split" : "1f1b"; }

  /// Forwards stage s runs before its first backward.
  static std::uint32_t warmup(std::uint32_t p, std::uint32_t m, stage_index s) noexcept {
    return std::min(p - 1 - s, m);
  }

  schedule generate(const generator_params& params) const {
    detail::check_shape(name(), params, 1, split_backward ? 3 : 2);
    return generate_with_warmup(name(), params, split_backward, [&](stage_index s) {
      return warmup(params.stages, params.microbatches, s);
    });
  }

  /// The flush order shared with GPipe: stage s runs `warmup_of(s)` forwards, then
  /// alternates F and BW until the forwards run out, then the remaining BW. GPipe is the
  /// case warmup = m. The caller has checked the shape.
  template <class Warmup>
  static schedule generate_with_warmup(std::string_view name,
                                       const generator_params& params,
                                       bool split_backward,
                                       Warmup warmup_of) {
    const std::uint32_t p = params.stages;
    const std::uint32_t m = params.microbatches;
    schedule out = schedule::sequential(std::string(name), p, m);
    for (stage_index s = 0; s < p; ++s) {
      auto& ops = out.stage_ops(s);
      ops.reserve(std::size_t{m} * (split_backward ? 3 : 2));
      auto backward = [&](microbatch_index j) {
        if (split_backward) {
          ops.push_back(make_op(op_kind::backward_input, j));
          ops.push_back(make_op(op_kind::backward_weight, j));
        } else {
          ops.push_back(make_op(op_kind::backward_full, j));
        }
      };
      const std::uint32_t w = std::min<std::uint32_t>(warmup_of(s), m);
      microbatch_index f = 0;
      microbatch_index b = 0;
      for (; f < w; ++f) {
        ops.push_back(make_op(op_kind::forward, f));
      }
      for (; f < m; ++f, ++b) {
        ops.push_back(make_op(op_kind::forward, f));
        backward(b);
      }
      for (; b < m; ++b) {
        backward(b);
      }
    }
    return out;
  }
};

}  // namespace pipesched
