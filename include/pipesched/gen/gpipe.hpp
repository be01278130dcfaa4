#pragma once

#include <string_view>

#include "pipesched/gen/generator.hpp"

namespace pipesched {

/// GPipe: every stage runs all forwards, then all backwards (micro-batch order 0..m-1).
/// Peak activation memory m·M_B; bubble (p−1)(T_F+T_B+T_W).
/// With split_backward the fused BW becomes B immediately followed by W (same timing, for
/// comparison with the zero-bubble schedules).
struct gpipe {
  bool split_backward = false;

  std::string_view name() const noexcept { return split_backward ? "gpipe-split" : "gpipe"; }

  schedule generate(const generator_params& params) const {
    detail::check_shape(name(), params, 1, split_backward ? 3 : 2);
    const std::uint32_t p = params.stages;
    const std::uint32_t m = params.microbatches;
    schedule out = schedule::sequential(std::string(name()), p, m);
    for (stage_index s = 0; s < p; ++s) {
      auto& ops = out.stage_ops(s);
      ops.reserve(std::size_t{m} * (split_backward ? 3 : 2));
      for (microbatch_index j = 0; j < m; ++j) {
        ops.push_back(make_op(op_kind::forward, j));
      }
      for (microbatch_index j = 0; j < m; ++j) {
        if (split_backward) {
          ops.push_back(make_op(op_kind::backward_input, j));
          ops.push_back(make_op(op_kind::backward_weight, j));
        } else {
          ops.push_back(make_op(op_kind::backward_full, j));
        }
      }
    }
    return out;
  }
};

}  // namespace pipesched
