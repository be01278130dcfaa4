#include <string>

#include <catch2/catch.hpp>

#include <pipesched/plan/plan_request.hpp>

using namespace pipesched;

TEST_CASE("plan_request: baseline text sets each choice once", "[plan][request]") {
  const plan_fixed f = parse_plan_choices("tp=8,pp=16,schedule=1f1b,sp=on,partition=1,2,3", "b");
  CHECK(f.tp == 8u);
  CHECK(f.pp == 16u);
  CHECK(f.schedule == std::string("1f1b"));
  CHECK(f.sequence_parallel == true);
  CHECK(f.partition.layers == std::vector<std::uint32_t>{1, 2, 3});
  CHECK_THROWS_WITH(parse_plan_choices("tp=4,tp=8", "--baseline"),
                    "--baseline: tp is given twice (tp=4 and tp=8)");
  CHECK_THROWS_WITH(parse_plan_choices("recompute=none,recompute=full", "b"),
                    "b: recompute is given twice (recompute=none and recompute=full)");
  CHECK_THROWS_WITH(parse_plan_choices("", "--baseline"),
                    "--baseline: give key=value choices (e.g. tp=8,pp=16,schedule=1f1b), not an "
                    "empty text");
  CHECK_THROWS_WITH(parse_plan_choices("tp=8,", "b"),
                    "b: expected key=value items separated by commas, got \"\"");
  CHECK_THROWS_WITH(parse_plan_choices("tp", "b"),
                    "b: expected key=value items separated by commas, got \"tp\"");
}
