#pragma once

#include <string_view>

#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/one_f_one_b.hpp"

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
    // All m forwards before the first backward: 1F1B's order with the warm-up at m.
    return one_f_one_b::generate_with_warmup(name(), params, split_backward,
                                             [&](stage_index) { return params.microbatches; });
  }
};

}  // namespace pipesched
