#include <catch2/catch.hpp>

#include "pipesched/ir/timed_op.hpp"

using namespace pipesched;

TEST_CASE("timed_op: an op with its interval, compared field by field", "[timed_op]") {
  const timed_op a{1, 4, op(op_kind::backward_input, 3, 1), 2.5, 6.0};
  CHECK(a.duration() == 3.5);
  CHECK(a == timed_op{1, 4, op(op_kind::backward_input, 3, 1), 2.5, 6.0});
  CHECK_FALSE(a == timed_op{1, 4, op(op_kind::backward_input, 3, 0), 2.5, 6.0});
  CHECK_FALSE(a == timed_op{1, 5, op(op_kind::backward_input, 3, 1), 2.5, 6.0});
  CHECK_FALSE(a == timed_op{1, 4, op(op_kind::backward_input, 3, 1), 2.5, 6.5});
}
