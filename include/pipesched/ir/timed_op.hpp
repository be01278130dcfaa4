#pragma once

#include <cstddef>
#include <cstdint>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Most ops one stage's list may hold for it to be timed or traversed: positions in a list
/// are 32-bit (timed_op::index). Lists can be edited freely; traversal refuses longer ones.
inline constexpr std::size_t max_stage_ops = UINT32_MAX;

/// One op with its time interval: the one type for "an op that ran from start to end",
/// whether simulated (simulation_result::ops), measured (instrumented_executor) or drawn
/// (timeline). `index` is the op's position in its stage's list (32 bits: a stage holds at
/// most max_stage_ops ops); times are in the source's unit (cost-model units when simulated,
/// seconds since the run's start when measured).
struct timed_op {
  stage_index stage = 0;
  std::uint32_t index = 0;
  op o{};
  double start = 0.0;
  double end = 0.0;

  double duration() const noexcept { return end - start; }
  friend bool operator==(const timed_op&, const timed_op&) = default;
};
// 32 bytes: simulate writes one per op, and its time at mid sizes follows the bytes written
// (docs/benchmarks.md §6).
static_assert(sizeof(timed_op) == 32, "timed_op must stay 32 bytes");

namespace detail {

/// Position `i` of stage `s`'s list as a timed_op::index, for producers that do not go
/// through a traversal (drivers, executors); throws, naming `who`, past max_stage_ops.
inline std::uint32_t op_position(std::size_t i, stage_index s, const char* who) {
  if (i > max_stage_ops) {
    fail(who, ": op ", i, " of stage ", s, " is beyond max_stage_ops (", max_stage_ops, ")");
  }
  return static_cast<std::uint32_t>(i);
}

}  // namespace detail

}  // namespace pipesched
