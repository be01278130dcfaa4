#include <type_traits>

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

TEST_CASE("op: brace initialisation takes kind, micro-batch, chunk like make_op", "[ir][op]") {
  // op{forward, 3} used to set the spare byte to 3 and leave the micro-batch at 0.
  static_assert(op{op_kind::forward, 3}.mb == 3);
  static_assert(op{op_kind::forward, 3}.chunk == 0);
  static_assert(op{op_kind::backward_input, 5, 1} == make_op(op_kind::backward_input, 5, 1));
  static_assert(op{op_kind::backward_input, 5, 1}.chunk == 1);
  static_assert(op{}.kind == op_kind::forward && op{}.mb == 0 && op{}.flags == 0);
  static_assert(!std::is_aggregate_v<op>);  // no brace path to the spare byte
  static_assert(std::is_trivially_copyable_v<op>);
  const op o{op_kind::backward_weight, 12, 2};
  CHECK(to_string(o, true) == "W12.2");
  CHECK(o.flags == 0);
}

TEST_CASE("op: the overlap flag marks an op to run with the next one of its stage",
          "[ir][op][overlap]") {
  constexpr op f = make_op(op_kind::forward, 7, 0);
  constexpr op marked = overlapping_next(f);
  static_assert(!overlaps_next(f));
  static_assert(overlaps_next(marked));
  static_assert(marked.flags == op_flag::overlap_next);
  static_assert(overlapping_next(marked) == marked);  // idempotent
  // Equality compares the flags (a golden order with overlap marks checks them) ...
  static_assert(marked != f);
  // ... same_work ignores them.
  static_assert(same_work(marked, f));
  static_assert(!same_work(marked, make_op(op_kind::forward, 7, 1)));
  STATIC_REQUIRE(sizeof(marked) == 8);
  CHECK(to_string(marked) == "F7");  // the op's own name does not change
}

TEST_CASE("op: R and the recompute mark", "[ir][op][recompute]") {
  static_assert(to_string(op_kind::recompute) == "R");
  static_assert(parse_op_kind("R") == op_kind::recompute);
  static_assert(is_compute(op_kind::recompute) && !is_comm(op_kind::recompute));
  static_assert(!produces_input_grad(op_kind::recompute));
  constexpr op f = make_op(op_kind::forward, 4, 1);
  static_assert(!is_recomputed(f));
  static_assert(is_recomputed(recomputing(f)));
  static_assert(same_work(recomputing(f), f) && !(recomputing(f) == f));
  static_assert(!is_recomputed(recomputing(make_op(op_kind::backward_input, 4))));  // F only
  static_assert(!overlaps_next(recomputing(f)));
  CHECK(to_string(make_op(op_kind::recompute, 3, 1), true) == "R3.1");
}
