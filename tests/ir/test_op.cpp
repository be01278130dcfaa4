#include <catch2/catch.hpp>

#include <pipesched/ir/op.hpp>

using namespace pipesched;

TEST_CASE("op is 8 bytes and kinds round-trip through their short names", "[ir][op]") {
  STATIC_REQUIRE(sizeof(op) == 8);
  for (op_kind k : all_op_kinds) {
    CHECK(parse_op_kind(to_string(k)) == k);
  }
  CHECK_FALSE(parse_op_kind("X").has_value());
  CHECK(to_string(make_op(op_kind::backward_full, 12)) == "BW12");
  CHECK(to_string(make_op(op_kind::forward, 3, 1), true) == "F3.1");
  CHECK(is_comm(op_kind::recv_backward));
  CHECK_FALSE(is_comm(op_kind::backward_weight));
  CHECK(produces_input_grad(op_kind::backward_full));
}
