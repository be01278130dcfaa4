#pragma once

// A small schedule with overlapped pairs, for the views' tests (pairs drawn as one
// slot holding both ops).
#include <pipesched/ir/op.hpp>
#include <pipesched/ir/schedule.hpp>

namespace test_support {

/// Two stages, three micro-batches, one overlapped pair on each stage (F2 with BW0 on stage 0,
/// F1 with BW0 on stage 1). At unit costs (BW = 2): stage 1 runs F0 [1, 2], the pair [2, 5],
/// F2 [8, 9], BW1 [9, 11], BW2 [11, 13]; stage 0 F0 [0, 1], F1 [1, 2], the pair [5, 8] (its
/// BW0 waits for stage 1's), BW1 [11, 13], BW2 [13, 15].
inline pipesched::schedule pair_schedule() {
  using pipesched::make_op;
  using pipesched::op_kind;
  using pipesched::overlapping_next;
  pipesched::schedule s = pipesched::schedule::sequential("pairs", 2, 3);
  s.stage_ops(0) = {make_op(op_kind::forward, 0),
                    make_op(op_kind::forward, 1),
                    overlapping_next(make_op(op_kind::forward, 2)),
                    make_op(op_kind::backward_full, 0),
                    make_op(op_kind::backward_full, 1),
                    make_op(op_kind::backward_full, 2)};
  s.stage_ops(1) = {
      make_op(op_kind::forward, 0),       overlapping_next(make_op(op_kind::forward, 1)),
      make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 2),
      make_op(op_kind::backward_full, 1), make_op(op_kind::backward_full, 2)};
  return s;
}

}  // namespace test_support
