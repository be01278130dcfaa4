#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
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

namespace {
// Whether `a == b` compiles (the cross-kind comparisons are deleted).
template <class A, class B>
concept equality_comparable_with_index = requires(A a, B b) {
  a == b;
};
// Whether f(x) compiles for a function taking a stage.
template <class T>
concept passes_as_stage = requires(T t) {
  [](stage_index) {}(t);
};
}  // namespace

TEST_CASE("index types: stage, micro-batch and chunk cannot be swapped silently",
          "[ir][op][index]") {
  // From and to the integer, implicitly: loops, arithmetic and subscripts read as before.
  static_assert(std::is_convertible_v<std::uint32_t, stage_index>);
  static_assert(std::is_convertible_v<stage_index, std::uint32_t>);
  static_assert(std::is_convertible_v<std::uint16_t, chunk_index>);
  // Never to another kind: that would take two user-defined conversions.
  static_assert(!std::is_convertible_v<microbatch_index, stage_index>);
  static_assert(!std::is_convertible_v<stage_index, microbatch_index>);
  static_assert(!std::is_convertible_v<chunk_index, stage_index>);
  static_assert(!std::is_convertible_v<global_chunk, stage_index>);
  static_assert(!std::is_convertible_v<stage_index, global_chunk>);
  static_assert(passes_as_stage<std::uint32_t> && passes_as_stage<stage_index>);
  static_assert(!passes_as_stage<microbatch_index> && !passes_as_stage<chunk_index>);
  // Comparing two kinds is deleted; the same kind or an integer compares as the integer.
  static_assert(!equality_comparable_with_index<stage_index, microbatch_index>);
  static_assert(!equality_comparable_with_index<global_chunk, stage_index>);
  static_assert(equality_comparable_with_index<stage_index, stage_index>);
  static_assert(equality_comparable_with_index<stage_index, int>);
  // Same size and layout as the integer, so op stays 8 bytes and tables stay as dense.
  static_assert(sizeof(stage_index) == 4 && sizeof(chunk_index) == 2);
  static_assert(std::is_trivially_copyable_v<stage_index>);
  // numeric_limits and hash as of the integer (the primary template would say max() == 0).
  static_assert(std::numeric_limits<stage_index>::max() == UINT32_MAX);
  static_assert(std::numeric_limits<chunk_index>::max() == UINT16_MAX);
  CHECK(std::hash<microbatch_index>{}(7) == std::hash<std::uint32_t>{}(7));

  stage_index s = 3;
  ++s;
  s += 2;
  CHECK(s == 6);
  CHECK(s - 1 == 5);  // arithmetic is the integer's
  const microbatch_index mb{4};
  CHECK(s > mb.value);  // across kinds only by asking for the value
  CHECK(static_cast<stage_index>(std::size_t{9}) == 9);
  const op o{op_kind::forward, mb, chunk_index{1}};
  CHECK(o.mb == 4);
  CHECK(o.chunk == 1);
}
