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

TEST_CASE("dual placement: two routes, stage s and p-1-s on each stage", "[ir][placement]") {
  const placement pl = placement::dual(3);
  CHECK(pl.kind() == placement_kind::dual);
  CHECK(pl.chunks() == 2);
  CHECK(pl.routes() == 2);
  CHECK(pl.route_length() == 3);
  // Route 0 is global chunks 0, 1, 2 on stages 0, 1, 2; route 1 is 3, 4, 5 on stages 2, 1, 0.
  CHECK(pl.global(0, 0) == 0);
  CHECK(pl.global(2, 1) == 3);
  CHECK(pl.global(0, 1) == 5);
  CHECK(pl.is_first(0));
  CHECK(pl.is_first(3));
  CHECK(pl.is_last(2));
  CHECK(pl.is_last(5));
  CHECK_FALSE(pl.is_last(3));
  CHECK(pl.route_of_chunk(2) == 0);
  CHECK(pl.route_of_chunk(3) == 1);
  CHECK_FALSE(pl.next_stage(2, 0).has_value());  // route 0's last chunk: the loss
  CHECK(pl.next_stage(2, 1) == stage_index{1});  // route 1 runs towards stage 0
  CHECK_FALSE(pl.prev_stage(2, 1).has_value());  // route 1 enters at stage 2
  CHECK(pl.prev_stage(0, 1) == stage_index{1});
  // Other placements have one route over all their chunks.
  CHECK(placement::v_shape(3).routes() == 1);
  CHECK(placement::v_shape(3).is_last(5));
  CHECK_FALSE(placement::v_shape(3).is_first(3));
  // The same table as a custom placement is another layout: one route, not two.
  CHECK_FALSE(placement::custom(3, 2, {0, 5, 1, 4, 2, 3}) == pl);
}
