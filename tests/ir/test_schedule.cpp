#include <catch2/catch.hpp>

#include <pipesched/ir/schedule.hpp>

using namespace pipesched;

TEST_CASE("schedule holds a spec and one list per stage", "[ir][schedule]") {
  schedule s("x", 3, 5);
  CHECK(s.stages() == 3);
  CHECK(s.microbatches() == 5);
  CHECK(s.chunks() == 1);
  CHECK(s.size() == 0);
  s.stage_ops(1).push_back(make_op(op_kind::forward, 0));
  CHECK(s.size() == 1);
  CHECK(s.ops(1).size() == 1);
  CHECK_FALSE(s.has_comm());
  s.stage_ops(2).push_back(make_op(op_kind::send_forward, 0));
  CHECK(s.has_comm());
  CHECK_THROWS_WITH(schedule("x", 3, 0), Catch::Contains("microbatches (m=0)"));
  CHECK_THROWS_WITH(schedule("x", 0, 2), Catch::Contains("stages (p=0)"));
}
