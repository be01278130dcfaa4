#include <cstddef>
#include <cstdint>

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

TEST_CASE("detail::op_position: a list position as timed_op's 32-bit index, or an error",
          "[timed_op]") {
  CHECK(sizeof(timed_op) == 32);
  CHECK(detail::op_position(7, 2, "here") == 7u);
  CHECK(detail::op_position(max_stage_ops, 0, "here") == UINT32_MAX);
  CHECK_THROWS_WITH(detail::op_position(std::size_t{1} << 33, 3, "run_mpi"),
                    Catch::Matchers::Contains(
                        "run_mpi: op 8589934592 of stage 3 is beyond max_stage_ops (4294967295)"));
}
