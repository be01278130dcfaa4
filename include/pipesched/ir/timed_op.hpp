#pragma once

#include <cstddef>

#include "pipesched/ir/op.hpp"

namespace pipesched {

/// One op with its time interval: the one type for "an op that ran from start to end",
/// whether simulated (simulation_result::ops), measured (instrumented_executor) or drawn
/// (timeline). `index` is the op's position in its stage's list; times are in the source's
/// unit (cost-model units when simulated, seconds since the run's start when measured).
struct timed_op {
  stage_index stage = 0;
  std::size_t index = 0;
  op o{};
  double start = 0.0;
  double end = 0.0;

  double duration() const noexcept { return end - start; }
  friend bool operator==(const timed_op&, const timed_op&) = default;
};

}  // namespace pipesched
