#include <catch2/catch.hpp>

#include <pipesched/ir/placement.hpp>

using namespace pipesched;

TEST_CASE("sequential, loop and V placements map local to global chunks", "[ir][placement]") {
  const auto seq = placement::sequential(4);
  CHECK(seq.total_chunks() == 4);
  CHECK(seq.global(2, 0) == 2);
  CHECK(seq.kind() == placement_kind::sequential);

  const auto loop = placement::loop(4, 3);
  CHECK(loop.global(1, 2) == 9);  // chunk c*p + s
  CHECK(loop.stage_of(9) == 1);
  CHECK(loop.local_of(9) == 2);
  CHECK(loop.next_stage(3, 0) == std::optional<stage_index>(0));  // 3 -> 4 wraps to stage 0
  CHECK_FALSE(loop.next_stage(3, 2).has_value());                 // chunk 11 is last

  const auto v = placement::v_shape(4);
  CHECK(v.global(0, 0) == 0);
  CHECK(v.global(0, 1) == 7);
  CHECK(v.global(3, 0) == 3);
  CHECK(v.global(3, 1) == 4);  // the turn of the V: chunks 3 and 4 on the same stage
  CHECK(v.next_stage(3, 0) == std::optional<stage_index>(3));
  CHECK(v.is_last(v.global(0, 1)));
}

TEST_CASE("custom placement must be a permutation", "[ir][placement]") {
  const auto c = placement::custom(2, 2, {3, 0, 1, 2});
  CHECK(c.stage_of(3) == 0);
  CHECK(c.local_of(0) == 1);
  CHECK_THROWS_WITH(placement::custom(2, 2, {0, 0, 1, 2}), Catch::Contains("permutation"));
  CHECK_THROWS_WITH(placement::custom(2, 2, {0, 1}), Catch::Contains("table size (2)"));
  CHECK_THROWS_WITH(placement::sequential(0), "placement: stages (p=0) must be at least 1");
  CHECK_THROWS_WITH(placement::loop(2, 0), Catch::Contains("chunks (v=0)"));
}
