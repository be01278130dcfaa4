#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <catch2/catch.hpp>

#include <pipesched/ir/schedule.hpp>

using namespace pipesched;

TEST_CASE("schedule holds a spec and one list per stage", "[ir][schedule]") {
  schedule s = schedule::sequential("x", 3, 5);
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
  CHECK_THROWS_WITH(schedule::sequential("x", 3, 0), Catch::Contains("microbatches (m=0)"));
  CHECK_THROWS_WITH(schedule::sequential("x", 0, 2), Catch::Contains("stages (p=0)"));
}

// Built by the named factories only: the constructors that took m second
// (with a placement) or third (with a stage count) cannot be called, so the two counts cannot
// be swapped by picking the other overload.
static_assert(!std::is_constructible_v<schedule, std::string, std::uint32_t, std::uint32_t>);
static_assert(!std::is_constructible_v<schedule, const char*, int, int>);
static_assert(!std::is_constructible_v<schedule, std::string, std::uint32_t, placement>);
static_assert(!std::is_constructible_v<schedule, std::string, placement, std::uint32_t>);
static_assert(std::is_default_constructible_v<schedule>);

TEST_CASE("schedule factories: the shape first, m last", "[ir][schedule]") {
  const schedule a = schedule::sequential("a", 4, 8);
  CHECK(a.stages() == 4);
  CHECK(a.microbatches() == 8);
  CHECK(a == schedule::on("a", placement::sequential(4), 8));
  const schedule v = schedule::on("v", placement::v_shape(3), 5);
  CHECK(v.stages() == 3);
  CHECK(v.chunks() == 2);
  CHECK(v.microbatches() == 5);
  const schedule d;
  CHECK(d.stages() == placement{}.stages());
  CHECK(d.microbatches() == 1);
}

TEST_CASE("schedule equality: shape and op lists, not the name", "[ir][schedule]") {
  schedule a = schedule::sequential("a", 2, 3);
  a.stage_ops(0) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  schedule b = a;
  b.set_name("renamed");
  CHECK(a == b);  // the name is a label
  schedule other_m = schedule::sequential("a", 2, 4);
  other_m.stage_ops(0) = a.stage_ops(0);
  CHECK_FALSE(a == other_m);                                               // micro-batches differ
  schedule other_placement = schedule::on("a", placement::loop(2, 2), 3);  // same p and m, v = 2
  CHECK_FALSE(a == other_placement);
  b.stage_ops(0).push_back(make_op(op_kind::forward, 1));
  CHECK_FALSE(a == b);  // op lists differ
  schedule swapped = a;
  std::swap(swapped.stage_ops(0)[0], swapped.stage_ops(0)[1]);
  CHECK_FALSE(a == swapped);  // order matters
}

TEST_CASE("a dual schedule splits the micro-batches over its two routes", "[ir][schedule]") {
  const schedule s = schedule::on("d", placement::dual(2), 6);
  CHECK(s.route_of(0) == 0);
  CHECK(s.route_of(2) == 0);
  CHECK(s.route_of(3) == 1);
  CHECK(s.on_route(4, 2));
  CHECK_FALSE(s.on_route(4, 1));
  CHECK(schedule::sequential("s", 2, 5).route_of(4) == 0);
  CHECK_THROWS_WITH(schedule::on("d", placement::dual(2), 5),
                    "schedule: microbatches (m=5) must be a multiple of the routes (2) of "
                    "placement dual: each route takes m/routes micro-batches");
}
