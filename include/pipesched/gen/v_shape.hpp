#pragma once

#include <string_view>

#include "pipesched/gen/detail/v_shape_blocks.hpp"
#include "pipesched/gen/generator.hpp"

// v_block, the choice of building block, is defined with the port in
// gen/detail/v_shape_blocks.hpp.

namespace pipesched {

/// V-Half: V placement (stage s holds global chunks s and 2p−1−s), two chunks, split B / W, built
/// from the V-Half building block of Qi et al. by their published greedy (a faithful port:
/// docs/model.md §6). The order depends on p and m only, not on the costs. At T_F = T_B = T_W
/// and M_W = 0 its peak is (p+2)//2 stage activations (half of 1F1B's p) and its bubble rate
/// about p/(2m).
struct v_half {
  std::string_view name() const noexcept { return "v-half"; }
  schedule generate(const generator_params& params) const {
    return detail::v_block_schedule(v_block::half, params, name());
  }
};

/// V-Min: as v_half with the V-Min building block: peak (p+4)//3 stage activations (a third of
/// 1F1B's) and bubble rate about 2p/(3m) at T_F = T_B = T_W, M_W = 0 (docs/model.md §6).
struct v_min {
  std::string_view name() const noexcept { return "v-min"; }
  schedule generate(const generator_params& params) const {
    return detail::v_block_schedule(v_block::min, params, name());
  }
};

}  // namespace pipesched
